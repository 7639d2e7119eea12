package releases_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/releases"
)

// TestMissingFileRemembered: an OpenTofu release the origin published
// without its cosign signature (.sig). Many requests for it, at once and
// one after another, cost one origin request while the miss is
// remembered (the version list's time to live), each answered not found
// and the ones answered from memory counted; the certificate (.pem),
// which the origin has, is served as before. Once the time has passed,
// the file the origin published since is found. An origin that fails
// (503) is not taken for one that lacks the file.
func TestMissingFileRemembered(t *testing.T) {
	o := startOrigin(t)
	const sig, pem = "tofu_1.8.0_SHA256SUMS.sig", "tofu_1.8.0_SHA256SUMS.pem"
	const sigPath = "/tofu/download/v1.8.0/" + sig
	o.Withhold(sig, true)
	r := newRig(t, o, "", false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	doc := func(name string) ([]byte, error) {
		return r.rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", name)
	}

	const burst, more = 8, 12
	var wg sync.WaitGroup
	errs := make(chan error, burst)
	for range burst {
		wg.Go(func() {
			_, err := doc(sig)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !isNotFound(err) {
			t.Fatalf("%s the origin lacks: %v, want not found", sig, err)
		}
	}
	for range more {
		if _, err := doc(sig); !isNotFound(err) {
			t.Fatalf("%s again: %v, want not found", sig, err)
		}
	}
	if n := o.Hits(sigPath); n != 1 {
		t.Errorf("%d requests for %s made %d origin requests, want 1", burst+more, sig, n)
	}
	// Those after the first origin answer come from memory: all the
	// later ones at least.
	if n := r.metrics.servedCount("opentofu/tofu/missing"); n < more || n > burst+more-1 {
		t.Errorf("%d misses answered from memory counted, want %d to %d", n, more, burst+more-1)
	}
	if data, err := doc(pem); err != nil || !bytes.Equal(data, o.CosignFile("tofu", "1.8.0", pem)) {
		t.Errorf("%s, which the origin has: %q, %v", pem, data, err)
	}

	// Published late: within the time the miss is remembered, still
	// not found, without asking; after it, found and kept.
	o.Withhold(sig, false)
	if _, err := doc(sig); !isNotFound(err) || o.Hits(sigPath) != 1 {
		t.Errorf("within the time the miss is remembered: %v, %d origin requests, want not found and 1", err, o.Hits(sigPath))
	}
	r.clock.Add(10*time.Minute + time.Second) // the default ListTTL
	if data, err := doc(sig); err != nil || !bytes.Equal(data, o.CosignFile("tofu", "1.8.0", sig)) {
		t.Fatalf("%s once published and the miss's time past: %q, %v", sig, data, err)
	}
	if n := o.Hits(sigPath); n != 2 {
		t.Errorf("%d origin requests for %s, want 2", n, sig)
	}
}

// TestMissingFileNotRememberedOnFailure: an origin that fails (503) has
// not said it lacks the file: the next request asks it again, and finds
// the file once the origin is back.
func TestMissingFileNotRememberedOnFailure(t *testing.T) {
	o := startOrigin(t)
	const pem = "tofu_1.8.0_SHA256SUMS.pem"
	r := newRig(t, o, "", false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The verified SHA256SUMS first, so that only the file fails.
	if _, err := r.rel.Sums(ctx, releases.OpenTofu, "tofu", "1.8.0"); err != nil {
		t.Fatal(err)
	}
	o.SetDown(true)
	if _, err := r.rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", pem); err == nil || isNotFound(err) {
		t.Fatalf("%s with the origin down: %v, want an origin error, not not found", pem, err)
	}
	o.SetDown(false)
	if data, err := r.rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", pem); err != nil || !bytes.Equal(data, o.CosignFile("tofu", "1.8.0", pem)) {
		t.Errorf("%s with the origin back: %q, %v", pem, data, err)
	}
	if n := r.metrics.servedCount("opentofu/tofu/missing"); n != 0 {
		t.Errorf("%d misses answered from memory, want none", n)
	}
}

// TestMissingSumsRemembered: a listed release the origin published
// without its SHA256SUMS (or before it): asked for again and again (a
// version list under a minimum release age looks its newest versions up
// on every request), it costs one origin request while the miss is
// remembered, each answered not found; once the time has passed, the
// SHA256SUMS published since is found.
func TestMissingSumsRemembered(t *testing.T) {
	o := startOrigin(t)
	const sums = "tofu_1.8.0_SHA256SUMS"
	const sumsPath = "/tofu/download/v1.8.0/" + sums
	o.Withhold(sums, true)
	r := newRig(t, o, "", false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 10 {
		if _, err := r.rel.Sums(ctx, releases.OpenTofu, "tofu", "1.8.0"); !isNotFound(err) {
			t.Fatalf("ask %d: %v, want not found", i, err)
		}
	}
	if n := o.Hits(sumsPath); n != 1 {
		t.Errorf("ten asks for %s made %d origin requests, want 1", sums, n)
	}
	o.Withhold(sums, false)
	r.clock.Add(10*time.Minute + time.Second) // the default ListTTL
	if _, err := r.rel.Sums(ctx, releases.OpenTofu, "tofu", "1.8.0"); err != nil {
		t.Fatalf("once published and the miss's time past: %v", err)
	}
}

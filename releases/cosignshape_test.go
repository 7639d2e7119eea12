package releases_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// errorPage is what a proxy in front of the origin may answer 200 with.
const errorPage = "<!DOCTYPE html>\n<html><head><title>Access denied</title></head><body>Blocked by policy</body></html>\n"

// TestCosignFileOfAnotherShapeRefused: an OpenTofu cosign file the origin
// answers with something cosign never writes (an HTML page, the base64
// of one, a PEM of no certificate, nothing) is refused as a bad origin
// answer naming the file, and not kept: the next request asks the origin
// again and serves the real file, byte for byte, once it sends one.
func TestCosignFileOfAnotherShapeRefused(t *testing.T) {
	const sig, pemName = "tofu_1.8.0_SHA256SUMS.sig", "tofu_1.8.0_SHA256SUMS.pem"
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x01}})
	for _, tc := range []struct {
		name, file string
		body       []byte
	}{
		{"html signature", sig, []byte(errorPage)},
		{"html certificate", pemName, []byte(errorPage)},
		{"base64 of a page as certificate", pemName, []byte(base64.StdEncoding.EncodeToString([]byte(errorPage)))},
		{"no certificate in the PEM", pemName, []byte(base64.StdEncoding.EncodeToString(keyPEM))},
		{"empty signature", sig, []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := startOrigin(t)
			r := newRig(t, o, "", false)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			path := "/tofu/download/v1.8.0/" + tc.file
			o.SetCosignFile(tc.file, tc.body)
			for i := 1; i <= 2; i++ {
				_, err := r.rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", tc.file)
				var oe *failure.OriginError
				if !errors.As(err, &oe) || oe.Kind != failure.OriginFailed || isNotFound(err) || !strings.Contains(err.Error(), tc.file) {
					t.Fatalf("request %d: %v, want a bad origin answer naming %s", i, err, tc.file)
				}
				if n := o.Hits(path); n != i {
					t.Fatalf("request %d made %d origin requests in all, want %d: the refused file was kept", i, n, i)
				}
			}
			o.SetCosignFile(tc.file, nil)
			for _, name := range []string{sig, pemName} {
				data, err := r.rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", name)
				if want := o.CosignFile("tofu", "1.8.0", name); err != nil || !bytes.Equal(data, want) {
					t.Fatalf("%s once the origin sends it: %q, %v, want %q", name, data, err, want)
				}
			}
		})
	}
}

// TestCosignFilesOfEveryShapeCosignReads: what cosign sign-blob writes
// without --b64 (a PEM certificate, a DER signature), and its base64
// with a line break after it, are passed through as the origin sends
// them, and kept: asked of the origin once.
func TestCosignFilesOfEveryShapeCosignReads(t *testing.T) {
	const sig, pemName = "tofu_1.8.0_SHA256SUMS.sig", "tofu_1.8.0_SHA256SUMS.pem"
	o := startOrigin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rawPEM, err := base64.StdEncoding.DecodeString(string(o.CosignFile("tofu", "1.8.0", pemName)))
	if err != nil {
		t.Fatal(err)
	}
	der, err := base64.StdEncoding.DecodeString(string(o.CosignFile("tofu", "1.8.0", sig)))
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range []struct{ sig, pem []byte }{
		{der, rawPEM},
		{append(o.CosignFile("tofu", "1.8.0", sig), '\n'), append(o.CosignFile("tofu", "1.8.0", pemName), '\n')},
	} {
		r := newRig(t, o, "", false)
		o.SetCosignFile(sig, pair.sig)
		o.SetCosignFile(pemName, pair.pem)
		for name, want := range map[string][]byte{sig: pair.sig, pemName: pair.pem} {
			before := o.Hits("/tofu/download/v1.8.0/" + name)
			for range 2 {
				if data, err := r.rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", name); err != nil || !bytes.Equal(data, want) {
					t.Fatalf("%s: %q, %v, want %q", name, data, err, want)
				}
			}
			if n := o.Hits("/tofu/download/v1.8.0/"+name) - before; n != 1 {
				t.Errorf("%s served twice with %d origin requests, want 1", name, n)
			}
		}
	}
}

// TestCosignFileKeptOfAnotherShapeFetchedAgain: a cosign file kept
// before the mirror checked them, an HTML page, is not served: the
// origin is asked again, and the file it sends replaces it.
func TestCosignFileKeptOfAnotherShapeFetchedAgain(t *testing.T) {
	const sig = "tofu_1.8.0_SHA256SUMS.sig"
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.store.PutMeta("releases/file/opentofu/tofu/1.8.0/"+sig, []byte(errorPage)); err != nil {
		t.Fatal(err)
	}
	want := o.CosignFile("tofu", "1.8.0", sig)
	for range 2 {
		if data, err := r.rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", sig); err != nil || !bytes.Equal(data, want) {
			t.Fatalf("%s: %q, %v, want %q", sig, data, err, want)
		}
	}
	if n := o.Hits("/tofu/download/v1.8.0/" + sig); n != 1 {
		t.Errorf("%d origin requests, want 1", n)
	}
}

// TestCosignFileKeptOfAnotherShapeNotExported: what an export carries of
// a version (AirGap.Held) leaves out a cosign file kept before the mirror
// checked them that is an HTML page, and carries the one beside it that
// is a signature.
func TestCosignFileKeptOfAnotherShapeNotExported(t *testing.T) {
	const sig, pemName = "tofu_1.8.0_SHA256SUMS.sig", "tofu_1.8.0_SHA256SUMS.pem"
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	if _, _, err := r.read(releases.OpenTofu, "tofu", "1.8.0", tofuZip); err != nil {
		t.Fatal(err)
	}
	r.waitIdle()
	if err := r.store.PutMeta("releases/file/opentofu/tofu/1.8.0/"+pemName, []byte(errorPage)); err != nil {
		t.Fatal(err)
	}
	if err := r.store.PutMeta("releases/file/opentofu/tofu/1.8.0/"+sig, o.CosignFile("tofu", "1.8.0", sig)); err != nil {
		t.Fatal(err)
	}
	var passed map[string][]byte
	if err := r.rel.AirGap().Held(func(h releases.HeldVersion) error {
		if h.Sums != nil && h.Sums.Version == "1.8.0" {
			passed = h.PassedThrough
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := passed[pemName]; ok {
		t.Errorf("the export carries the HTML page kept as %s", pemName)
	}
	if !bytes.Equal(passed[sig], o.CosignFile("tofu", "1.8.0", sig)) {
		t.Errorf("the export carries %q as %s, want the signature kept", passed[sig], sig)
	}
}

package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/internal/cachetest"
	"github.com/tfmirror/tfmirror/internal/fakeorigin"
	"github.com/tfmirror/tfmirror/verify"
)

// A check of the whole cache reads every cached package, provider
// packages against their stored evidence and module packages against
// their sha256, without asking the origin; it finds exactly the packages
// whose bytes were damaged on disk, and keeps them.
func TestVerifyCache(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64"})
	h.readAll("1.0.0", "2.0.0")
	h.origin.AddTarball("vpc-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	h.origin.AddModule("acme", "vpc", "aws", "1.0.0", h.origin.TarballURL("vpc-1.0.0.tar.gz"))
	mod, _, err := readModule(t, h, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	h.waitIdle()

	check := func() map[string]CachedCheck {
		t.Helper()
		h.origin.ResetHits()
		got := map[string]CachedCheck{}
		if err := h.engine.VerifyCache(t.Context(), func(c CachedCheck) {
			got[fmt.Sprintf("%s %s %s %s", c.Kind, c.Address, c.Version, c.Platform)] = c
		}); err != nil {
			t.Fatal(err)
		}
		if n := h.origin.TotalHits(); n != 0 {
			t.Errorf("the check asked the origin %d times", n)
		}
		return got
	}
	if _, ok := h.engine.LastCacheCheck(); ok {
		t.Error("a check is remembered before any ran")
	}
	p := h.provider().String()
	want := map[string]string{ // what each package is checked by
		"provider " + p + " 1.0.0 linux_amd64":      CheckedEvidence,
		"provider " + p + " 2.0.0 linux_amd64":      CheckedEvidence,
		"module " + testModule.String() + " 1.0.0 ": CheckedSHA256,
	}
	got := check()
	if len(got) != len(want) {
		t.Fatalf("checked %v, want %v", got, want)
	}
	for name, by := range want {
		if c, ok := got[name]; !ok || c.By != by || c.Problem != "" || c.Bytes <= 0 {
			t.Errorf("%s: %+v, want intact, checked by %s", name, c, by)
		}
	}

	damaged := h.origin.SHA256(ns, typ, "2.0.0", "linux_amd64")
	for _, sha := range []string{damaged, mod.SHA256} {
		if err := cachetest.FlipBlobByte(h.store, sha, 100); err != nil {
			t.Fatal(err)
		}
	}
	got = check()
	for name := range want {
		c := got[name]
		bad := c.SHA256 == damaged || c.SHA256 == mod.SHA256
		if bad && (c.Reason != string(verify.ReasonChecksum) || c.Problem == "") {
			t.Errorf("%s was damaged, but: %+v", name, c)
		}
		if !bad && c.Problem != "" {
			t.Errorf("%s is intact, but: %+v", name, c)
		}
	}
	if last, ok := h.engine.LastCacheCheck(); !ok || last.Checked != 3 || last.Failed != 2 || last.At.IsZero() {
		t.Errorf("last check %+v (%v), want 3 checked, 2 failed", last, ok)
	}
	// A report: what failed is kept, for the operator to prune.
	for _, sha := range []string{damaged, mod.SHA256} {
		if _, err := h.store.StatBlob(sha); err != nil {
			t.Errorf("the damaged archive %s was removed: %v", sha, err)
		}
	}

	h.stop()
	if err := h.engine.VerifyCache(t.Context(), func(CachedCheck) {}); !errors.Is(err, ErrShutDown) {
		t.Errorf("after shutdown: %v, want ErrShutDown", err)
	}
}

// With CheckEvery the engine checks the whole cache in the background,
// and a check under way (scheduled or asked for) ends at shutdown
// without holding it up.
func TestVerifyCacheScheduled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: Config{CheckEvery: 20 * time.Millisecond}})
	vs := []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0"}
	h.origin.AddProvider(ns, typ, vs, []string{"linux_amd64"})
	h.readAll(vs...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if last, ok := h.engine.LastCacheCheck(); ok && last.Checked == len(vs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no background check read the whole cache in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}

	started := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		var once sync.Once
		result <- h.engine.VerifyCache(context.Background(), func(CachedCheck) {
			once.Do(func() { close(started) })
			time.Sleep(200 * time.Millisecond) // a slow caller: the check is still under way
		})
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	begin := time.Now()
	if err := h.engine.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	h.closed = true
	h.store.Close()
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("shutdown took %v with a check under way", took)
	}
	if err := <-result; !errors.Is(err, ErrShutDown) {
		t.Errorf("the check under way ended with %v, want ErrShutDown", err)
	}
}

package unsigned_test

import (
	"bytes"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
)

// A withheld import never takes a version away from the clients. On a
// sealed mirror, the origin's own version of the same number comes by an
// import of its signed release (another mirror's export, or the
// publisher's signature): that import is taken, served as the origin's,
// and the withheld in-house build is set aside, kept, as a fetch from the
// origin sets it aside (TestWithheldAtStart).
func TestWithheldImportDoesNotBlockSignedImport(t *testing.T) {
	t.Parallel()
	// The origin's signed 1.0.0, as another mirror's cache holds it.
	src := harness.New(t, harness.Options{})
	src.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0"}, harness.Platforms)
	v := harness.MustVersion(t, "1.0.0")
	ev, err := src.Engine.Evidence(t.Context(), src.Provider(), v, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := func(pl string) []byte { return src.Origin.Archive(harness.NS, harness.Type, "1.0.0", pl) }

	// A sealed mirror holds an in-house 1.0.0 imported while the host was
	// named in --allow-unsigned-hosts, then restarted without it.
	allowed := harness.Options{CacheDir: t.TempDir(), Config: harness.Config{UnsignedHosts: []string{harness.OriginHost}, Offline: true}}
	h := harness.New(t, allowed)
	p := h.Provider()
	in, sha := harness.UnsignedImport(t, p, "1.0.0")
	if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatalf("seeding the in-house 1.0.0: %v", err)
	}
	h.Stop()
	h.Start(harness.Options{CacheDir: allowed.CacheDir, Config: harness.Config{Offline: true}})
	if w := h.Engine.Withheld(); len(w) != 1 {
		t.Fatalf("Withheld() = %+v, want the in-house 1.0.0", w)
	}

	signed := enginetest.ImportedFrom(ev, body)
	signed.Version = v
	if _, err := h.Engine.AirGap().Import(t.Context(), signed); err != nil {
		t.Fatalf("import of the origin's signed 1.0.0 refused because a withheld in-house build of that number is cached: %v", err)
	}
	for _, pl := range harness.Platforms {
		if a := h.Read(t.Context(), "1.0.0", pl); a.Err != nil || !bytes.Equal(a.Body, body(pl)) {
			t.Errorf("1.0.0 %s: %v, want the origin's archive", pl, a.Err)
		}
	}
	if _, ok := h.Engine.CachedSize(sha); !ok {
		t.Error("the withheld in-house archive, which cannot be fetched again, is gone")
	}
	h.Stop()
	h.Start(harness.Options{CacheDir: allowed.CacheDir, Config: harness.Config{Offline: true}})
	if w := h.Engine.Withheld(); len(w) != 1 || w[0].Version != "1.0.0" {
		t.Errorf("after a restart, Withheld() = %+v, want the in-house 1.0.0 set aside", w)
	}
}

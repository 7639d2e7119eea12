package modules_test

import (
	"errors"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// A location an origin gives is not one for ever: a pre-signed URL
// expires, a repository moves. A client asks the origin for it before
// each install; the mirror keeps the first one in the version's record.
// When the package must be fetched (its first fetch failed, or it was
// evicted) and the recorded location no longer serves, the origin is
// asked again and its location used: the package installs, as a
// direct install does, and is still held to the one first mirrored.
func TestModuleFetchedFromTheOriginsLocationOfToday(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	o := h.Origin
	files := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")})
	// The first answer names a location that does not serve.
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("expired.tar.gz"))
	if _, _, err := h.ReadModule("1.0.0"); err == nil {
		t.Fatal("the package was read from a location that does not serve (set-up broken)")
	}

	// The origin now gives one that does.
	o.AddTarball("a.tar.gz", files)
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("a.tar.gz"))
	pkg, want, err := h.ReadModule("1.0.0")
	if err != nil {
		t.Fatalf("after the origin's location changed: %v", err)
	}

	// Evicted, and the location it was fetched from no longer serves.
	if err := cachetest.DeleteBlob(h.Store, pkg.SHA256); err != nil {
		t.Fatal(err)
	}
	o.RemoveTarball("a.tar.gz")
	o.AddTarball("b.tar.gz", files)
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("b.tar.gz"))
	if _, got, err := h.ReadModule("1.0.0"); err != nil || string(got) != string(want) {
		t.Fatalf("evicted, its location gone: %v", err)
	}

	// Evicted again, and the origin's location gives other files: refused,
	// as ever.
	if err := cachetest.DeleteBlob(h.Store, pkg.SHA256); err != nil {
		t.Fatal(err)
	}
	o.RemoveTarball("b.tar.gz")
	o.AddTarball("c.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# two\n")}))
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("c.tar.gz"))
	if _, _, err := h.ReadModule("1.0.0"); !errors.Is(err, modules.ErrChanged) {
		t.Errorf("a package of other files for the version first mirrored: %v, want modules.ErrChanged", err)
	}
}

// A package fetched from the origin's location of today, once the one its
// record kept stopped serving, leaves the record with that location: the
// next fetch after an eviction goes there at once, not first to the
// location that failed (one failed request and a warning per eviction).
func TestRelocatedFetchKeepsTheNewLocation(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	o := h.Origin
	files := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")})
	o.AddTarball("a.tar.gz", files)
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("a.tar.gz"))
	pkg, _, err := h.ReadModule("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	// Evicted, and its location moved.
	if err := cachetest.DeleteBlob(h.Store, pkg.SHA256); err != nil {
		t.Fatal(err)
	}
	o.RemoveTarball("a.tar.gz")
	o.AddTarball("b.tar.gz", files)
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("b.tar.gz"))
	if _, _, err := h.ReadModule("1.0.0"); err != nil {
		t.Fatalf("evicted, its location moved: %v", err)
	}
	h.WaitIdle()
	var rec records.ModuleRecord
	key := records.ModuleRecordKey(harness.Module, enginetest.MustModuleVersion(t, "1.0.0"))
	if _, err := h.Store.GetMeta(key, &rec); err != nil || rec.Location != o.TarballURL("b.tar.gz") || rec.SHA256 != pkg.SHA256 {
		t.Fatalf("the record after the fetch from the new location: %+v, %v; want its location and the package first mirrored", rec, err)
	}
	// Evicted again: the package comes from the new location, at once.
	if err := cachetest.DeleteBlob(h.Store, pkg.SHA256); err != nil {
		t.Fatal(err)
	}
	before := o.Hits(fakeorigin.Tarball)
	if _, _, err := h.ReadModule("1.0.0"); err != nil {
		t.Fatal(err)
	}
	if got := o.Hits(fakeorigin.Tarball) - before; got != 1 {
		t.Errorf("the fetch after the next eviction made %d requests of the tarball host, want 1 (the location the record keeps now)", got)
	}
}

package retention

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
)

// importInHouse imports version vs of an in-house provider of a
// local-only host (it cannot be fetched again), with a package of about
// size bytes for each platform, and returns the packages' bytes by
// platform.
func importInHouse(t *testing.T, h *harness, p addrs.Provider, vs string, size int, platforms ...string) map[string][]byte {
	t.Helper()
	in := imports.Imported{Provider: p, Version: mustVersion(t, vs), Unsigned: true}
	out := map[string][]byte{}
	for i, pl := range platforms {
		zipped := enginetest.ZipOfSize(t, p.Type, size, uint64(100+i))
		out[pl] = zipped
		in.Packages = append(in.Packages, imports.Package{Platform: pl, Filename: "terraform-provider-" + p.Type + "_" + vs + "_" + pl + ".zip", Document: -1,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
			}})
	}
	if _, err := h.engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatalf("in-house import of %s: %v", vs, err)
	}
	return out
}

// TestNamedPruneOfWhatCannotBeFetchedAgainIsWhole: a prune naming a
// version that cannot be fetched again (an in-house import) removes its
// packages and takes it off its version list together, or leaves it
// whole. While a client reads one of its packages, no package of it is
// removed and it stays listed and served (each package it lists is
// there), for a later prune; once the read ends, the prune removes all.
// A version left listed with a package gone could never be served again:
// its packages cannot be fetched again.
func TestNamedPruneOfWhatCannotBeFetchedAgainIsWhole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	platforms := []string{"darwin_arm64", "linux_amd64"}
	pkgs := importInHouse(t, h, local, "1.0.0", 8<<10, platforms...)

	// A client reads the linux_amd64 package.
	reading, err := h.engine.OpenArchive(t.Context(), local, mustVersion(t, "1.0.0"), mustPlatform(t, "linux_amd64"))
	if err != nil {
		t.Fatal(err)
	}
	done, err := h.ret.Prune(t.Context(), PruneRequest{Provider: &local, Versions: []string{"1.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, rm := range done {
		if len(rm.Archives) > 0 || rm.Unlisted {
			t.Errorf("while a package of 1.0.0 was read, the prune removed %+v", rm)
		}
	}
	got, err := io.ReadAll(reading)
	reading.Close()
	if err != nil || !bytes.Equal(got, pkgs["linux_amd64"]) {
		t.Errorf("the read under way: %v, %d bytes", err, len(got))
	}
	list, _, err := h.engine.Versions(t.Context(), local)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := list.Find(mustVersion(t, "1.0.0")); !ok {
		t.Fatal("1.0.0 is no longer listed, but the prune said it removed nothing")
	}
	for _, pl := range platforms {
		a, err := h.engine.OpenArchive(t.Context(), local, mustVersion(t, "1.0.0"), mustPlatform(t, pl))
		if err != nil {
			t.Errorf("1.0.0 is listed, but its %s package is not served: %v", pl, err)
			continue
		}
		b, err := io.ReadAll(a)
		a.Close()
		if err != nil || !bytes.Equal(b, pkgs[pl]) {
			t.Errorf("1.0.0 %s: %v, %d bytes", pl, err, len(b))
		}
	}

	// The read over, a prune naming it removes it whole.
	done, err = h.ret.Prune(t.Context(), PruneRequest{Provider: &local, Versions: []string{"1.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || len(done[0].Archives) != 2 || !done[0].Unlisted {
		t.Fatalf("the second prune removed %+v, want both packages and the version unlisted", done)
	}
	if list, _, err = h.engine.Versions(t.Context(), local); err == nil {
		if _, ok := list.Find(mustVersion(t, "1.0.0")); ok {
			t.Error("1.0.0 is still listed after it was pruned")
		}
	}
	for _, pl := range platforms {
		if _, err := h.store.StatBlob(sha256Hex(pkgs[pl])); err == nil {
			t.Errorf("1.0.0 %s is still cached after it was pruned", pl)
		}
	}
}

// unremovable is an engine whose records of versions cannot be removed
// (a disk that refuses the write).
type unremovable struct{ Engine }

func (unremovable) RemoveVersion(kind, address, version string) error {
	return errors.New("the record cannot be written")
}

// TestNamedPruneKeepsWhatItCannotUnlist: when the record of a version that
// cannot be fetched again cannot be removed, none of its packages is: it
// stays listed and served, whole.
func TestNamedPruneKeepsWhatItCannotUnlist(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{wrap: func(e Engine) Engine { return unremovable{e} }})
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	pkgs := importInHouse(t, h, local, "1.0.0", 8<<10, "darwin_arm64", "linux_amd64")
	done, err := h.ret.Prune(t.Context(), PruneRequest{Provider: &local, Versions: []string{"1.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 0 {
		t.Errorf("a prune that could not unlist 1.0.0 removed %+v", done)
	}
	for pl, want := range pkgs {
		a, err := h.engine.OpenArchive(t.Context(), local, mustVersion(t, "1.0.0"), mustPlatform(t, pl))
		if err != nil {
			t.Errorf("1.0.0 is listed, but its %s package is not served: %v", pl, err)
			continue
		}
		b, err := io.ReadAll(a)
		a.Close()
		if err != nil || !bytes.Equal(b, want) {
			t.Errorf("1.0.0 %s: %v, %d bytes", pl, err, len(b))
		}
	}
}

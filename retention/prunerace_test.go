package retention

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	mirrorheld "github.com/tfmirror/tfmirror/v2/mirror/inventory"
)

// importDuringPrune is an engine that runs an import at one point of a
// named prune: afterScan, once its first ScanVersions has listed every
// version (between the prune's plan and its removals); afterRemove, once
// its first RemoveVersion has removed the version (between the record's
// removal and its archives').
type importDuringPrune struct {
	Engine
	mu          sync.Mutex
	afterScan   func()
	afterRemove func()
}

// take returns *f and clears it.
func (e *importDuringPrune) take(f *func()) func() {
	e.mu.Lock()
	defer e.mu.Unlock()
	run := *f
	*f = nil
	return run
}

func (e *importDuringPrune) ScanVersions(fn func(mirrorheld.Record)) error {
	err := e.Engine.ScanVersions(fn)
	if run := e.take(&e.afterScan); run != nil {
		run()
	}
	return err
}

func (e *importDuringPrune) RemoveVersion(kind, address, version string) error {
	err := e.Engine.RemoveVersion(kind, address, version)
	if run := e.take(&e.afterRemove); run != nil {
		run()
	}
	return err
}

// newImportDuringPrune is a harness whose engine is wrapped, with an
// in-house 1.0.0 imported (which cannot be fetched again), and its
// archive's bytes; the background rebuilds are stopped.
func newImportDuringPrune(t *testing.T) (*harness, *importDuringPrune, []byte) {
	t.Helper()
	wrapped := &importDuringPrune{}
	h := newHarness(t, harnessOptions{
		cfg:  mirror.Config{UnsignedHosts: []string{originHost}},
		ret:  Config{Interval: -1},
		wrap: func(e Engine) Engine { wrapped.Engine = e; return wrapped },
	})
	in, _ := unsignedImport(t, h.provider(), "1.0.0", 1<<10, 1)
	zipped := enginetest.ZipOfSize(t, typ, 1<<10, 1)
	if _, err := h.engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	h.ret.Close()
	return h, wrapped, zipped
}

// checkKept checks that 2.0.0, imported with the bytes of 1.0.0 while a
// prune named 1.0.0, is served, and kept from the size limit; and that
// 1.0.0 is gone.
func checkKept(t *testing.T, h *harness, zipped []byte) {
	t.Helper()
	sha := sha256Hex(zipped)
	if _, err := h.store.StatBlob(sha); err != nil {
		t.Errorf("the package imported for 2.0.0, which cannot be fetched again, was removed by the prune naming 1.0.0: %v", err)
	}
	if got, err := h.read(t.Context(), "2.0.0", "linux_amd64"); err != nil || !bytes.Equal(got, zipped) {
		t.Errorf("2.0.0 after the prune: %d bytes, %v", len(got), err)
	}
	if h.ret.prot.evictable(sha) {
		t.Errorf("the package imported for 2.0.0 may be evicted by the size limit")
	}
	if _, err := h.read(t.Context(), "1.0.0", "linux_amd64"); err == nil {
		t.Errorf("1.0.0 is still served after the prune naming it")
	}
}

// A prune naming a version that cannot be fetched again leaves an archive
// an import of another version (byte for byte the same package) recorded
// between the prune's reading of the records and its removals: neither
// deleted nor left to the size limit.
func TestNamedPruneKeepsAnArchiveImportedAfterItsPlan(t *testing.T) {
	t.Parallel()
	h, wrapped, zipped := newImportDuringPrune(t)
	in, _ := unsignedImport(t, h.provider(), "2.0.0", 1<<10, 1) // the same bytes as 1.0.0
	wrapped.mu.Lock()
	wrapped.afterScan = func() {
		if _, err := h.engine.AirGap().Import(t.Context(), in); err != nil {
			t.Errorf("import of 2.0.0: %v", err)
		}
	}
	wrapped.mu.Unlock()
	p := h.provider()
	done, err := h.ret.Prune(t.Context(), PruneRequest{Provider: &p, Versions: []string{"1.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || !done[0].Unlisted || len(done[0].Archives) != 0 {
		t.Errorf("removed %+v, want 1.0.0 unlisted without its archive", done)
	}
	checkKept(t, h, zipped)
}

// As above, for an import that names the archive once the prune removed
// the version's record, and writes its own record only once the prune
// has decided which archives go: the import's protection keeps it.
func TestNamedPruneKeepsAnArchiveImportedAsItRemoves(t *testing.T) {
	t.Parallel()
	h, wrapped, zipped := newImportDuringPrune(t)
	in, _ := unsignedImport(t, h.provider(), "2.0.0", 1<<10, 1) // the same bytes as 1.0.0
	other := enginetest.ZipOfSize(t, typ, 1<<10, 2)
	in.Packages[0].SHA256 = sha256Hex(zipped)
	// A second package, whose reading waits until the prune ended: the
	// import has then named the first, and not written its record.
	opened, release := make(chan struct{}), make(chan struct{})
	in.Packages = append(in.Packages, imports.Package{Platform: "darwin_arm64", Document: -1,
		Filename: "terraform-provider-" + typ + "_2.0.0_darwin_arm64.zip", SHA256: sha256Hex(other),
		Open: func(context.Context) (io.ReadCloser, int64, error) {
			close(opened)
			<-release
			return io.NopCloser(bytes.NewReader(other)), int64(len(other)), nil
		}})
	imported := make(chan error, 1)
	wrapped.mu.Lock()
	wrapped.afterRemove = func() {
		go func() {
			_, err := h.engine.AirGap().Import(context.Background(), in)
			imported <- err
		}()
		<-opened
	}
	wrapped.mu.Unlock()
	p := h.provider()
	done, err := h.ret.Prune(t.Context(), PruneRequest{Provider: &p, Versions: []string{"1.0.0"}})
	close(release)
	if ierr := <-imported; ierr != nil {
		t.Fatalf("import of 2.0.0: %v", ierr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || !done[0].Unlisted || len(done[0].Archives) != 0 {
		t.Errorf("removed %+v, want 1.0.0 unlisted without its archive", done)
	}
	// What the import protected stays so until a rebuild reads its record.
	if h.ret.prot.evictable(sha256Hex(zipped)) {
		t.Errorf("the package imported for 2.0.0 may be evicted by the size limit before a rebuild read its record")
	}
	h.ret.rebuild()
	checkKept(t, h, zipped)
}

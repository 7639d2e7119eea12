package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// errDiskFull is what a write to a full disk fails with.
var errDiskFull = errors.New("write /data/cache/000001.vlog: no space left on device")

// zipRecordFails fails the writes of module zip records while fails is
// set, as a disk that filled up after the zip was stored.
type zipRecordFails struct {
	Store
	fails *atomic.Bool
}

func (z zipRecordFails) PutMeta(key string, v any) error {
	if z.fails.Load() && strings.HasPrefix(key, "modzip/") {
		return errDiskFull
	}
	return z.Store.PutMeta(key, v)
}

// A module zip made while the disk is full (every cache write fails) is
// refused, and leaves nothing behind: no zip, no record naming one, so
// that nothing half-written is served and no digest is handed out for
// bytes the cache does not hold; the package, cached before, stays. A
// zip whose record the disk refuses (it filled up after the zip) is not
// served either. Once there is room the zip is made, stored and
// recorded.
func TestModuleZipOnFullDisk(t *testing.T) {
	t.Parallel()
	var full, recordFails atomic.Bool
	h := newHarness(t, harnessOptions{
		store: cache.Options{FailWrites: func() error {
			if full.Load() {
				return errDiskFull
			}
			return nil
		}},
		wrap: func(s Store) Store { return zipRecordFails{s, &recordFails} },
	})
	h.origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	h.origin.AddModule("acme", "vpc", "aws", "1.0.0", h.origin.TarballURL("vpc.tar.gz"))
	m := addrs.Module{Hostname: originHost, Namespace: "acme", Name: "vpc", System: "aws"}
	ctx := context.Background()
	v := enginetest.MustModuleVersion(t, "1.0.0")
	zips := h.engine.Modules().Zips()
	pkg, err := h.engine.Modules().OpenModule(ctx, m, v)
	if err != nil {
		t.Fatal(err)
	}
	pkg.Close()
	chunks, err := cachetest.ChunkCount(h.store)
	if err != nil {
		t.Fatal(err)
	}
	noRecord := func(when string) {
		t.Helper()
		var rec records.ModuleZipRecord
		if _, err := h.store.GetMeta(records.ModuleZipKey(m, v), &rec); !errors.Is(err, cache.ErrNotFound) {
			t.Errorf("zip record %s: %+v, %v; want none", when, rec, err)
		}
	}

	full.Store(true)
	if z, err := zips.OpenModuleZip(ctx, m, v); err == nil {
		z.Close()
		t.Fatal("a zip was served that the full disk could not store")
	}
	noRecord("after the full disk refused the zip")
	if n, err := cachetest.ChunkCount(h.store); n != chunks || err != nil {
		t.Errorf("%d chunks stored (%v), want the package's %d: the refused zip left some behind", n, err, chunks)
	}
	if _, err := h.store.StatBlob(pkg.SHA256); err != nil {
		t.Errorf("the package, cached before: %v", err)
	}

	full.Store(false)
	recordFails.Store(true)
	if z, err := zips.OpenModuleZip(ctx, m, v); err == nil {
		z.Close()
		t.Fatal("a zip was served whose record the full disk could not store")
	}
	noRecord("after the full disk refused it")

	recordFails.Store(false)
	z, err := zips.OpenModuleZip(ctx, m, v)
	if err != nil {
		t.Fatalf("with room again: %v", err)
	}
	made, err := io.ReadAll(z.Content())
	z.Close()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(made)
	var rec records.ModuleZipRecord
	if _, err := h.store.GetMeta(records.ModuleZipKey(m, v), &rec); err != nil || rec.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("zip record with room again: %+v, %v; want the zip's sha256", rec, err)
	}
}

// heldLocations holds every module location asked of the origin until
// release is closed, saying when one is asked (asked).
type heldLocations struct {
	Origin
	asked   chan struct{}
	release chan struct{}
}

func (o heldLocations) ModuleLocation(ctx context.Context, m addrs.Module, version string) (discovery.ModuleDownload, error) {
	select {
	case o.asked <- struct{}{}:
	default:
	}
	select {
	case <-o.release:
	case <-ctx.Done():
		return discovery.ModuleDownload{}, ctx.Err()
	}
	return o.Origin.ModuleLocation(ctx, m, version)
}

// A module version imported while the origin is asked for its location
// keeps the import's record: the location the origin answers after it is
// not written over it, which would leave the imported package (that may
// not be fetched again) named by no record, and have the version fetched
// from the origin in its place.
func TestImportModuleNotWrittenOverByALocationAsked(t *testing.T) {
	t.Parallel()
	held := heldLocations{asked: make(chan struct{}, 1), release: make(chan struct{})}
	h := newHarness(t, harnessOptions{cfg: Config{ScratchDir: t.TempDir()},
		wrapOrigin: func(o Origin) Origin { held.Origin = o; return held }})
	pkg := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")})
	h.origin.AddTarball("m.tar.gz", pkg)
	loc := h.origin.TarballURL("m.tar.gz")
	h.origin.AddModule("acme", "tarball", "aws", "0.1.0", loc)
	m := addrs.Module{Hostname: originHost, Namespace: "acme", Name: "tarball", System: "aws"}
	v := enginetest.MustModuleVersion(t, "0.1.0")
	sum := sha256.Sum256(pkg)
	sha := hex.EncodeToString(sum[:])

	located := make(chan error, 1)
	go func() {
		_, err := h.engine.Modules().ModuleLocation(context.Background(), m, v)
		located <- err
	}()
	<-held.asked
	if _, err := h.engine.Modules().ImportModule(context.Background(), modules.Imported{Module: m, Version: "0.1.0", Location: loc, SHA256: sha,
		Open: func(context.Context) (io.ReadCloser, int64, error) {
			return io.NopCloser(strings.NewReader(string(pkg))), int64(len(pkg)), nil
		}}); err != nil {
		t.Fatal(err)
	}
	close(held.release)
	if err := <-located; err != nil {
		t.Fatal(err)
	}
	var rec records.ModuleRecord
	if _, err := h.store.GetMeta(records.ModuleRecordKey(m, v), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.SHA256 != sha || rec.Provenance != records.ProvenanceImported {
		t.Errorf("record after the import and the location: sha256 %q, provenance %q; want the import's (%s, imported)", rec.SHA256, rec.Provenance, sha)
	}
}

// heldSource holds every module package download until its context is
// done, saying when one starts (entered).
type heldSource struct {
	Origin
	entered chan struct{}
}

func (o heldSource) OpenSource(ctx context.Context, _ svchost.Hostname, _ string) (io.ReadCloser, int64, error) {
	select {
	case o.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, 0, ctx.Err()
}

// A module package download that the shutdown's deadline cuts is not an
// error of the mirror's: it is logged as stopped by the shutdown (info),
// as an archive download is, not as a failed fetch that pages someone.
func TestModuleFetchStoppedByShutdownIsNoError(t *testing.T) {
	t.Parallel()
	logs := &observed.Logs{}
	held := heldSource{entered: make(chan struct{}, 1)}
	h := newHarness(t, harnessOptions{cfg: Config{ScratchDir: t.TempDir(), Logger: slog.New(logs)},
		wrapOrigin: func(o Origin) Origin { held.Origin = o; return held }})
	h.origin.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")}))
	h.origin.AddModule("acme", "tarball", "aws", "0.1.0", h.origin.TarballURL("m.tar.gz"))
	m := addrs.Module{Hostname: originHost, Namespace: "acme", Name: "tarball", System: "aws"}
	opened := make(chan error, 1)
	go func() {
		pkg, err := h.engine.Modules().OpenModule(context.Background(), m, enginetest.MustModuleVersion(t, "0.1.0"))
		if err == nil {
			pkg.Close()
		}
		opened <- err
	}()
	<-held.entered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := h.engine.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with a module download held: %v, want its deadline", err)
	}
	if err := <-opened; err == nil {
		t.Error("the module was opened although its download was cut")
	}
	for _, r := range logs.AtLeast(slog.LevelError) {
		t.Errorf("logged at %v: %s", r.Level, r.Message)
	}
	stopped := false
	for _, r := range logs.Records() {
		stopped = stopped || strings.Contains(r.Message, "stopped by shutdown")
	}
	if !stopped {
		t.Error("the download cut by the shutdown was not logged as such")
	}
}

// heldPackage holds the first read of the cached blob sha, once armed,
// until the engine's lifetime is cancelled (its shutdown's deadline),
// saying when that read starts (entered).
type heldPackage struct {
	Store
	sha     string
	armed   atomic.Bool
	entered chan struct{}
	life    func() context.Context
}

func (s *heldPackage) OpenBlob(sha string) (cache.BlobReader, error) {
	b, err := s.Store.OpenBlob(sha)
	if err != nil || sha != s.sha || !s.armed.Load() {
		return b, err
	}
	return heldReader{b, s}, nil
}

type heldReader struct {
	cache.BlobReader
	s *heldPackage
}

func (r heldReader) hold() {
	if r.s.armed.CompareAndSwap(true, false) {
		r.s.entered <- struct{}{}
		<-r.s.life().Done()
	}
}

func (r heldReader) Read(p []byte) (int, error) { r.hold(); return r.BlobReader.Read(p) }

func (r heldReader) ReadAt(p []byte, off int64) (int, error) {
	r.hold()
	return r.BlobReader.ReadAt(p, off)
}

// A module zip whose making the shutdown's deadline cuts is not an
// error of the mirror's, nor a package that cannot be made a zip: it is
// logged as stopped by the shutdown (info), as a package download is.
func TestModuleZipStoppedByShutdownIsNoError(t *testing.T) {
	t.Parallel()
	logs := &observed.Logs{}
	held := &heldPackage{entered: make(chan struct{}, 1)}
	h := newHarness(t, harnessOptions{cfg: Config{ScratchDir: t.TempDir(), Logger: slog.New(logs)},
		wrap: func(s Store) Store { held.Store = s; return held }})
	held.life = func() context.Context { return h.engine.life.Context() }
	h.origin.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")}))
	h.origin.AddModule("acme", "tarball", "aws", "0.1.0", h.origin.TarballURL("m.tar.gz"))
	m := addrs.Module{Hostname: originHost, Namespace: "acme", Name: "tarball", System: "aws"}
	v := enginetest.MustModuleVersion(t, "0.1.0")
	pkg, err := h.engine.Modules().OpenModule(t.Context(), m, v)
	if err != nil {
		t.Fatal(err)
	}
	held.sha = pkg.SHA256
	pkg.Close()
	held.armed.Store(true)
	made := make(chan error, 1)
	go func() {
		z, err := h.engine.Modules().Zips().OpenModuleZip(context.Background(), m, v)
		if err == nil {
			z.Close()
		}
		made <- err
	}()
	<-held.entered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := h.engine.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with a module zip being made: %v, want its deadline", err)
	}
	if err := <-made; err == nil {
		t.Error("the zip was served although its making was cut")
	}
	for _, r := range logs.AtLeast(slog.LevelError) {
		t.Errorf("logged at %v: %s", r.Level, r.Message)
	}
	stopped := false
	for _, r := range logs.Records() {
		stopped = stopped || strings.Contains(r.Message, "zip") && strings.Contains(r.Message, "stopped by shutdown")
	}
	if !stopped {
		t.Error("the zip's making cut by the shutdown was not logged as such")
	}
}

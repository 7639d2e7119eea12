package modules_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// stallingStore holds the first read of one key that finds nothing (or,
// with stale, finds the record without its package) until let go: a
// caller that read the cache just before another's fetch of the same
// version ended.
type stallingStore struct {
	harness.Store
	key   string
	stale bool
	held  atomic.Bool
	read  chan struct{} // closed once the held read has read
	letGo chan struct{}
}

func (s *stallingStore) GetMeta(key string, v any) (time.Time, error) {
	at, err := s.Store.GetMeta(key, v)
	if key != s.key {
		return at, err
	}
	hold := false
	if s.stale {
		rec, ok := v.(*records.ModuleRecord)
		hold = ok && err == nil && rec.SHA256 == ""
	} else {
		hold = errors.Is(err, cache.ErrNotFound)
	}
	if hold && s.held.CompareAndSwap(false, true) {
		close(s.read)
		<-s.letGo
	}
	return at, err
}

func latecomerRig(t *testing.T, stale bool) (*harness.Harness, *stallingStore, string) {
	t.Helper()
	version := enginetest.MustModuleVersion(t, "1.0.0")
	key := records.ModuleRecordKey(harness.Module, version)
	ss := &stallingStore{key: key, stale: stale, read: make(chan struct{}), letGo: make(chan struct{})}
	h := harness.New(t, harness.Options{Wrap: func(s harness.Store) harness.Store { ss.Store = s; return ss }})
	h.Origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")}))
	h.Origin.AddModule("acme", "vpc", "aws", "1.0.0", h.Origin.TarballURL("vpc.tar.gz"))
	return h, ss, key
}

// A caller that found no record of a version just before another
// caller's fetch of it (its location, then its package) ended does not
// write the version's record over with one that has lost its package's
// sha256: the record first completed stays, so that the package stays
// the one first mirrored when its source changes.
func TestLateCallerKeepsTheCompletedModuleRecord(t *testing.T) {
	t.Parallel()
	h, ss, key := latecomerRig(t, false)
	version := enginetest.MustModuleVersion(t, "1.0.0")
	mods := h.Engine.Modules()

	late := make(chan error, 1)
	go func() {
		pkg, err := mods.OpenModule(context.Background(), harness.Module, version)
		if err == nil {
			pkg.Close()
		}
		late <- err
	}()
	<-ss.read
	first, firstBytes, err := h.ReadModule("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	// The source changes afterwards: the version mirrored stays the
	// package first fetched.
	h.Origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# two\n")}))
	close(ss.letGo)
	if err := <-late; err != nil {
		t.Fatalf("late caller: %v", err)
	}
	if _, got, err := h.ReadModule("1.0.0"); err != nil || string(got) != string(firstBytes) {
		t.Errorf("the version read after the late caller: %d bytes, err %v; want the package first mirrored", len(got), err)
	}
	var rec records.ModuleRecord
	if _, err := h.Store.GetMeta(key, &rec); err != nil || rec.SHA256 != first.SHA256 {
		t.Fatalf("record after the late caller: sha256 %q (%v), want %s: the package's sha256 was lost", rec.SHA256, err, first.SHA256)
	}
}

// A caller that read a version's record just before another caller's
// fetch of its package ended joins nothing (the fetch is over) and finds
// the package cached: the source host is not asked again, and the
// package is said to come from the cache (records.Hit, the answer's
// X-Tfmirror-Cache), not from a download this caller started.
func TestLateCallerFindsThePackageFetched(t *testing.T) {
	t.Parallel()
	h, ss, _ := latecomerRig(t, true)
	version := enginetest.MustModuleVersion(t, "1.0.0")
	mods := h.Engine.Modules()
	// The version's location is known, its package not fetched.
	if _, err := mods.ModuleLocation(context.Background(), harness.Module, version); err != nil {
		t.Fatal(err)
	}

	late := make(chan error, 1)
	var lateSrc records.Source
	go func() {
		pkg, err := mods.OpenModule(context.Background(), harness.Module, version)
		if err == nil {
			lateSrc = pkg.Source
			pkg.Close()
		}
		late <- err
	}()
	<-ss.read
	if _, _, err := h.ReadModule("1.0.0"); err != nil {
		t.Fatal(err)
	}
	close(ss.letGo)
	if err := <-late; err != nil {
		t.Fatalf("late caller: %v", err)
	}
	if lateSrc != records.Hit {
		t.Errorf("the late caller's package is said to be a %s, want a hit: it was read from the cache", lateSrc)
	}
	if n := h.Origin.Hits(fakeorigin.Tarball); n != 1 {
		t.Errorf("the package was fetched %d times, want 1", n)
	}
}

// zipWrites counts the writes of one record key and of blobs.
type zipWrites struct {
	*stallingStore
	puts, blobs atomic.Int32
}

func (s *zipWrites) PutMeta(key string, v any) error {
	if key == s.key {
		s.puts.Add(1)
	}
	return s.stallingStore.PutMeta(key, v)
}

func (s *zipWrites) NewBlobWriter(sha string) (cache.BlobWriter, error) {
	s.blobs.Add(1)
	return s.stallingStore.NewBlobWriter(sha)
}

// A caller that found no zip of a version just before another caller's
// making of it ended takes the zip that making stored: the zip is made,
// stored and recorded once, and the late caller's is a cache hit.
func TestLateCallerFindsTheZipMade(t *testing.T) {
	t.Parallel()
	version := enginetest.MustModuleVersion(t, "1.0.0")
	ss := &stallingStore{key: records.ModuleZipKey(harness.Module, version), read: make(chan struct{}), letGo: make(chan struct{})}
	zw := &zipWrites{stallingStore: ss}
	h := harness.New(t, harness.Options{Wrap: func(s harness.Store) harness.Store { ss.Store = s; return zw }})
	h.Origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")}))
	h.Origin.AddModule("acme", "vpc", "aws", "1.0.0", h.Origin.TarballURL("vpc.tar.gz"))
	zips := h.Engine.Modules().Zips()

	late := make(chan error, 1)
	var lateSHA string
	var lateSrc records.Source
	go func() {
		z, err := zips.OpenModuleZip(context.Background(), harness.Module, version)
		if err == nil {
			lateSHA, lateSrc = z.Record.SHA256, z.Source
			z.Close()
		}
		late <- err
	}()
	<-ss.read
	first, err := zips.OpenModuleZip(context.Background(), harness.Module, version)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	blobs := zw.blobs.Load() // the package's and the zip's
	close(ss.letGo)
	if err := <-late; err != nil {
		t.Fatalf("late caller: %v", err)
	}
	if lateSHA != first.Record.SHA256 {
		t.Errorf("late caller's zip %s, want %s", lateSHA, first.Record.SHA256)
	}
	if lateSrc != records.Hit {
		t.Errorf("the late caller's zip is said to be a %s, want a hit: it was read from the cache", lateSrc)
	}
	if n := zw.puts.Load(); n != 1 {
		t.Errorf("the zip's record was written %d times, want 1", n)
	}
	if n := zw.blobs.Load() - blobs; n != 0 {
		t.Errorf("the late caller stored %d blobs, want none: the zip was made again", n)
	}
}

package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
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

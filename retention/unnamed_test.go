package retention

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
)

// TestRetentionPassRemovesArchivesNoRecordNames: an archive whose version
// record is gone (a named prune killed between the record's removal and
// the archive's) is named by no record: nothing serves it, and prune
// says the version does not exist. Without a size limit, the background
// retention pass removes it, and the cache's counts drop.
func TestRetentionPassRemovesArchivesNoRecordNames(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now())
	m := &retentionMetrics{}
	h := newHarness(t, harnessOptions{cfg: mirror.Config{Now: clock.Now},
		ret: Config{KeepVersions: 10, Interval: 20 * time.Millisecond, Metrics: m}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64"})
	h.readAll("1.0.0", "2.0.0")
	h.waitIdle()
	gone := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	info, err := h.store.StatBlob(gone)
	if err != nil {
		t.Fatal(err)
	}
	archives, bytes := h.store.Stats()

	// The prune killed after the record's removal.
	if err := h.engine.Inventory().RemoveVersion("provider", h.provider().String(), "1.0.0"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := h.store.StatBlob(gone); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the archive no record names is still cached after hours of retention passes")
		}
		clock.Add(10 * time.Minute)
		time.Sleep(20 * time.Millisecond)
	}
	// The sweep counts what it removed once its removals are done.
	removed := func() [2]int64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.removed[RuleUnnamed]
	}
	for removed() == ([2]int64{}) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := removed(); got != [2]int64{0, info.Size} {
		t.Errorf("the metrics count %v removed as unnamed, want 0 versions, %d bytes", got, info.Size)
	}
	if a, b := h.store.Stats(); a != archives-1 || b != bytes-info.Size {
		t.Errorf("the cache counts %d archives, %d bytes; want %d, %d", a, b, archives-1, bytes-info.Size)
	}
	if !h.isCached("2.0.0") {
		t.Error("the archive of 2.0.0, which its record names, was removed")
	}
}

// afterNamesRead is a cache whose reading of every record (prefix "")
// runs then, once, when set: between a sweep's reading of what records
// name and its removals.
// each, when set, runs before each record of such a reading is handed on.
type afterNamesRead struct {
	Store
	mu   sync.Mutex
	then func()
	each func()
}

func (s *afterNamesRead) ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error {
	s.mu.Lock()
	each := s.each
	s.mu.Unlock()
	if prefix == "" && each != nil {
		inner := fn
		fn = func(key string, storedAt time.Time, raw json.RawMessage) error {
			each()
			return inner(key, storedAt, raw)
		}
	}
	err := s.Store.ScanMeta(prefix, fn)
	if prefix == "" {
		s.mu.Lock()
		run := s.then
		s.then = nil
		s.mu.Unlock()
		if run != nil {
			run()
		}
	}
	return err
}

// unnamedRig is a harness on a fake clock, with no background pass (the
// tests sweep), that has read 1.0.0 and whose record of it is gone, as a
// prune stopped between the record and the archive leaves it. It returns
// the archive and the record that named it.
func unnamedRig(t *testing.T, ret Config) (*harness, *enginetest.FakeClock, *afterNamesRead, string, json.RawMessage) {
	t.Helper()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now())
	wrapped := &afterNamesRead{}
	ret.Interval = -1
	h := newHarness(t, harnessOptions{cfg: mirror.Config{Now: clock.Now}, ret: ret,
		wrapStore: func(s Store) Store { wrapped.Store = s; return wrapped }})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	h.readAll("1.0.0")
	h.waitIdle()
	key := packageKey(h.provider(), "1.0.0")
	var rec json.RawMessage
	if _, err := h.store.GetMeta(key, &rec); err != nil {
		t.Fatal(err)
	}
	if err := h.engine.Inventory().RemoveVersion("provider", h.provider().String(), "1.0.0"); err != nil {
		t.Fatal(err)
	}
	return h, clock, wrapped, h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"), rec
}

// TestUnnamedArchiveIsKeptUntilItsGraceEnds: an archive committed whose
// record is not written yet (a download under way) is named by no record
// during the sweeps of the next hour: it is kept. Past that, named by no
// record still, it is removed.
func TestUnnamedArchiveIsKeptUntilItsGraceEnds(t *testing.T) {
	t.Parallel()
	h, clock, _, sha, _ := unnamedRig(t, Config{})
	for range 3 {
		h.ret.sweepUnnamed(t.Context())
		if _, err := h.store.StatBlob(sha); err != nil {
			t.Fatalf("an archive no record named for less than %v was removed: %v", unnamedGrace, err)
		}
		clock.Add(unnamedGrace/2 - time.Minute)
	}
	clock.Add(time.Minute)
	h.ret.sweepUnnamed(t.Context())
	if _, err := h.store.StatBlob(sha); err == nil {
		t.Fatalf("an archive no record named for %v is still cached", unnamedGrace)
	}
}

// TestUnnamedArchiveNamedDuringTheSweepIsKept: an archive no record named
// for longer than the grace, for which a writer that found it cached
// writes a record as the sweep runs (once it read the records), is kept.
func TestUnnamedArchiveNamedDuringTheSweepIsKept(t *testing.T) {
	t.Parallel()
	h, clock, wrapped, sha, rec := unnamedRig(t, Config{})
	h.ret.sweepUnnamed(t.Context())
	clock.Add(2 * unnamedGrace)
	key := packageKey(h.provider(), "1.0.0")
	wrapped.then = func() {
		if err := h.store.PutMeta(key, rec); err != nil {
			t.Error(err)
		}
	}
	h.ret.sweepUnnamed(t.Context())
	if _, err := h.store.StatBlob(sha); err != nil {
		t.Fatalf("an archive a record named as the sweep ran was removed: %v", err)
	}
	clock.Add(2 * unnamedGrace)
	h.ret.sweepUnnamed(t.Context())
	if _, err := h.store.StatBlob(sha); err != nil {
		t.Fatalf("an archive a record names was removed: %v", err)
	}
}

// TestUnnamedArchiveImportedDuringTheSweepIsKept: an archive no record
// named for longer than the grace, which an import finds cached and
// protects as the sweep runs, is kept: its record is written once the
// import ends, and it cannot be fetched again.
func TestUnnamedArchiveImportedDuringTheSweepIsKept(t *testing.T) {
	t.Parallel()
	h, clock, wrapped, sha, _ := unnamedRig(t, Config{})
	h.ret.sweepUnnamed(t.Context())
	clock.Add(2 * unnamedGrace)
	wrapped.then = func() {
		h.ret.ImportBegun()
		h.ret.Importing(sha)
	}
	h.ret.sweepUnnamed(t.Context())
	if _, err := h.store.StatBlob(sha); err != nil {
		t.Fatalf("an archive an import protected as the sweep ran was removed: %v", err)
	}
	clock.Add(2 * unnamedGrace)
	h.ret.sweepUnnamed(t.Context())
	if _, err := h.store.StatBlob(sha); err != nil {
		t.Fatalf("an archive of an import under way was removed: %v", err)
	}
}

// TestUnnamedArchiveIsKeptByADryRun: under Config.EvictNothing (cache
// prune --dry-run), no archive no record names is removed.
func TestUnnamedArchiveIsKeptByADryRun(t *testing.T) {
	t.Parallel()
	h, clock, _, sha, _ := unnamedRig(t, Config{EvictNothing: true})
	h.ret.sweepUnnamed(t.Context())
	clock.Add(2 * unnamedGrace)
	h.ret.sweepUnnamed(t.Context())
	if _, err := h.store.StatBlob(sha); err != nil {
		t.Fatalf("a dry run removed an archive no record names: %v", err)
	}
}

// TestArchivesRecordsNameAreKeptPastTheGrace: the archives records name
// stay, whatever their kind: a provider version's package, a module
// version's package and its zip (named by the zip's record only), and a
// CLI release's archive (named in its SHA256SUMS document).
func TestArchivesRecordsNameAreKeptPastTheGrace(t *testing.T) {
	t.Parallel()
	h, clock, _, gone, _ := unnamedRig(t, Config{})
	h.origin.AddProvider(ns, "other", []string{"2.0.0"}, []string{"linux_amd64"})
	h.readAllOf("other", "2.0.0")
	h.origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	h.origin.AddModule("acme", "vpc", "aws", "1.0.0", h.origin.TarballURL("vpc.tar.gz"))
	pkg, _, err := readModule(t, h, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	zip, err := h.engine.Modules().Zips().OpenModuleZip(t.Context(), testModule, enginetest.MustModuleVersion(t, "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	zip.Close()
	h.waitIdle()
	kept := map[string]string{
		"provider package": h.origin.SHA256(ns, "other", "2.0.0", "linux_amd64"),
		"module package":   pkg.SHA256,
		"module zip":       zip.Record.SHA256,
	}
	for range 2 {
		h.ret.sweepUnnamed(t.Context())
		clock.Add(2 * unnamedGrace)
	}
	h.ret.sweepUnnamed(t.Context())
	for what, sha := range kept {
		if _, err := h.store.StatBlob(sha); err != nil {
			t.Errorf("the %s, which a record names, was removed: %v", what, err)
		}
	}
	if _, err := h.store.StatBlob(gone); err == nil {
		t.Error("the archive no record names is still cached")
	}

	o := startReleasesOrigin(t)
	cliClock := enginetest.NewFakeClock()
	cliClock.Set(time.Now())
	r := newCLIRig(t, o, t.TempDir(), false, cliClock, Config{Interval: -1})
	if err := r.read("terraform", "1.6.0"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r.ret.sweepUnnamed(t.Context())
		cliClock.Add(2 * unnamedGrace)
	}
	r.ret.sweepUnnamed(t.Context())
	if _, err := r.store.StatBlob(fakeorigin.ArchiveSHA256("terraform", "1.6.0", "linux_amd64")); err != nil {
		t.Errorf("the CLI release's archive, which its SHA256SUMS names, was removed: %v", err)
	}
}

// TestArchiveAnyRecordNamesIsKept: an archive whose sha256 a record of a
// kind retention does not list holds in its text (one a later release
// writes, read after a rollback) is kept: what a record may name stays.
func TestArchiveAnyRecordNamesIsKept(t *testing.T) {
	t.Parallel()
	for _, inKey := range []bool{false, true} {
		h, clock, _, sha, _ := unnamedRig(t, Config{})
		key, value := "later-kind/x", map[string]string{"digest": "sha256:" + strings.ToUpper(sha)}
		if inKey { // a record keyed by the archive it is of
			key, value = "later-kind/sha256:"+sha, map[string]string{"size": "1"}
		}
		if err := h.store.PutMeta(key, value); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			h.ret.sweepUnnamed(t.Context())
			clock.Add(2 * unnamedGrace)
		}
		h.ret.sweepUnnamed(t.Context())
		if _, err := h.store.StatBlob(sha); err != nil {
			t.Fatalf("an archive a record of another kind names (in its key %v) was removed: %v", inKey, err)
		}
	}
}

// TestAFailedImportsArchiveIsRemovedOnceNoImportRuns: an archive an
// import committed before it failed, which no record names, is kept by
// the sweeps while an import is under way (it may write a record naming
// it), and removed once no import runs.
func TestAFailedImportsArchiveIsRemovedOnceNoImportRuns(t *testing.T) {
	t.Parallel()
	h, clock, _, _, _ := unnamedRig(t, Config{})
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	zipped := enginetest.ZipOfSize(t, "thing", 4<<10, 1)
	other := enginetest.ZipOfSize(t, "thing", 4<<10, 2)
	var opened atomic.Int32
	in := imports.Imported{Provider: local, Version: mustVersion(t, "1.0.0"), Unsigned: true, Packages: []imports.Package{
		{Platform: "linux_amd64", Filename: "terraform-provider-thing_1.0.0_linux_amd64.zip", Document: -1, Open: opener(zipped)},
		{Platform: "windows_amd64", Filename: "terraform-provider-thing_1.0.0_windows_amd64.zip", Document: -1,
			// Read whole once (its sha256), then not again: the import
			// fails as it commits it.
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				if opened.Add(1) > 1 {
					return nil, 0, errors.New("the bundle's file cannot be read")
				}
				return io.NopCloser(bytes.NewReader(other)), int64(len(other)), nil
			}},
	}}
	// Another import, begun before the failing one ends and under way
	// until told: begun later, a rebuild the failing import's end asked
	// for could run first, with no import under way, and rightly let
	// the archive go.
	h.ret.ImportBegun()
	if _, err := h.engine.AirGap().Import(t.Context(), in); err == nil {
		t.Fatal("an import with a package that cannot be read succeeded")
	}
	sha := sha256Hex(zipped)
	if _, err := h.store.StatBlob(sha); err != nil {
		t.Fatalf("the import did not commit its first archive before failing (%v): nothing to check", err)
	}
	h.ret.rebuild()
	for range 3 {
		h.ret.sweepUnnamed(t.Context())
		clock.Add(2 * unnamedGrace)
	}
	if _, err := h.store.StatBlob(sha); err != nil {
		t.Fatalf("an imported archive no record names was removed while an import was under way: %v", err)
	}
	h.ret.ImportEnded()
	h.ret.rebuild()
	for range 2 {
		h.ret.sweepUnnamed(t.Context())
		clock.Add(2 * unnamedGrace)
	}
	if _, err := h.store.StatBlob(sha); err == nil {
		t.Fatal("the archive of a failed import, which no record names, is still cached once no import runs")
	}
}

// TestUnnamedSweepStopsWithItsContext: the sweep's readings of every
// record stop once its context ends (the serve shutting down), rather
// than read a large cache's records to the end four times first.
func TestUnnamedSweepStopsWithItsContext(t *testing.T) {
	t.Parallel()
	h, _, wrapped, sha, _ := unnamedRig(t, Config{})
	for i := range 50 {
		if err := h.store.PutMeta(fmt.Sprintf("later-kind/%02d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	var read atomic.Int32
	wrapped.mu.Lock()
	wrapped.each = func() {
		if read.Add(1) == 1 {
			cancel()
		}
	}
	wrapped.mu.Unlock()
	h.ret.sweepUnnamed(ctx)
	if n := read.Load(); n != 1 {
		t.Errorf("the sweep read %d records after its context ended at the first, want none more", n-1)
	}
	if _, err := h.store.StatBlob(sha); err != nil {
		t.Errorf("a sweep stopped by its context removed an archive: %v", err)
	}
}

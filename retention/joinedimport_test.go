package retention

// A package imported into a version whose record another way wrote: an
// import that adds a platform to the origin's record (which stays the
// origin's, the package without a download URL), and the origin adding a
// platform to an imported record. What the import brought cannot be
// fetched again, and is kept as an import is, whichever came first.

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// importDarwin imports darwin_arm64 of version of the test provider into
// h from another mirror's export (signed by the origin's key; a
// platform h's origin does not publish) of archives of about size bytes,
// and returns its sha256.
func importDarwin(t *testing.T, h *harness, version string, size int64) string {
	t.Helper()
	src := newHarness(t, harnessOptions{origin: fakeorigin.Options{ArchiveSize: size}})
	src.origin.AddProvider(ns, typ, []string{version}, []string{"linux_amd64", "darwin_arm64"})
	importFrom(t, src, h, version, "darwin_arm64")
	return src.origin.SHA256(ns, typ, version, "darwin_arm64")
}

// provenanceOf is the provenance of the cached record of version, with
// its platforms.
func provenanceOf(t *testing.T, h *harness, version string) (records.Provenance, []string) {
	t.Helper()
	var rec records.PackageRecord
	if _, err := h.store.GetMeta(packageKey(h.provider(), version), &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Provenance, slices.Sorted(func(yield func(string) bool) {
		for pl := range rec.Archives {
			if !yield(pl) {
				return
			}
		}
	})
}

// An import that adds darwin_arm64 to 1.0.0, whose record the origin
// wrote for linux_amd64 (and stays the origin's), is never evicted by the
// size limit, nor removed by keep-versions or the unused rule, which
// remove the origin's archive of 1.0.0 all the same; it is served from
// the cache after each. A prune naming 1.0.0 removes it whole (unlisted).
func TestRetentionKeepsImportJoinedToOriginVersion(t *testing.T) {
	t.Parallel()
	const size = 32 << 10
	// Room for two archives and a half: the import and one of the origin's.
	opts := harnessOptions{cacheDir: t.TempDir(), store: cache.Options{MaxBytes: 2*size + size/2, Evictable: func(string) bool { return false }},
		origin: fakeorigin.Options{ArchiveSize: size}}
	h := newHarness(t, opts)
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64"})
	h.readAll("1.0.0")
	darwin := importDarwin(t, h, "1.0.0", size)
	if pr, pls := provenanceOf(t, h, "1.0.0"); pr != records.ProvenanceOrigin || !reflect.DeepEqual(pls, []string{"darwin_arm64", "linux_amd64"}) {
		t.Fatalf("1.0.0's record is %q with %v, want the origin's with both platforms (set-up broken)", pr, pls)
	}
	servedFromCache := func(when string) {
		t.Helper()
		if _, err := h.store.StatBlob(darwin); err != nil {
			t.Fatalf("%s: the imported archive is gone: %v", when, err)
		}
		if _, err := h.read(t.Context(), "1.0.0", "darwin_arm64"); err != nil {
			t.Errorf("%s: the imported archive is not served: %v", when, err)
		}
	}

	// The size limit (one archive): the origin's go, the import stays.
	h.ret.rebuild()
	if h.ret.Evictable(darwin) {
		t.Error("the imported archive is evictable")
	}
	if !h.ret.Evictable(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")) {
		t.Error("the origin's archive of the same version is not evictable")
	}
	// linux_amd64 of 1.0.0 is used again: the import is the least
	// recently used archive when 2.0.0's presses the limit.
	h.readAll("1.0.0", "2.0.0")
	if err := cachetest.Evict(t.Context(), h.store); err != nil {
		t.Fatal(err)
	}
	if h.isCached("1.0.0") {
		t.Error("the size limit did not evict the origin's archive of 1.0.0")
	}
	servedFromCache("size limit")

	// The rules, without a size limit.
	h.stop()
	for _, rules := range []struct {
		cfg  Config
		rule string
	}{
		{Config{KeepVersions: 1, Interval: -1}, RuleKeepVersions},
		{Config{UnusedAfter: time.Nanosecond, Interval: -1}, RuleUnused},
	} {
		h.start(harnessOptions{cacheDir: opts.cacheDir, origin: opts.origin, ret: rules.cfg})
		h.readAll("1.0.0", "2.0.0")
		done, err := h.ret.Prune(t.Context(), PruneRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var v1 *Removal
		for i := range done {
			if slices.Contains(done[i].Archives, darwin) || done[i].Unlisted {
				t.Errorf("%s removed the import: %+v", rules.rule, done[i])
			}
			if done[i].Version == "1.0.0" {
				v1 = &done[i]
			}
		}
		if v1 == nil || v1.Rule != rules.rule || !reflect.DeepEqual(v1.Archives, []string{h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")}) {
			t.Errorf("%s removed %+v, want the origin's archive of 1.0.0", rules.rule, done)
		}
		servedFromCache(rules.rule)
		h.stop()
	}

	// Named: the version goes whole, off its version list.
	h.start(harnessOptions{cacheDir: opts.cacheDir, origin: opts.origin})
	h.readAll("1.0.0")
	done := pruneNamed(t, h, "1.0.0")
	want := slices.Sorted(slices.Values([]string{darwin, h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")}))
	if len(done) != 1 || !done[0].Unlisted || done[0].Rule != RuleNamed || !reflect.DeepEqual(slices.Sorted(slices.Values(done[0].Archives)), want) {
		t.Errorf("the named prune removed %+v, want 1.0.0 whole, unlisted", done)
	}
	if _, err := h.store.GetMeta(packageKey(h.provider(), "1.0.0"), &records.PackageRecord{}); err == nil {
		t.Error("1.0.0's record outlived the named prune: it names an archive it cannot get")
	}
}

// An import of darwin_arm64 of 1.0.0 that the origin's linux_amd64 joins
// later (the record stays the import's) keeps the import from the size
// limit and the rules.
func TestRetentionKeepsImportTheOriginJoined(t *testing.T) {
	t.Parallel()
	const size = 32 << 10
	opts := harnessOptions{cacheDir: t.TempDir(), origin: fakeorigin.Options{ArchiveSize: size}, ret: Config{KeepVersions: 1, Interval: -1}}
	h := newHarness(t, opts)
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64"})
	darwin := importDarwin(t, h, "1.0.0", size)
	h.readAll("1.0.0", "2.0.0")
	if pr, pls := provenanceOf(t, h, "1.0.0"); pr != records.ProvenanceImported || !reflect.DeepEqual(pls, []string{"darwin_arm64", "linux_amd64"}) {
		t.Fatalf("1.0.0's record is %q with %v, want the import's with both platforms (set-up broken)", pr, pls)
	}
	// Restarted under a limit of one archive, as tfmirror opens the cache.
	h.stop()
	opts.store = cache.Options{MaxBytes: size, Evictable: func(string) bool { return false }}
	h.start(opts)
	h.ret.rebuild()
	if h.ret.Evictable(darwin) {
		t.Error("the imported archive is evictable")
	}
	if err := cachetest.Evict(t.Context(), h.store); err != nil {
		t.Fatal(err)
	}
	if h.isCached("2.0.0") {
		t.Error("the size limit evicted nothing (test broken)")
	}
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rm := range done {
		if rm.Version == "1.0.0" {
			t.Errorf("keep-versions removed of the import: %+v", rm)
		}
	}
	if _, err := h.read(t.Context(), "1.0.0", "darwin_arm64"); err != nil {
		t.Errorf("the imported archive is not served: %v", err)
	}
}

// The bucket's pass keeps an import that joined the origin's record,
// which the record's next origin fetch put in the bucket: it removes the
// origin's archives of the version only.
func TestRetentionSharedPruneKeepsJoinedImport(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	srv.CreateBucket(bucket)
	sa := newSharedStore(t, srv, "a")
	h := newHarness(t, harnessOptions{shared: sharedTier{sa}, ret: Config{KeepVersions: 1, Interval: -1}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64", "windows_amd64"})
	h.readAll("1.0.0", "2.0.0")
	darwin := importDarwin(t, h, "1.0.0", 1<<10)
	// The origin's windows_amd64 of 1.0.0: the record, with the import,
	// goes to the bucket.
	if _, err := h.read(t.Context(), "1.0.0", "windows_amd64"); err != nil {
		t.Fatal(err)
	}
	h.waitIdle()
	inBucket := func() map[string]bool { t.Helper(); return bucketArchives(t, sa) }
	origin1 := []string{h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"), h.origin.SHA256(ns, typ, "1.0.0", "windows_amd64")}
	deadline := time.Now().Add(bucketWait)
	for b := inBucket(); !b[darwin] || !b[origin1[0]] || !b[origin1[1]]; b = inBucket() {
		if time.Now().After(deadline) {
			t.Fatalf("the bucket holds %v, want 1.0.0's three archives", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	deadline = time.Now().Add(bucketWait)
	for {
		raw, _, err := sa.GetMeta(t.Context(), packageKey(h.provider(), "1.0.0"))
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := h.engine.Inventory().VersionOfRecord(packageKey(h.provider(), "1.0.0"), raw); ok && slices.Contains(v.Archives, darwin) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bucket's record of 1.0.0 does not name the import (test broken)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	done, err := h.ret.pruneShared(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0].Version != "1.0.0" || !reflect.DeepEqual(slices.Sorted(slices.Values(done[0].Archives)), slices.Sorted(slices.Values(origin1))) {
		t.Errorf("removed from the bucket %+v, want the origin's archives of 1.0.0", done)
	}
	if !inBucket()[darwin] {
		t.Error("the bucket's pass removed the import")
	}
}

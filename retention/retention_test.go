package retention

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	enginerig "github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// Keep the newest 3: the fourth-newest version's packages go, a pinned
// older version stays, and a dry run lists exactly what the prune then
// removes, with sizes.
func TestRetentionKeepNewest(t *testing.T) {
	t.Parallel()
	const size = 8 << 10
	p := addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	met := &retentionMetrics{}
	h := newHarness(t, harnessOptions{
		origin: fakeorigin.Options{ArchiveSize: size},
		ret:    Config{Metrics: met, KeepVersions: 3, Interval: -1, Pins: pinVersions(t, p.String(), "1.0.0")},
	})
	all := []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0", "5.0.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...)

	dry, err := h.ret.Prune(t.Context(), PruneRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removalNames(dry), []string{"2.0.0 keep-versions"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("dry run lists %v, want %v", got, want)
	}
	if dry[0].Bytes != size || len(dry[0].Archives) != 1 || dry[0].Archives[0] != h.origin.SHA256(ns, typ, "2.0.0", "linux_amd64") {
		t.Errorf("dry run removal %+v, want the one %d-byte archive of 2.0.0", dry[0], size)
	}
	for _, v := range all {
		if !h.isCached(v) {
			t.Errorf("%s was removed by a dry run", v)
		}
	}
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(done, dry) {
		t.Errorf("prune removed %+v, the dry run listed %+v", done, dry)
	}
	for _, v := range all {
		if got, want := h.isCached(v), v != "2.0.0"; got != want {
			t.Errorf("%s cached = %v, want %v", v, got, want)
		}
	}
	if got := met.removed[RuleKeepVersions]; got != [2]int64{1, size} {
		t.Errorf("metrics: %v versions, bytes removed by keep-versions; want 1, %d", got, size)
	}
	st := h.ret.Status()
	if st.LastPass.IsZero() {
		t.Error("the status gives no time of the last pass")
	}
	if len(st.Pinned) != 1 || st.Pinned[0].Version != "1.0.0" || st.Pinned[0].Address != p.String() {
		t.Errorf("status lists pinned %+v, want 1.0.0", st.Pinned)
	}
	// Nothing more to do; a version removed by a rule is fetched again.
	if again, err := h.ret.Prune(t.Context(), PruneRequest{DryRun: true}); err != nil || len(again) != 0 {
		t.Errorf("second dry run: %v, %v", removalNames(again), err)
	}
	h.readAll("2.0.0")
	if n := h.origin.ArchiveHits(ns, typ, "2.0.0", "linux_amd64"); n != 2 {
		t.Errorf("origin fetches of the removed version = %d, want 2", n)
	}
}

// Per major version: the newest N of each major are kept.
func TestRetentionKeepNewestPerMajor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{ret: Config{KeepVersions: 1, KeepPerMajor: true, Interval: -1}})
	all := []string{"1.0.0", "1.1.0", "2.0.0", "2.1.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...)
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removalNames(done), []string{"1.0.0 keep-versions", "2.0.0 keep-versions"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
}

// Unused for 7 days: exactly the versions not downloaded in the last 7
// days go, with the last uses written before a restart counting after it.
func TestRetentionUnusedAcrossRestart(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	opts := harnessOptions{
		cacheDir: t.TempDir(),
		cfg:      mirror.Config{Now: clock.Now},
		ret:      Config{UnusedAfter: 7 * 24 * time.Hour, Interval: -1},
	}
	h := newHarness(t, opts)
	all := []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...) // day 0
	clock.Add(3 * 24 * time.Hour)
	h.readAll("2.0.0") // day 3
	clock.Add(3*24*time.Hour + 23*time.Hour)
	h.readAll("4.0.0") // day 6 23h

	h.stop() // writes the last uses
	h.start(opts)
	clock.Add(2 * time.Hour) // day 7 1h: 1.0.0 and 3.0.0 unused for 7 days
	h.readAll("3.0.0")       // ...but 3.0.0 is downloaded now, not yet written
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removalNames(done), []string{"1.0.0 unused"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	clock.Add(3 * 24 * time.Hour) // day 10 1h: 2.0.0 (day 3) is unused for 7 days
	done, err = h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removalNames(done), []string{"2.0.0 unused"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	for _, v := range all {
		if got, want := h.isCached(v), v == "3.0.0" || v == "4.0.0"; got != want {
			t.Errorf("%s cached = %v, want %v", v, got, want)
		}
	}
}

// The rules also run in the background, on the engine's goroutine.
func TestRetentionAppliedInBackground(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{ret: Config{KeepVersions: 1, Interval: time.Millisecond}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64"})
	h.readAll("1.0.0", "2.0.0")
	deadline := time.Now().Add(30 * time.Second)
	for h.isCached("1.0.0") {
		if time.Now().After(deadline) {
			t.Fatal("the background pass removed nothing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !h.isCached("2.0.0") {
		t.Error("the newest version was removed")
	}
}

// A pinned version survives a size limit smaller than the pinned set,
// and a log line and the metrics say the limit cannot be met.
func TestRetentionPinnedOverSizeLimit(t *testing.T) {
	t.Parallel()
	const size = 64 << 10
	p := addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	met := &retentionMetrics{}
	var logs logbuf.Buffer
	h := newHarness(t, harnessOptions{
		origin: fakeorigin.Options{ArchiveSize: size},
		store:  cache.Options{MaxBytes: size + size/2},
		cfg:    mirror.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		ret:    Config{Metrics: met, MaxBytes: size + size/2, Interval: -1, Pins: pinVersions(t, p.String(), "1.0.0", "2.0.0")},
	})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0", "3.0.0"}, []string{"linux_amd64"})
	for _, v := range []string{"1.0.0", "2.0.0", "3.0.0"} {
		// Over the limit from the second on: each is served whole all the same.
		if body, err := h.read(t.Context(), v, "linux_amd64"); err != nil || !bytes.Equal(body, h.origin.Archive(ns, typ, v, "linux_amd64")) {
			t.Fatalf("%s: err %v, %d bytes", v, err, len(body))
		}
	}
	h.waitIdle()
	if err := cachetest.Evict(t.Context(), h.store); err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{"1.0.0": true, "2.0.0": true, "3.0.0": false} {
		if got := h.isCached(v); got != want {
			t.Errorf("%s cached = %v, want %v", v, got, want)
		}
	}
	h.ret.rebuild() // as a pass does
	st := h.ret.Status()
	if !st.LimitUnmet || st.KeptBytes != 2*size {
		t.Errorf("status: limit unmet %v, kept %d bytes; want true, %d", st.LimitUnmet, st.KeptBytes, 2*size)
	}
	met.mu.Lock()
	if !met.unmet || met.kept != 2*size {
		t.Errorf("metrics: kept %d bytes, limit unmet %v", met.kept, met.unmet)
	}
	met.mu.Unlock()
	if !strings.Contains(logs.String(), "size limit cannot be met") {
		t.Errorf("no log line says the limit cannot be met:\n%s", logs.String())
	}
}

// The operator's repro of data loss: a size limit below what was
// imported, in-house (unsigned, on a local-only host) and signed (from
// another mirror's evidence). Every imported package is kept, and stays
// servable; only a prune naming a version removes one, and that version
// is then no longer listed.
func TestRetentionImportsSurviveSizeLimit(t *testing.T) {
	t.Parallel()
	const size = 32 << 10
	src := newHarness(t, harnessOptions{origin: fakeorigin.Options{ArchiveSize: size}})
	signedVersions := []string{"1.0.0", "2.0.0", "3.0.0"}
	src.origin.AddProvider(ns, typ, signedVersions, []string{"linux_amd64"})

	// As tfmirror opens it: nothing evicted before the engine says what may be.
	opts := harnessOptions{cacheDir: t.TempDir(), store: cache.Options{MaxBytes: 2 * size, Evictable: func(string) bool { return false }}}
	dst := newHarness(t, opts)
	// Signed imports of the origin's provider.
	for _, vs := range signedVersions {
		importFrom(t, src, dst, vs, "linux_amd64")
	}
	// In-house packages of a local-only host.
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	inHouse := map[string][]byte{}
	for i := range 6 {
		vs := fmt.Sprintf("1.%d.0", i)
		zipped := enginetest.ZipOfSize(t, "thing", size, uint64(i))
		inHouse[vs] = zipped
		in := imports.Imported{Provider: local, Version: mustVersion(t, vs), Unsigned: true, Packages: []imports.Package{{
			Platform: "linux_amd64", Filename: "terraform-provider-thing_" + vs + "_linux_amd64.zip", Document: -1,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
			},
		}}}
		if _, err := dst.engine.AirGap().Import(t.Context(), in); err != nil {
			t.Fatalf("in-house import of %s: %v", vs, err)
		}
	}
	check := func(when string) {
		t.Helper()
		if err := cachetest.Evict(t.Context(), dst.store); err != nil {
			t.Fatal(err)
		}
		if n, total := dst.store.Stats(); n != 9 || total < 9*size {
			t.Errorf("%s: the cache holds %d archives, %d bytes; want all 9 imported", when, n, total)
		}
		for _, vs := range signedVersions {
			want := src.origin.Archive(ns, typ, vs, "linux_amd64")
			a, err := dst.engine.OpenArchive(t.Context(), dst.provider(), mustVersion(t, vs), mustPlatform(t, "linux_amd64"))
			if err != nil {
				t.Errorf("%s: signed import %s: %v", when, vs, err)
				continue
			}
			got, err := io.ReadAll(a)
			a.Close()
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: signed import %s: %v, %d bytes", when, vs, err, len(got))
			}
		}
		for vs, want := range inHouse {
			a, err := dst.engine.OpenArchive(t.Context(), local, mustVersion(t, vs), mustPlatform(t, "linux_amd64"))
			if err != nil {
				t.Errorf("%s: in-house %s: %v", when, vs, err)
				continue
			}
			got, err := io.ReadAll(a)
			a.Close()
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: in-house %s: %v, %d bytes", when, vs, err, len(got))
			}
		}
	}
	check("after the imports")
	dst.stop()
	dst.start(opts)
	check("after a restart")
	if n := dst.origin.Hits(fakeorigin.Archive); n != 0 {
		t.Errorf("the origin was asked for %d archives", n)
	}

	// The rules do not remove them either.
	dst.stop()
	opts.ret = Config{KeepVersions: 1, UnusedAfter: time.Nanosecond, Interval: -1}
	dst.start(opts)
	if done, err := dst.ret.Prune(t.Context(), PruneRequest{}); err != nil || len(done) != 0 {
		t.Errorf("the rules removed %v (%v)", removalNames(done), err)
	}

	// A prune naming an in-house version removes it, and unlists it.
	dry, err := dst.ret.Prune(t.Context(), PruneRequest{DryRun: true, Provider: &local, Versions: []string{"1.2.0"}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := dst.ret.Prune(t.Context(), PruneRequest{Provider: &local, Versions: []string{"1.2.0"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := removalNames(done); !reflect.DeepEqual(got, []string{"1.2.0 named"}) || !reflect.DeepEqual(done, dry) || !done[0].Unlisted {
		t.Errorf("named prune removed %+v, dry run listed %+v", done, dry)
	}
	list, _, err := dst.engine.Versions(t.Context(), local)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := list.Find(mustVersion(t, "1.2.0")); ok || len(list.Versions) != 5 {
		t.Errorf("after the prune, versions %+v", list.Versions)
	}
	if _, err := dst.engine.Package(t.Context(), local, mustVersion(t, "1.2.0"), nil); err == nil {
		t.Error("the pruned version's package metadata is still served")
	}
	if _, err := dst.ret.Prune(t.Context(), PruneRequest{Provider: &local, Versions: []string{"9.9.9"}}); !errors.Is(err, records.ErrVersionNotFound) {
		t.Errorf("prune of a version not held: %v, want ErrVersionNotFound", err)
	}
}

// With a shared store, a download on another replica counts as a use,
// whether that replica has the unused rule or not (its configuration
// not rolled out yet, or the rule left to the others): it writes its
// downloads to the shared store as it writes them to its cache.
func TestRetentionUnusedCountsOtherReplicas(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		bRet Config
	}{
		{"with the rule", Config{UnusedAfter: 7 * 24 * time.Hour, Interval: -1}},
		{"without the rule", Config{Interval: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := enginetest.NewFakeClock()
			tier := enginerig.NewMemTier()
			opts := harnessOptions{cfg: mirror.Config{Now: clock.Now}, shared: tier, ret: Config{UnusedAfter: 7 * 24 * time.Hour, Interval: -1}}
			a := newHarness(t, opts)
			a.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
			b := &harness{t: t, origin: a.origin}
			bOpts := opts
			bOpts.ret = c.bRet
			b.start(bOpts)
			a.readAll("1.0.0")
			b.readAll("1.0.0")
			clock.Add(5 * 24 * time.Hour)
			b.readAll("1.0.0") // day 5, on b only
			b.stop()           // written to the shared store
			clock.Add(3 * 24 * time.Hour)
			if done, err := a.ret.Prune(t.Context(), PruneRequest{}); err != nil || len(done) != 0 {
				t.Errorf("day 8: removed %v (%v); b downloaded it on day 5", removalNames(done), err)
			}
			clock.Add(5 * 24 * time.Hour)
			if done, err := a.ret.Prune(t.Context(), PruneRequest{}); err != nil || !reflect.DeepEqual(removalNames(done), []string{"1.0.0 unused"}) {
				t.Errorf("day 13: removed %v (%v), want 1.0.0", removalNames(done), err)
			}
		})
	}
}

func TestPinnedBy(t *testing.T) {
	t.Parallel()
	cached := versions.List{mustVersion(t, "3.4.0"), mustVersion(t, "3.5.0"), mustVersion(t, "3.6.0"), mustVersion(t, "4.0.0")}
	tilde3, err := versions.MeetingConstraintsStringRuby("~> 3.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		sel     PinSelection
		version string
		want    bool
	}{
		{"exact", PinSelection{Set: versions.Only(mustVersion(t, "3.5.0"))}, "3.5.0", true},
		{"exact, other version", PinSelection{Set: versions.Only(mustVersion(t, "3.5.0"))}, "3.6.0", false},
		{"constraint", PinSelection{Set: tilde3}, "3.4.0", true},
		{"constraint excludes", PinSelection{Set: tilde3}, "4.0.0", false},
		{"newest 2 of the constraint", PinSelection{Set: tilde3, Latest: 2}, "3.5.0", true},
		{"third newest of the constraint", PinSelection{Set: tilde3, Latest: 2}, "3.4.0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := pinnedBy([]PinSelection{tc.sel}, mustVersion(t, tc.version), cached); got != tc.want {
				t.Errorf("pinned = %v, want %v", got, tc.want)
			}
		})
	}
}

// Module packages are kept by the same rules: the newest N versions.
func TestRetentionKeepNewestModules(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{ret: Config{KeepVersions: 2, Interval: -1}})
	o := h.origin
	vs := []string{"1.0.0", "2.0.0", "3.0.0"}
	for _, v := range vs {
		file := "vpc-" + v + ".tar.gz"
		o.AddTarball(file, fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# " + v + "\n")}))
		o.AddModule("acme", "vpc", "aws", v, o.TarballURL(file))
	}
	shas := map[string]string{}
	for _, v := range vs {
		pkg, _, err := readModule(t, h, v)
		if err != nil {
			t.Fatalf("module %s: %v", v, err)
		}
		shas[v] = pkg.SHA256
	}
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0].Kind != "module" || done[0].Address != testModule.String() || done[0].Version != "1.0.0" ||
		done[0].Rule != RuleKeepVersions || len(done[0].Archives) != 1 || done[0].Archives[0] != shas["1.0.0"] {
		t.Fatalf("removed %+v, want module 1.0.0's package", done)
	}
	for v, sha := range shas {
		if _, err := h.store.StatBlob(sha); (err == nil) != (v != "1.0.0") {
			t.Errorf("%s: cached %v", v, err == nil)
		}
	}
	if _, _, err := readModule(t, h, "1.0.0"); err != nil {
		t.Errorf("the removed module version is not fetched again: %v", err)
	}
}

// The shared store's bucket is kept by the same rules, by the replica
// that holds the retention lease: the archives of versions the rules
// remove are deleted from it (whichever replica put them there).
func TestRetentionPrunesSharedStore(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	srv.CreateBucket(bucket)
	ret := Config{KeepVersions: 1, Interval: -1}
	sa, sb := newSharedStore(t, srv, "a"), newSharedStore(t, srv, "b")
	a := newHarness(t, harnessOptions{shared: sharedTier{sa}, ret: ret})
	b := &harness{t: t, origin: a.origin}
	b.start(harnessOptions{shared: sharedTier{sb}, ret: ret})
	vs := []string{"1.0.0", "2.0.0", "3.0.0"}
	a.origin.AddProvider(ns, typ, vs, []string{"linux_amd64"})
	a.readAll("1.0.0", "2.0.0")
	b.readAll("3.0.0")
	a.waitIdle()
	b.waitIdle()
	inBucket := func() map[string]bool { t.Helper(); return bucketArchives(t, sa) }
	sha := func(v string) string { return a.origin.SHA256(ns, typ, v, "linux_amd64") }
	deadline := time.Now().Add(bucketWait)
	for len(inBucket()) < 3 { // each replica puts what it fetched, in the background
		if time.Now().After(deadline) {
			t.Fatalf("the bucket holds %d archives, want 3", len(inBucket()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// While b holds the lease, a leaves the bucket alone.
	lease, err := sb.TryLease(t.Context(), leaseID)
	if err != nil || lease == nil {
		t.Fatalf("lease: %v", err)
	}
	if done, err := a.ret.pruneShared(t.Context()); err != nil || done != nil {
		t.Errorf("pruned the bucket under b's lease: %v, %v", removalNames(done), err)
	}
	lease.Release(t.Context())
	done, err := a.ret.pruneShared(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removalNames(done), []string{"1.0.0 keep-versions", "2.0.0 keep-versions"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed from the bucket %v, want %v", got, want)
	}
	if got := inBucket(); len(got) != 1 || !got[sha("3.0.0")] {
		t.Errorf("the bucket holds %v, want only 3.0.0's archive", got)
	}
	// a's own cache is a's: pruned by its own rules, not by the bucket's pass.
	if !a.isCached("1.0.0") || !a.isCached("2.0.0") {
		t.Error("the bucket's pass removed archives from the replica's cache")
	}
}

// The bytes kept from the size limit are the cached sizes of the kept
// archives, each once, whether they are read in one ordered pass over
// the cache's archives (a large set) or one lookup each (a small set);
// each way gives the same total for any set.
func TestRetentionCachedBytes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	var all [][32]byte
	sizes := map[[32]byte]int64{}
	for i := range 64 {
		data := bytes.Repeat([]byte{byte(i)}, 100+i)
		sum := sha256.Sum256(data)
		w, err := h.store.NewBlobWriter(hex.EncodeToString(sum[:]))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		if _, err := w.Commit("h1:test"); err != nil {
			t.Fatal(err)
		}
		w.Close()
		all = append(all, sum)
		sizes[sum] = int64(len(data))
	}
	absent := sha256.Sum256([]byte("not cached"))
	total := func(keys [][32]byte) (n int64) {
		for _, k := range newSHASet(slices.Clone(keys)) {
			n += sizes[k]
		}
		return n
	}
	lookups := func(store Blobs, set shaSet) (int64, error) { return lookedUpBytes(store, set), nil }
	tests := []struct {
		name string
		size func(Blobs, shaSet) (int64, error)
		keys [][32]byte
	}{
		{"none", cachedBytes, nil},
		{"every archive and one not cached, in one pass", cachedBytes, append(slices.Clone(all), absent)},
		{"the last archives, in one pass", cachedBytes, slices.Clone(all[32:])},
		{"two archives and one not cached, a lookup each", cachedBytes, [][32]byte{all[5], absent, all[40]}},
		{"every archive and one not cached, a lookup each", lookups, append(slices.Clone(all), absent)},
		{"two archives and one not cached, in one pass", scannedBytes, [][32]byte{all[5], absent, all[40]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := total(tc.keys)
			got, err := tc.size(h.store, newSHASet(append(slices.Clone(tc.keys), tc.keys...))) // duplicates count once
			if err != nil || got != want {
				t.Errorf("cached bytes = %d, %v; want %d", got, err, want)
			}
		})
	}
}

// Imports that alone exceed the size limit are said to at once: the
// status, the metric and a log line, with no retention pass and no
// restart.
func TestRetentionImportsOverLimitReported(t *testing.T) {
	t.Parallel()
	const size = 32 << 10
	met := &retentionMetrics{}
	var logs logbuf.Buffer
	h := newHarness(t, harnessOptions{
		store: cache.Options{MaxBytes: 2 * size},
		cfg:   mirror.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		ret:   Config{Metrics: met, MaxBytes: 2 * size, Interval: -1},
	})
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	var total int64
	for i := range 4 {
		vs := fmt.Sprintf("1.%d.0", i)
		zipped := enginetest.ZipOfSize(t, "thing", size, uint64(i))
		total += int64(len(zipped))
		in := imports.Imported{Provider: local, Version: mustVersion(t, vs), Unsigned: true, Packages: []imports.Package{{
			Platform: "linux_amd64", Filename: "terraform-provider-thing_" + vs + "_linux_amd64.zip", Document: -1,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
			},
		}}}
		if _, err := h.engine.AirGap().Import(t.Context(), in); err != nil {
			t.Fatalf("in-house import of %s: %v", vs, err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st := h.ret.Status()
		if st.LimitUnmet && st.KeptBytes == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after the imports: limit unmet %v, kept %d bytes; want true, %d", st.LimitUnmet, st.KeptBytes, total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	met.mu.Lock()
	if !met.unmet || met.kept != total {
		t.Errorf("metrics: kept %d bytes, limit unmet %v; want %d, true", met.kept, met.unmet, total)
	}
	met.mu.Unlock()
	if !strings.Contains(logs.String(), "size limit cannot be met") {
		t.Errorf("no log line says the limit cannot be met:\n%s", logs.String())
	}
}

// Imported module versions cannot be fetched again from where they came
// (a bundle, or a local module without origin): a keep-newest rule leaves
// them, as it leaves imported providers, while it removes an older module
// version fetched from its origin.
func TestRetentionKeepsImportedModules(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: mirror.Config{ScratchDir: t.TempDir()}, ret: Config{KeepVersions: 1, Interval: -1}})
	o := h.origin
	for _, v := range []string{"0.1.0", "0.2.0"} {
		o.AddTarball(v+".tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# " + v + "\n")}))
		o.AddModule("acme", "tarball", "aws", v, o.TarballURL(v+".tar.gz"))
	}
	for _, v := range []string{"0.1.0", "0.2.0"} {
		pkg, err := h.engine.Modules().OpenModule(context.Background(), tarballMod, enginetest.MustModuleVersion(t, v))
		if err != nil {
			t.Fatal(err)
		}
		pkg.Close()
	}
	local := addrs.Module{Hostname: "tf.corp.example", Namespace: "platform", Name: "net", System: "aws"}
	imported := addrs.Module{Hostname: originHost, Namespace: "acme", Name: "imported", System: "aws"}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		pkg := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# " + v + "\n")})
		if _, err := h.engine.Modules().ImportModule(context.Background(), modules.Imported{Module: local, Version: v, Local: true, Open: opener(pkg)}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.engine.Modules().ImportModule(context.Background(), modules.Imported{Module: imported, Version: v,
			Location: "https://example.test/" + v + ".tar.gz", SHA256: sha256Hex(pkg), Open: opener(pkg)}); err != nil {
			t.Fatal(err)
		}
	}
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0].Address != tarballMod.String() || done[0].Version != "0.1.0" {
		t.Errorf("prune removed %+v, want the older fetched module version only", done)
	}
	for _, m := range []addrs.Module{local, imported} {
		for _, v := range []string{"1.0.0", "1.1.0"} {
			pkg, err := h.engine.Modules().OpenModule(context.Background(), m, enginetest.MustModuleVersion(t, v))
			if err != nil {
				t.Errorf("%s %s after prune: %v", m, v, err)
				continue
			}
			pkg.Close()
		}
	}
}

// Retention wired wrongly stops at start: without the engine or its
// store, with a shared store that only one of the engine and retention
// has, or as a second retention of one engine.
func TestNewRefusesWrongWiring(t *testing.T) {
	t.Parallel()
	origin := enginetest.StartOrigin(t, fakeorigin.Options{})
	engine := func(t *testing.T, shared mirror.SharedTier) (*mirror.Inventory, *cache.Store) {
		t.Helper()
		store := enginetest.OpenStore(t, "", cache.Options{})
		e, err := mirror.New(mirror.Config{AllowedOrigins: []string{originHost}, Shared: shared, Logger: enginetest.Logger(t)},
			enginetest.OriginClient(t, origin), store)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(); store.Close() })
		return e.Inventory(), store
	}
	for _, tc := range []struct {
		name  string
		setUp func(t *testing.T) (Engine, Store, Shared)
	}{
		{"no engine", func(t *testing.T) (Engine, Store, Shared) {
			_, store := engine(t, nil)
			return nil, store, nil
		}},
		{"no store", func(t *testing.T) (Engine, Store, Shared) {
			e, _ := engine(t, nil)
			return e, nil, nil
		}},
		{"a shared store for the engine only", func(t *testing.T) (Engine, Store, Shared) {
			e, store := engine(t, enginerig.NewMemTier())
			return e, store, nil
		}},
		{"a shared store for retention only", func(t *testing.T) (Engine, Store, Shared) {
			e, store := engine(t, nil)
			return e, store, enginerig.NewMemTier()
		}},
		{"a second retention of one engine", func(t *testing.T) (Engine, Store, Shared) {
			e, store := engine(t, nil)
			r, err := New(Config{Interval: -1}, e, store, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			return e, store, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, store, shared := tc.setUp(t)
			r, err := New(Config{Interval: -1}, e, store, shared)
			if err == nil {
				r.Close()
				t.Fatal("New took it")
			}
		})
	}
}

// laterPins is a pins directory whose files are refused (an upgrade's
// new check of their mode or owner, a file that does not parse) until
// fixed is set, and then pin nothing.
type laterPins struct{ fixed atomic.Bool }

func (p *laterPins) Pins() (*Pins, bool, error) {
	if !p.fixed.Load() {
		return nil, false, errors.New("pins/team.lock.hcl has mode 0664: refused")
	}
	return &Pins{}, true, nil
}

// The size limit evicts nothing while the pins were never read, as the
// rules remove nothing (TestRetentionRulesWaitForPins): what they pin is
// not known, and a pinned version is never removed by the size limit.
// Once the pins are read, what they do not pin may be evicted.
func TestSizeLimitWaitsForPins(t *testing.T) {
	t.Parallel()
	pins := &laterPins{}
	h := newHarness(t, harnessOptions{ret: Config{Interval: -1, Pins: pins}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	h.readAll("1.0.0")
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	h.ret.pins.first(h.ret.log)
	h.ret.rebuild()
	if h.ret.Evictable(sha) {
		t.Error("the size limit may evict an archive while the pins were never read")
	}
	pins.fixed.Store(true)
	if !h.ret.pins.read(h.ret.log) {
		t.Fatal("the pins read did not change them")
	}
	h.ret.rebuild()
	if !h.ret.Evictable(sha) {
		t.Error("an archive no pin selects, which can be fetched again, is kept from the size limit once the pins were read")
	}
}

// brokenPins is a pins directory whose files do not parse.
type brokenPins struct{}

func (brokenPins) Pins() (*Pins, bool, error) {
	return nil, false, errors.New("pins/team.hcl:1: Nesting too deep")
}

// The rules remove nothing while the pins were never read: what they pin
// is not known. A version named is removed all the same.
func TestRetentionRulesWaitForPins(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{
		ret: Config{Metrics: &retentionMetrics{}, KeepVersions: 1, Interval: -1, Pins: brokenPins{}},
	})
	all := []string{"1.0.0", "2.0.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...)
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err == nil || !strings.Contains(err.Error(), "pins/team.hcl:1: Nesting too deep") || len(done) != 0 {
		t.Errorf("prune by the rules with unreadable pins: %v, %v", removalNames(done), err)
	}
	if !h.isCached("1.0.0") {
		t.Error("1.0.0 was removed")
	}
	if st := h.ret.Status(); !strings.Contains(st.PinsError, "Nesting too deep") {
		t.Errorf("status pins error %q", st.PinsError)
	}
	p := addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	if done, err := h.ret.Prune(t.Context(), PruneRequest{Provider: &p, Versions: []string{"1.0.0"}}); err != nil || len(done) != 1 {
		t.Errorf("prune of a named version: %v, %v", removalNames(done), err)
	}
}

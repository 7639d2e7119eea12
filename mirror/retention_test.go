package mirror

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/internal/cachetest"
	"github.com/tfmirror/tfmirror/internal/fakeorigin"
	"github.com/tfmirror/tfmirror/internal/s3test"
)

// staticPins pins exact versions of the test provider.
type staticPins struct {
	mu      sync.Mutex
	pins    *Pins
	changed bool
}

func pinVersions(t *testing.T, addr string, vs ...string) *staticPins {
	t.Helper()
	var sels []PinSelection
	for _, v := range vs {
		sels = append(sels, PinSelection{Set: versions.Only(mustVersion(t, v)), Where: "test.lock.hcl:1"})
	}
	return &staticPins{pins: &Pins{Providers: map[string][]PinSelection{addr: sels}}, changed: true}
}

func (p *staticPins) Pins() (*Pins, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.changed {
		return nil, false, nil
	}
	p.changed = false
	return p.pins, true, nil
}

// retentionMetrics records what retention reports.
type retentionMetrics struct {
	noMetrics
	mu        sync.Mutex
	removed   map[string][2]int64 // rule -> versions, bytes
	kept      int64
	unmet     bool
	keptCalls int
}

func (m *retentionMetrics) RetentionRemoved(rule string, versions int, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.removed == nil {
		m.removed = map[string][2]int64{}
	}
	r := m.removed[rule]
	m.removed[rule] = [2]int64{r[0] + int64(versions), r[1] + bytes}
}

func (m *retentionMetrics) RetentionKept(bytes int64, unmet bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kept, m.unmet = bytes, unmet
	m.keptCalls++
}

// logBuffer collects log lines, safely for concurrent writers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// readAll reads every given version of the test provider for linux_amd64
// and checks the bytes.
func (h *harness) readAll(versions ...string) {
	h.t.Helper()
	for _, v := range versions {
		want := h.origin.Archive(ns, typ, v, "linux_amd64")
		if r := h.read(h.t.Context(), v, "linux_amd64"); r.err != nil || !bytes.Equal(r.body, want) {
			h.t.Fatalf("%s: err %v, %d bytes", v, r.err, len(r.body))
		}
		h.waitCommitted(h.origin.SHA256(ns, typ, v, "linux_amd64"))
	}
}

func (h *harness) isCached(v string) bool {
	_, err := h.store.StatBlob(h.origin.SHA256(ns, typ, v, "linux_amd64"))
	return err == nil
}

func removalNames(rs []Removal) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Version+" "+r.Rule)
	}
	return out
}

// Keep the newest 3: the fourth-newest version's packages go, a pinned
// older version stays, and a dry run lists exactly what the prune then
// removes, with sizes.
func TestRetentionKeepNewest(t *testing.T) {
	t.Parallel()
	const size = 8 << 10
	p := discovery.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	met := &retentionMetrics{}
	h := newHarness(t, harnessOptions{
		origin: fakeorigin.Options{ArchiveSize: size},
		cfg: Config{Metrics: met, Retention: Retention{KeepVersions: 3, Interval: -1,
			Pins: pinVersions(t, p.String(), "1.0.0")}},
	})
	all := []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0", "5.0.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...)

	dry, err := h.engine.Prune(t.Context(), PruneRequest{DryRun: true})
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
	done, err := h.engine.Prune(t.Context(), PruneRequest{})
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
	st := h.engine.RetentionStatus()
	if st.LastPass.IsZero() {
		t.Error("the status gives no time of the last pass")
	}
	if len(st.Pinned) != 1 || st.Pinned[0].Version != "1.0.0" || st.Pinned[0].Address != p.String() {
		t.Errorf("status lists pinned %+v, want 1.0.0", st.Pinned)
	}
	// Nothing more to do; a version removed by a rule is fetched again.
	if again, err := h.engine.Prune(t.Context(), PruneRequest{DryRun: true}); err != nil || len(again) != 0 {
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
	h := newHarness(t, harnessOptions{cfg: Config{Retention: Retention{KeepVersions: 1, KeepPerMajor: true, Interval: -1}}})
	all := []string{"1.0.0", "1.1.0", "2.0.0", "2.1.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...)
	done, err := h.engine.Prune(t.Context(), PruneRequest{})
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
	clock := newFakeClock()
	opts := harnessOptions{
		cacheDir: t.TempDir(),
		cfg:      Config{Now: clock.Now, Retention: Retention{UnusedAfter: 7 * 24 * time.Hour, Interval: -1}},
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
	done, err := h.engine.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removalNames(done), []string{"1.0.0 unused"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	clock.Add(3 * 24 * time.Hour) // day 10 1h: 2.0.0 (day 3) is unused for 7 days
	done, err = h.engine.Prune(t.Context(), PruneRequest{})
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
	h := newHarness(t, harnessOptions{cfg: Config{Retention: Retention{KeepVersions: 1, Interval: time.Millisecond}}})
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
	p := discovery.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	met := &retentionMetrics{}
	var logs logBuffer
	h := newHarness(t, harnessOptions{
		origin: fakeorigin.Options{ArchiveSize: size},
		store:  cache.Options{MaxBytes: size + size/2},
		cfg: Config{Metrics: met, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Retention: Retention{MaxBytes: size + size/2, Interval: -1, Pins: pinVersions(t, p.String(), "1.0.0", "2.0.0")}},
	})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0", "3.0.0"}, []string{"linux_amd64"})
	for _, v := range []string{"1.0.0", "2.0.0", "3.0.0"} {
		// Over the limit from the second on: each is served whole all the same.
		if r := h.read(t.Context(), v, "linux_amd64"); r.err != nil || !bytes.Equal(r.body, h.origin.Archive(ns, typ, v, "linux_amd64")) {
			t.Fatalf("%s: err %v, %d bytes", v, r.err, len(r.body))
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
	h.engine.ret.rebuild() // as a pass does
	st := h.engine.RetentionStatus()
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

// zipOfSize is an in-house provider package of type typ with an
// incompressible payload of about size bytes, distinct per seed.
func zipOfSize(t *testing.T, typ string, size int, seed uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	fh := &zip.FileHeader{Name: "terraform-provider-" + typ, Method: zip.Store}
	fh.SetMode(0o755)
	f, err := zw.CreateHeader(fh)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "#!/bin/sh\nexit 1\n")
	pad := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, seed+1))
	for i := range pad {
		pad[i] = byte(r.Uint32())
	}
	pf, err := zw.CreateHeader(&zip.FileHeader{Name: "padding", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	pf.Write(pad)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
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
		v := mustVersion(t, vs)
		ev, err := src.engine.Evidence(t.Context(), src.provider(), v, []discovery.Platform{mustPlatform(t, "linux_amd64")})
		if err != nil {
			t.Fatal(err)
		}
		in := importedFrom(ev, func(pl string) []byte { return src.origin.Archive(ns, typ, vs, pl) })
		in.Version = v
		if _, err := dst.engine.Import(t.Context(), in); err != nil {
			t.Fatalf("signed import of %s: %v", vs, err)
		}
	}
	// In-house packages of a local-only host.
	local := discovery.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	inHouse := map[string][]byte{}
	for i := range 6 {
		vs := fmt.Sprintf("1.%d.0", i)
		zipped := zipOfSize(t, "thing", size, uint64(i))
		inHouse[vs] = zipped
		in := Imported{Provider: local, Version: mustVersion(t, vs), Unsigned: true, Packages: []ImportedPackage{{
			Platform: "linux_amd64", Filename: "terraform-provider-thing_" + vs + "_linux_amd64.zip", Document: -1,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
			},
		}}}
		if _, err := dst.engine.Import(t.Context(), in); err != nil {
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
	opts.cfg.Retention = Retention{KeepVersions: 1, UnusedAfter: time.Nanosecond, Interval: -1}
	dst.start(opts)
	if done, err := dst.engine.Prune(t.Context(), PruneRequest{}); err != nil || len(done) != 0 {
		t.Errorf("the rules removed %v (%v)", removalNames(done), err)
	}

	// A prune naming an in-house version removes it, and unlists it.
	dry, err := dst.engine.Prune(t.Context(), PruneRequest{DryRun: true, Provider: &local, Versions: []string{"1.2.0"}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := dst.engine.Prune(t.Context(), PruneRequest{Provider: &local, Versions: []string{"1.2.0"}})
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
	if _, err := dst.engine.Prune(t.Context(), PruneRequest{Provider: &local, Versions: []string{"9.9.9"}}); !errors.Is(err, ErrVersionNotFound) {
		t.Errorf("prune of a version not held: %v, want ErrVersionNotFound", err)
	}
}

// A version of a local-only host whose packages are gone is not listed.
func TestLocalVersionWithoutPackagesNotListed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	local := discovery.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	shas := map[string]string{}
	for i, vs := range []string{"1.0.0", "2.0.0"} {
		zipped := zipOfSize(t, "thing", 1024, uint64(i))
		sum := sha256.Sum256(zipped)
		shas[vs] = hex.EncodeToString(sum[:])
		in := Imported{Provider: local, Version: mustVersion(t, vs), Unsigned: true, Packages: []ImportedPackage{{
			Platform: "linux_amd64", Filename: "terraform-provider-thing_" + vs + "_linux_amd64.zip", Document: -1,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
			},
		}}}
		if _, err := h.engine.Import(t.Context(), in); err != nil {
			t.Fatal(err)
		}
	}
	// Lost as an earlier release's size limit lost them.
	if err := cachetest.DeleteBlob(h.store, shas["1.0.0"]); err != nil {
		t.Fatal(err)
	}
	list, _, err := h.engine.Versions(t.Context(), local)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Versions) != 1 || list.Versions[0].Version != "2.0.0" {
		t.Errorf("versions %+v, want 2.0.0 only", list.Versions)
	}
}

// Eviction never fails a client: with a working set far larger than the
// size limit and many clients at once, every client gets every archive
// whole (from the cache, a download under way, or the origin again).
func TestTinySizeLimitManyClients(t *testing.T) {
	t.Parallel()
	const size = 32 << 10
	h := newHarness(t, harnessOptions{
		origin: fakeorigin.Options{ArchiveSize: size},
		store:  cache.Options{MaxBytes: size + size/2},
	})
	vs := []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0"}
	h.origin.AddProvider(ns, typ, vs, platforms)
	var wg sync.WaitGroup
	errs := make(chan string, 16*len(vs)*len(platforms)*2)
	for c := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 7))
			for range 2 {
				for _, i := range r.Perm(len(vs) * len(platforms)) {
					v, pl := vs[i/len(platforms)], platforms[i%len(platforms)]
					got := h.read(context.Background(), v, pl)
					if got.err != nil || !bytes.Equal(got.body, h.origin.Archive(ns, typ, v, pl)) {
						errs <- fmt.Sprintf("%s %s: %v (%d bytes)", v, pl, got.err, len(got.body))
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	h.waitIdle()
	if err := cachetest.Evict(t.Context(), h.store); err != nil {
		t.Fatal(err)
	}
	if _, total := h.store.Stats(); total > size+size/2 {
		t.Errorf("the cache holds %d bytes over its %d limit once clients are gone", total, size+size/2)
	}
}

// With a shared store, a download on another replica counts as a use.
func TestRetentionUnusedCountsOtherReplicas(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	tier := newMemTier()
	cfg := Config{Now: clock.Now, Shared: tier, Retention: Retention{UnusedAfter: 7 * 24 * time.Hour, Interval: -1}}
	a := newHarness(t, harnessOptions{cfg: cfg})
	a.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	b := &harness{t: t, origin: a.origin}
	b.start(harnessOptions{cfg: cfg})
	a.readAll("1.0.0")
	b.readAll("1.0.0")
	clock.Add(5 * 24 * time.Hour)
	b.readAll("1.0.0") // day 5, on b only
	b.stop()           // written to the shared store
	clock.Add(3 * 24 * time.Hour)
	if done, err := a.engine.Prune(t.Context(), PruneRequest{}); err != nil || len(done) != 0 {
		t.Errorf("day 8: removed %v (%v); b downloaded it on day 5", removalNames(done), err)
	}
	clock.Add(5 * 24 * time.Hour)
	if done, err := a.engine.Prune(t.Context(), PruneRequest{}); err != nil || !reflect.DeepEqual(removalNames(done), []string{"1.0.0 unused"}) {
		t.Errorf("day 13: removed %v (%v), want 1.0.0", removalNames(done), err)
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
	h := newHarness(t, harnessOptions{cfg: Config{Retention: Retention{KeepVersions: 2, Interval: -1}}})
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
	done, err := h.engine.Prune(t.Context(), PruneRequest{})
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
	ret := Retention{KeepVersions: 1, Interval: -1}
	sa, sb := newSharedStore(t, srv, "a", nil), newSharedStore(t, srv, "b", nil)
	a := newHarness(t, harnessOptions{cfg: Config{Shared: sharedTier{sa}, Retention: ret}})
	b := &harness{t: t, origin: a.origin}
	b.start(harnessOptions{cfg: Config{Shared: sharedTier{sb}, Retention: ret}})
	vs := []string{"1.0.0", "2.0.0", "3.0.0"}
	a.origin.AddProvider(ns, typ, vs, []string{"linux_amd64"})
	a.readAll("1.0.0", "2.0.0")
	b.readAll("3.0.0")
	a.waitIdle()
	b.waitIdle()
	inBucket := func() map[string]bool {
		t.Helper()
		got := map[string]bool{}
		if err := sa.ListArchives(t.Context(), func(sha string, _ int64, _ time.Time) error { got[sha] = true; return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	sha := func(v string) string { return a.origin.SHA256(ns, typ, v, "linux_amd64") }
	deadline := time.Now().Add(30 * time.Second)
	for len(inBucket()) < 3 { // each replica puts what it fetched, in the background
		if time.Now().After(deadline) {
			t.Fatalf("the bucket holds %d archives, want 3", len(inBucket()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// While b holds the lease, a leaves the bucket alone.
	lease, err := sb.TryLease(t.Context(), retentionLeaseID)
	if err != nil || lease == nil {
		t.Fatalf("lease: %v", err)
	}
	if done, err := a.engine.ret.pruneShared(t.Context()); err != nil || done != nil {
		t.Errorf("pruned the bucket under b's lease: %v, %v", removalNames(done), err)
	}
	lease.Release(t.Context())
	done, err := a.engine.ret.pruneShared(t.Context())
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

// plainStore is a Store with none of the optional methods of
// *cache.Store (ScanBlobs among them).
type plainStore struct{ Store }

// The bytes kept from the size limit are the cached sizes of the kept
// archives, each once, whether they are read in one ordered pass over
// the cache's archives (a large set) or one lookup each (a small set, or
// a store that cannot scan).
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
		for _, k := range keys {
			n += sizes[k]
		}
		return n
	}
	tests := []struct {
		name  string
		store Store
		keys  [][32]byte
	}{
		{"none", h.store, nil},
		{"every archive and one not cached, in one pass", h.store, append(slices.Clone(all), absent)},
		{"the last archives, in one pass", h.store, slices.Clone(all[32:])},
		{"two archives and one not cached, a lookup each", h.store, [][32]byte{all[5], absent, all[40]}},
		{"every archive, from a store that cannot scan", plainStore{h.store}, slices.Clone(all)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := total(tc.keys)
			r := &retainer{s: &Engine{cfg: h.engine.cfg, store: tc.store}}
			got, err := r.cachedBytes(newSHASet(append(tc.keys, tc.keys...))) // duplicates count once
			if err != nil || got != want {
				t.Errorf("cachedBytes = %d, %v; want %d", got, err, want)
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
	var logs logBuffer
	h := newHarness(t, harnessOptions{
		store: cache.Options{MaxBytes: 2 * size},
		cfg: Config{Metrics: met, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Retention: Retention{MaxBytes: 2 * size, Interval: -1}},
	})
	local := discovery.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	var total int64
	for i := range 4 {
		vs := fmt.Sprintf("1.%d.0", i)
		zipped := zipOfSize(t, "thing", size, uint64(i))
		total += int64(len(zipped))
		in := Imported{Provider: local, Version: mustVersion(t, vs), Unsigned: true, Packages: []ImportedPackage{{
			Platform: "linux_amd64", Filename: "terraform-provider-thing_" + vs + "_linux_amd64.zip", Document: -1,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
			},
		}}}
		if _, err := h.engine.Import(t.Context(), in); err != nil {
			t.Fatalf("in-house import of %s: %v", vs, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := h.engine.RetentionStatus()
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

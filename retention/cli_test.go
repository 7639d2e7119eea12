package retention

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// The CLI products' addresses, as retention and the policy name them.
var (
	tfAddr   = releases.Address(releases.HashiCorp, "terraform")
	tofuAddr = releases.Address(releases.OpenTofu, "tofu")
)

// cliRig is the CLI releases side on an engine and a cache, before the
// stand-in release origins, with the cache's retention counting CLI
// versions.
type cliRig struct {
	t      *testing.T
	origin *fakeorigin.Releases
	dir    string
	store  *cache.Store
	engine *mirror.Engine
	rel    *releases.Releases
	ret    *Retainer
	closed bool
}

func startReleasesOrigin(t *testing.T) *fakeorigin.Releases {
	t.Helper()
	o, err := fakeorigin.StartReleases()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	for _, v := range []string{"1.5.7", "1.6.0", "1.7.0"} {
		o.Add("hashicorp", "terraform", v, "linux_amd64")
	}
	o.Add("opentofu", "tofu", "1.8.0", "linux_amd64")
	return o
}

// newCLIRig opens the rig on the cache in dir, sealed or not, with
// retention configured by cfg (its CLI set to the releases side).
func newCLIRig(t *testing.T, o *fakeorigin.Releases, dir string, offline bool, clock *enginetest.FakeClock, cfg Config) *cliRig {
	t.Helper()
	r := &cliRig{t: t, origin: o, dir: dir}
	r.store = enginetest.OpenStore(t, dir, cache.Options{})
	client, host := enginetest.ReleasesClient(t, o)
	var err error
	ecfg := mirror.Config{AllowedOrigins: []string{host}, Logger: enginetest.Logger(t), Offline: offline}
	if clock != nil {
		ecfg.Now = clock.Now
	}
	if r.engine, err = mirror.New(ecfg, client, r.store); err != nil {
		t.Fatal(err)
	}
	rcfg := releases.Config{
		HashiCorpURL: o.HashiCorpURL, HashiCorpKeys: []string{o.HashiCorpKey},
		OpenTofuDownloadURL: o.OpenTofuDownloadURL, OpenTofuAPIURL: o.OpenTofuAPIURL, OpenTofuKeys: []string{o.OpenTofuKey},
		Offline: offline, Logger: enginetest.Logger(t),
	}
	if clock != nil {
		rcfg.Now = clock.Now
	}
	if r.rel, err = releases.New(rcfg, client, r.engine, r.store); err != nil {
		t.Fatal(err)
	}
	cfg.CLI = r.rel.Inventory()
	if r.ret, err = New(cfg, r.engine.Inventory(), r.store, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return r
}

// stop closes the releases side, the engine, retention (which writes the
// last uses) and the cache.
func (r *cliRig) stop() {
	if r.closed {
		return
	}
	r.closed = true
	r.rel.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.engine.Shutdown(ctx); err != nil {
		r.t.Errorf("shutdown: %v", err)
	}
	r.ret.Close()
	r.store.Close()
}

// protected says whether the size limit is kept from evicting sha, once
// retention has read what the cache holds.
func (r *cliRig) protected(sha string) bool {
	k, _ := shaKey(sha)
	p := &r.ret.prot
	p.mu.RLock()
	defer p.mu.RUnlock()
	_, extra := p.extra[k]
	return extra || p.set.has(k)
}

// read reads the linux_amd64 archive of version of product through the
// releases side (as the door does), and waits until it is committed.
func (r *cliRig) read(product, version string) error {
	r.t.Helper()
	pub := releases.PublisherOf(product)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	arc, err := r.rel.OpenArchive(ctx, pub, product, version, fakeorigin.ArchiveName(product, version, "linux_amd64"))
	if err != nil {
		return err
	}
	data, err := io.ReadAll(arc)
	arc.Close()
	if err != nil {
		return err
	}
	if sha := fakeorigin.ArchiveSHA256(product, version, "linux_amd64"); sha256Hex(data) != sha {
		r.t.Fatalf("%s %s: bytes of sha256 %s, want %s", product, version, sha256Hex(data), sha)
	}
	enginetest.WaitCommitted(r.t, func(ctx context.Context) error { return mirror.WaitIdle(ctx, r.engine) }, r.store,
		fakeorigin.ArchiveSHA256(product, version, "linux_amd64"))
	return nil
}

func (r *cliRig) readAll(product string, vs ...string) {
	r.t.Helper()
	for _, v := range vs {
		if err := r.read(product, v); err != nil {
			r.t.Fatalf("%s %s: %v", product, v, err)
		}
	}
}

func (r *cliRig) isCached(product, version string) bool {
	_, err := r.store.StatBlob(fakeorigin.ArchiveSHA256(product, version, "linux_amd64"))
	return err == nil
}

func (r *cliRig) archiveHits(product, version string) int {
	name := fakeorigin.ArchiveName(product, version, "linux_amd64")
	if releases.PublisherOf(product) == releases.OpenTofu {
		return r.origin.Hits("/tofu/download/v" + version + "/" + name)
	}
	return r.origin.Hits("/hc/" + product + "/" + version + "/" + name)
}

// pinCLI pins exact versions of a CLI product.
func pinCLI(t *testing.T, addr string, vs ...string) *staticPins {
	t.Helper()
	var sels []PinSelection
	for _, v := range vs {
		sels = append(sels, PinSelection{Set: versions.Only(mustVersion(t, v)), Where: "clis.hcl:2"})
	}
	return &staticPins{pins: &Pins{CLIs: map[string][]PinSelection{addr: sels}}, changed: true}
}

func cliRemovals(rs []Removal) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Kind+" "+r.Address+" "+r.Version+" "+r.Rule)
	}
	return out
}

// Keep the newest 1 of each CLI product: of terraform's three versions the
// pinned 1.5.7 and the newest 1.7.0 stay, 1.6.0's archive goes (its
// SHA256SUMS stays: it is fetched again when asked for); OpenTofu's one
// version is its own product's newest. A dry run lists exactly what the
// prune then removes, and removes nothing.
func TestRetentionCLIKeepNewestPinned(t *testing.T) {
	t.Parallel()
	o := startReleasesOrigin(t)
	r := newCLIRig(t, o, "", false, nil, Config{KeepVersions: 1, Interval: -1, Pins: pinCLI(t, tfAddr, "1.5.7")})
	r.readAll("terraform", "1.5.7", "1.6.0", "1.7.0")
	r.readAll("tofu", "1.8.0")

	dry, err := r.ret.Prune(t.Context(), PruneRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cli " + tfAddr + " 1.6.0 keep-versions"}
	if got := cliRemovals(dry); !reflect.DeepEqual(got, want) {
		t.Fatalf("dry run lists %v, want %v", got, want)
	}
	if sha := fakeorigin.ArchiveSHA256("terraform", "1.6.0", "linux_amd64"); len(dry[0].Archives) != 1 || dry[0].Archives[0] != sha ||
		dry[0].Bytes != int64(len(o.Archive("terraform", "1.6.0", "linux_amd64"))) || dry[0].Unlisted {
		t.Errorf("dry run removal %+v, want 1.6.0's one archive, not unlisted", dry[0])
	}
	for _, v := range []string{"1.5.7", "1.6.0", "1.7.0"} {
		if !r.isCached("terraform", v) {
			t.Errorf("terraform %s was removed by a dry run", v)
		}
	}
	done, err := r.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(done, dry) {
		t.Errorf("prune removed %+v, the dry run listed %+v", done, dry)
	}
	for _, v := range []string{"1.5.7", "1.6.0", "1.7.0"} {
		if got, want := r.isCached("terraform", v), v != "1.6.0"; got != want {
			t.Errorf("terraform %s cached = %v, want %v", v, got, want)
		}
	}
	if !r.isCached("tofu", "1.8.0") {
		t.Error("tofu 1.8.0, its product's newest, was removed")
	}
	st := r.ret.Status()
	if len(st.Pinned) != 1 || st.Pinned[0] != (PinnedVersion{Kind: "cli", Address: tfAddr, Version: "1.5.7", Where: "clis.hcl:2"}) {
		t.Errorf("status lists pinned %+v, want cli terraform 1.5.7", st.Pinned)
	}
	// The size limit may not evict the pinned version's archive; it may
	// evict the others, which can be fetched again.
	if r.ret.Evictable(fakeorigin.ArchiveSHA256("terraform", "1.5.7", "linux_amd64")) {
		t.Error("the size limit may evict the pinned CLI version")
	}
	if !r.ret.Evictable(fakeorigin.ArchiveSHA256("terraform", "1.7.0", "linux_amd64")) {
		t.Error("the size limit may not evict an unpinned CLI version that can be fetched again")
	}
	// The removed version is fetched again when asked for.
	r.readAll("terraform", "1.6.0")
	if n := r.archiveHits("terraform", "1.6.0"); n != 2 {
		t.Errorf("origin fetches of the removed version = %d, want 2", n)
	}
	if again, err := r.ret.Prune(t.Context(), PruneRequest{DryRun: true}); err != nil || len(again) != 1 {
		t.Errorf("dry run after 1.6.0 was fetched again: %v, %v; want it listed again", cliRemovals(again), err)
	}
}

// The unused rule counts a CLI version's downloads: the last use is
// recorded when its archive is served, written to the cache in a batch
// (and read after a restart), and a version unused for longer is removed
// while the one served since stays.
func TestRetentionCLIUnusedLastUse(t *testing.T) {
	t.Parallel()
	o := startReleasesOrigin(t)
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now())
	dir := t.TempDir()
	cfg := Config{UnusedAfter: 7 * 24 * time.Hour, Interval: -1}
	r := newCLIRig(t, o, dir, false, clock, cfg)
	r.readAll("terraform", "1.5.7", "1.6.0") // day 0
	clock.Add(5 * 24 * time.Hour)
	r.readAll("terraform", "1.6.0") // day 5
	r.stop()                        // writes the last uses

	r = newCLIRig(t, o, dir, false, clock, cfg)
	var uses []string
	r.store.ScanMeta(lastUsePrefix+"releases/", func(key string, _ time.Time, raw json.RawMessage) error {
		var doc lastUseDoc
		json.Unmarshal(raw, &doc)
		uses = append(uses, strings.TrimPrefix(key, lastUsePrefix)+" "+doc.At.Sub(clock.Now()).String())
		return nil
	})
	want := []string{"releases/sums/hashicorp/terraform/1.5.7 -120h0m0s", "releases/sums/hashicorp/terraform/1.6.0 0s"}
	if !reflect.DeepEqual(uses, want) {
		t.Errorf("last uses written %v, want %v", uses, want)
	}
	clock.Add(3 * 24 * time.Hour) // day 8: 1.5.7 unused for 8 days, 1.6.0 for 3
	done, err := r.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cliRemovals(done), []string{"cli " + tfAddr + " 1.5.7 unused"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	if r.isCached("terraform", "1.5.7") || !r.isCached("terraform", "1.6.0") {
		t.Errorf("cached after the prune: 1.5.7 %v, 1.6.0 %v; want only 1.6.0", r.isCached("terraform", "1.5.7"), r.isCached("terraform", "1.6.0"))
	}
}

// What cannot be fetched again is never thrown away by a rule: on a
// sealed mirror every CLI version is kept (and kept from the size limit),
// as is, on a mirror that is not sealed, a version whose SHA256SUMS was
// imported from a bundle. A prune naming such a version removes it, and
// says so (unlisted): its SHA256SUMS goes too, so that the sealed mirror
// neither lists it nor serves its SHA256SUMS (404), while the others
// still install.
func TestRetentionCLIKeepsWhatCannotBeFetchedAgain(t *testing.T) {
	t.Parallel()
	o := startReleasesOrigin(t)
	dir := t.TempDir()
	online := newCLIRig(t, o, dir, false, nil, Config{Interval: -1})
	if _, _, err := online.rel.Versions(t.Context(), releases.HashiCorp, "terraform"); err != nil {
		t.Fatal(err)
	}
	online.readAll("terraform", "1.5.7", "1.6.0", "1.7.0")
	// 1.5.7 came in a bundle.
	key := "releases/sums/hashicorp/terraform/1.5.7"
	var s releases.Sums
	if _, err := online.store.GetMeta(key, &s); err != nil {
		t.Fatal(err)
	}
	s.Provenance = records.ProvenanceImported
	if err := online.store.PutMeta(key, &s); err != nil {
		t.Fatal(err)
	}
	online.stop()

	r := newCLIRig(t, o, dir, false, nil, Config{KeepVersions: 1, Interval: -1})
	done, err := r.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cliRemovals(done), []string{"cli " + tfAddr + " 1.6.0 keep-versions"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v (1.5.7 was imported)", got, want)
	}
	if !r.isCached("terraform", "1.5.7") {
		t.Error("the imported version was removed by a rule")
	}
	if r.ret.Evictable(fakeorigin.ArchiveSHA256("terraform", "1.5.7", "linux_amd64")) {
		t.Error("the size limit may evict an imported CLI version")
	}
	r.stop()

	sealed := newCLIRig(t, o, dir, true, nil, Config{KeepVersions: 1, UnusedAfter: time.Nanosecond, Interval: -1})
	before := o.TotalHits()
	if done, err := sealed.ret.Prune(t.Context(), PruneRequest{}); err != nil || len(done) != 0 {
		t.Errorf("sealed, the rules removed %v (%v); want nothing", cliRemovals(done), err)
	}
	if sealed.ret.Evictable(fakeorigin.ArchiveSHA256("terraform", "1.7.0", "linux_amd64")) {
		t.Error("sealed, the size limit may evict a CLI archive")
	}
	// A prune naming 1.7.0 removes it, with its SHA256SUMS.
	done, err = sealed.ret.Prune(t.Context(), PruneRequest{CLI: tfAddr, Versions: []string{"1.7.0"}, DryRun: true})
	if err != nil || len(done) != 1 || !done[0].Unlisted || len(done[0].Archives) != 1 {
		t.Fatalf("dry run of a named prune: %+v, %v; want 1.7.0 unlisted with its archive", done, err)
	}
	if !sealed.isCached("terraform", "1.7.0") {
		t.Fatal("a dry run removed 1.7.0")
	}
	done, err = sealed.ret.Prune(t.Context(), PruneRequest{CLI: tfAddr, Versions: []string{"1.7.0"}})
	if err != nil || len(done) != 1 || !done[0].Unlisted || done[0].Rule != RuleNamed {
		t.Fatalf("named prune: %+v, %v", done, err)
	}
	if sealed.isCached("terraform", "1.7.0") {
		t.Error("the named version's archive is still cached")
	}
	ctx := t.Context()
	if _, err := sealed.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.7.0"); !errors.Is(err, releases.ErrNotFound) {
		t.Errorf("the pruned version's SHA256SUMS, sealed: %v, want ErrNotFound", err)
	}
	if _, err := sealed.rel.Document(ctx, releases.HashiCorp, "terraform", "1.7.0", "terraform_1.7.0_SHA256SUMS"); !errors.Is(err, releases.ErrNotFound) {
		t.Errorf("the pruned version's SHA256SUMS file, sealed: %v, want ErrNotFound", err)
	}
	list, _, err := sealed.rel.Versions(ctx, releases.HashiCorp, "terraform")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, l := range list.Versions {
		listed = append(listed, l.Version)
	}
	if want := []string{"1.5.7"}; !reflect.DeepEqual(listed, want) {
		t.Errorf("sealed list %v, want %v (1.6.0 pruned by a rule before, 1.7.0 by name)", listed, want)
	}
	if _, err := sealed.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0"); !errors.Is(err, releases.ErrNotFound) {
		t.Errorf("1.6.0, whose archive a rule removed, sealed: %v, want ErrNotFound", err)
	}
	if err := sealed.read("terraform", "1.5.7"); err != nil {
		t.Errorf("the kept version, sealed: %v", err)
	}
	if n := o.TotalHits(); n != before {
		t.Errorf("the sealed mirror made %d origin requests", n-before)
	}
	// Naming a version the cache does not hold is an error.
	if _, err := sealed.ret.Prune(ctx, PruneRequest{CLI: tfAddr, Versions: []string{"1.7.0"}}); !errors.Is(err, records.ErrVersionNotFound) {
		t.Errorf("naming a pruned version again: %v, want ErrVersionNotFound", err)
	}
}

// A CLI version served for the first time under a pin is kept from the
// size limit before any rebuild read its SHA256SUMS.
func TestRetentionCLIServingPinned(t *testing.T) {
	t.Parallel()
	o := startReleasesOrigin(t)
	r := newCLIRig(t, o, "", false, nil, Config{Interval: -1, Pins: pinCLI(t, tofuAddr, "1.8.0")})
	r.ret.pins.first(r.ret.log)
	r.readAll("tofu", "1.8.0")
	r.readAll("terraform", "1.7.0")
	if !r.protected(fakeorigin.ArchiveSHA256("tofu", "1.8.0", "linux_amd64")) {
		t.Error("the size limit may evict the archive of a pinned CLI version just served")
	}
	if r.protected(fakeorigin.ArchiveSHA256("terraform", "1.7.0", "linux_amd64")) {
		t.Error("the size limit may not evict an unpinned CLI version")
	}
	r.ret.rebuild() // reads the SHA256SUMS: the same
	if r.ret.Evictable(fakeorigin.ArchiveSHA256("tofu", "1.8.0", "linux_amd64")) || !r.ret.Evictable(fakeorigin.ArchiveSHA256("terraform", "1.7.0", "linux_amd64")) {
		t.Error("after a rebuild, the size limit may evict the pinned version, or not the other")
	}
}

// A pin of the newest N cached CLI versions (a cli block's latest = N)
// counts among the cached versions of its product only.
func TestRetentionCLIPinLatest(t *testing.T) {
	t.Parallel()
	o := startReleasesOrigin(t)
	pins := &staticPins{changed: true, pins: &Pins{CLIs: map[string][]PinSelection{
		tfAddr: {{Set: versions.MustMakeSet(versions.MeetingConstraintsStringRuby(">= 1.5.0")), Latest: 2, Where: "clis.hcl:3"}},
	}}}
	r := newCLIRig(t, o, "", false, nil, Config{KeepVersions: 1, Interval: -1, Pins: pins})
	r.readAll("terraform", "1.5.7", "1.6.0", "1.7.0")
	r.readAll("tofu", "1.8.0")
	done, err := r.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cliRemovals(done), []string{"cli " + tfAddr + " 1.5.7 keep-versions"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v (1.6.0 and 1.7.0 are the newest 2 pinned)", got, want)
	}
	var pinned []string
	for _, p := range r.ret.Status().Pinned {
		pinned = append(pinned, p.Kind+" "+p.Version)
	}
	if want := []string{"cli 1.6.0", "cli 1.7.0"}; !reflect.DeepEqual(pinned, want) {
		t.Errorf("pinned %v, want %v", pinned, want)
	}
}

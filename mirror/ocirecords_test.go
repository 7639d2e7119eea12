package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/ocistore"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// ociDigests returns the digests version v's index hands out: the
// index's, its manifests', and its archives'.
func ociDigests(t *testing.T, o *OCI, p addrs.Provider, v versions.Version) (index digest.Digest, manifests, blobs []digest.Digest) {
	t.Helper()
	doc, err := o.Index(t.Context(), p, v)
	if err != nil {
		t.Fatal(err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(doc.Bytes, &idx); err != nil {
		t.Fatal(err)
	}
	for _, m := range idx.Manifests {
		manifests = append(manifests, m.Digest)
		md, err := o.Manifest(t.Context(), p, m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		var man ocispec.Manifest
		if err := json.Unmarshal(md.Bytes, &man); err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, man.Layers[0].Digest)
	}
	return doc.Digest, manifests, blobs
}

// When retention removes a provider version, its OCI records go with its
// package record: no document or archive digest of it resolves, and
// nothing of it stays in the cache; a version kept keeps resolving; the
// version fetched again hands out, and resolves, the same digests.
func TestRemoveVersionRemovesOCIRecords(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64 // what the engine's clock adds, in nanoseconds
	h := newHarness(t, harnessOptions{cfg: Config{Now: func() time.Time { return time.Now().Add(time.Duration(clock.Load())) }}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	o := mustOCI(t, h.engine)
	p := h.provider()
	v1, v2 := versions.MustParseVersion("1.0.0"), versions.MustParseVersion("2.0.0")
	idx1, man1, blobs1 := ociDigests(t, o, p, v1)
	idx2, man2, blobs2 := ociDigests(t, o, p, v2)

	if err := h.engine.Inventory().RemoveVersion("provider", p.String(), "1.0.0"); err != nil {
		t.Fatal(err)
	}
	for _, d := range append([]digest.Digest{idx1}, man1...) {
		if _, err := o.Manifest(t.Context(), p, d); !errors.Is(err, ocistore.ErrDigestUnknown) {
			t.Errorf("manifest %s of the removed version: %v, want ErrDigestUnknown", d, err)
		}
	}
	for _, d := range blobs1 {
		if _, err := o.Resolve(t.Context(), p, d); !errors.Is(err, ocistore.ErrDigestUnknown) {
			t.Errorf("blob %s of the removed version: %v, want ErrDigestUnknown", d, err)
		}
	}
	// Nothing of 1.0.0 stays in the cache: the records go, not only
	// their answers.
	var left []string
	if err := h.store.ScanMeta("oci/", func(key string, _ time.Time, raw json.RawMessage) error {
		if strings.HasSuffix(key, "/1.0.0") || strings.Contains(string(raw), `"1.0.0"`) {
			left = append(left, key)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("OCI records of the removed version left in the cache: %q", left)
	}
	// The version kept resolves by digest alone.
	for _, d := range append([]digest.Digest{idx2}, man2...) {
		if _, err := o.Manifest(t.Context(), p, d); err != nil {
			t.Errorf("manifest %s of the version kept: %v", d, err)
		}
	}
	for _, d := range blobs2 {
		if _, err := o.Resolve(t.Context(), p, d); err != nil {
			t.Errorf("blob %s of the version kept: %v", d, err)
		}
	}
	// Fetched again (once the version list, which no longer lists it,
	// is out of date), the removed version hands out the same digests,
	// and they resolve again.
	clock.Store(int64(time.Hour))
	again, _, _ := ociDigests(t, o, p, v1)
	if again != idx1 {
		t.Fatalf("index fetched again %s, want %s", again, idx1)
	}
	for _, d := range append([]digest.Digest{idx1}, man1...) {
		if _, err := o.Manifest(t.Context(), p, d); err != nil {
			t.Errorf("manifest %s of the version fetched again: %v", d, err)
		}
	}
	for _, d := range blobs1 {
		if _, err := o.Resolve(t.Context(), p, d); err != nil {
			t.Errorf("blob %s of the version fetched again: %v", d, err)
		}
	}
}

// getMetas is how many records replica r asked the bucket for.
func (r *replica) getMetas() int {
	return r.counts.get("get_meta/ok") + r.counts.get("get_meta/absent") + r.counts.get("get_meta/error")
}

// A provider's index and platform manifest digests that replica A handed
// out resolve on replica B, sharing the bucket, by digest alone: no tag
// asked of B first. B builds each document again from the version's
// package record and answers A's bytes; its archives resolve too. An
// entry forged in the bucket, naming a digest the version's record does
// not bear out, does not resolve; and a digest the bucket does not know
// costs B one bucket lookup.
func TestSharedOCIDigestsResolveOnAnotherReplica(t *testing.T) {
	_, rs := newReplicas(t, 2, nil)
	a, b := rs[0], rs[1]
	p := a.provider()
	v := mustVersion(t, "1.0.0")
	oa := mustOCI(t, a.engine)
	ob := mustOCI(t, b.engine)
	index, manifests, blobs := ociDigests(t, oa, p, v)
	a.waitIdle() // the records are put in the bucket in the background

	// The manifests first, each alone, then the index.
	for _, d := range append(manifests, index) {
		want, err := oa.Manifest(t.Context(), p, d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ob.Manifest(t.Context(), p, d)
		if err != nil {
			t.Fatalf("replica B, manifest %s by digest alone: %v", d, err)
		}
		if got.Digest != d || !bytes.Equal(got.Bytes, want.Bytes) || got.MediaType != want.MediaType {
			t.Fatalf("replica B answered %s (%s) for %s, not replica A's document", got.Digest, got.MediaType, d)
		}
	}
	for _, d := range blobs {
		arc, err := ob.Blob(t.Context(), p, d)
		if err != nil {
			t.Fatalf("replica B, blob %s by digest alone: %v", d, err)
		}
		body, err := io.ReadAll(arc)
		arc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if digest.FromBytes(body) != d {
			t.Fatalf("replica B's blob %s: %d bytes of digest %s", d, len(body), digest.FromBytes(body))
		}
	}
	// The tag on B answers the same index.
	if got, err := ob.Index(t.Context(), p, v); err != nil || got.Digest != index {
		t.Fatalf("replica B's index by tag: %v %v, want %s", got.Digest, err, index)
	}

	// Forged entries: a digest of nothing, said to be 1.0.0's
	// linux_amd64 manifest; another, said to be its linux_amd64 archive;
	// a version the origin does not have.
	forged := digest.FromString("not a manifest of 1.0.0")
	forgedBlob := digest.FromString("not an archive of 1.0.0")
	other := digest.FromString("no such version")
	for key, entry := range map[string]any{
		"oci/digest/" + p.String() + "/" + forged.String():     map[string]any{"version": "1.0.0", "platforms": []string{"linux_amd64"}},
		"oci/digest/" + p.String() + "/" + forgedBlob.String(): map[string]any{"version": "1.0.0", "platform": "linux_amd64"},
		"oci/digest/" + p.String() + "/" + other.String():      map[string]any{"version": "9.9.9", "platforms": []string{"linux_amd64"}},
	} {
		if err := a.shared.PutMeta(t.Context(), key, entry); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ob.Manifest(t.Context(), p, forged); !errors.Is(err, ocistore.ErrDigestUnknown) {
		t.Errorf("a forged manifest entry: %v, want ErrDigestUnknown", err)
	}
	if arc, err := ob.Blob(t.Context(), p, forgedBlob); !errors.Is(err, ocistore.ErrDigestUnknown) {
		if err == nil {
			arc.Close()
		}
		t.Errorf("a forged archive entry: %v, want ErrDigestUnknown", err)
	}
	if _, err := ob.Manifest(t.Context(), p, other); err == nil {
		t.Errorf("an entry naming a version the origin lacks resolved")
	}

	before := b.getMetas()
	if _, err := ob.Manifest(t.Context(), p, digest.FromString("unknown")); !errors.Is(err, ocistore.ErrDigestUnknown) {
		t.Errorf("an unknown digest: %v, want ErrDigestUnknown", err)
	}
	if n := b.getMetas() - before; n != 1 {
		t.Errorf("an unknown digest cost %d bucket lookups, want 1", n)
	}
}

// The OCI records of a version's index are written whole: a write that
// fails part way (a full disk, a crash between two records) leaves
// every digest the index hands out resolving or none of them, never an
// index whose manifests or archives are unknown, on this side or on one
// started afresh; and once the disk has room again, the next index
// keeps them all.
func TestOCIRecordsWrittenWhole(t *testing.T) {
	t.Parallel()
	var writes, failFrom atomic.Int64 // failFrom: the first write that fails (0: none)
	h := newHarness(t, harnessOptions{store: cache.Options{FailWrites: func() error {
		if n, f := writes.Add(1), failFrom.Load(); f > 0 && n >= f {
			return errors.New("write /data/cache/000001.vlog: no space left on device")
		}
		return nil
	}}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	p, v := h.provider(), versions.MustParseVersion("1.0.0")
	index, manifests, blobs := ociDigests(t, mustOCI(t, h.engine), p, v)
	docs := append([]digest.Digest{index}, manifests...)
	resolving := func(o *OCI) (n int) {
		for _, d := range docs {
			if _, err := o.Manifest(t.Context(), p, d); err == nil {
				n++
			} else if !errors.Is(err, ocistore.ErrDigestUnknown) {
				t.Fatalf("manifest %s: %v", d, err)
			}
		}
		for _, d := range blobs {
			if _, err := o.Resolve(t.Context(), p, d); err == nil {
				n++
			} else if !errors.Is(err, ocistore.ErrDigestUnknown) {
				t.Fatalf("blob %s: %v", d, err)
			}
		}
		return n
	}
	all := len(docs) + len(blobs)
	// Each write of the index's records failing in turn, from the
	// first on, its OCI records gone from the cache before.
	for k := int64(1); k <= int64(all)+2; k++ {
		if err := h.store.ScanMeta("oci/", func(key string, _ time.Time, _ json.RawMessage) error {
			return h.store.DeleteMeta(key)
		}); err != nil {
			t.Fatal(err)
		}
		side := mustOCI(t, h.engine)
		writes.Store(0)
		failFrom.Store(k)
		_, err := side.Index(t.Context(), p, v)
		failFrom.Store(0)
		for name, o := range map[string]*OCI{"the side that wrote": side, "a side started afresh": mustOCI(t, h.engine)} {
			switch n := resolving(o); {
			case n != 0 && n != all:
				t.Errorf("write %d failing: %d of %d digests resolve on %s", k, n, all, name)
			case err == nil && n != all:
				t.Errorf("write %d failing: the index was answered, but %d of %d digests resolve on %s", k, n, all, name)
			}
		}
		if _, err := side.Index(t.Context(), p, v); err != nil {
			t.Fatalf("the index with room on the disk again: %v", err)
		}
		if n := resolving(mustOCI(t, h.engine)); n != all {
			t.Errorf("write %d failed, then the index again: %d of %d digests resolve", k, n, all)
		}
	}
}

// sizeGate is an origin whose archive size requests each wait until want
// of them are under way at once, counting them.
type sizeGate struct {
	Origin
	want  int32
	asked atomic.Int32
	all   chan struct{} // closed once want are under way
}

func (g *sizeGate) ArchiveSize(ctx context.Context, p addrs.Provider, rawURL string) (int64, error) {
	if g.asked.Add(1) == g.want {
		close(g.all)
	}
	select {
	case <-g.all:
	case <-time.After(10 * time.Second):
		return 0, errors.New("the other archives' sizes were not asked meanwhile")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return g.Origin.ArchiveSize(ctx, p, rawURL)
}

// The first index of a version asks the origin for its archives' sizes
// all at once, not one after the other; and however many callers ask
// for the index at the same time, each archive's size is asked once.
func TestOCIArchiveSizesAskedAtOnce(t *testing.T) {
	t.Parallel()
	platforms := []string{"linux_amd64", "darwin_arm64", "windows_amd64"}
	gate := &sizeGate{want: int32(len(platforms)), all: make(chan struct{})}
	h := newHarness(t, harnessOptions{wrapOrigin: func(o Origin) Origin { gate.Origin = o; return gate }})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	o := mustOCI(t, h.engine)
	p, v := h.provider(), versions.MustParseVersion("1.0.0")
	const callers = 4
	got := make(chan digest.Digest, callers)
	errs := make(chan error, callers)
	for range callers {
		go func() {
			doc, err := o.Index(t.Context(), p, v)
			got <- doc.Digest
			errs <- err
		}()
	}
	var first digest.Digest
	for i := range callers {
		if err := <-errs; err != nil {
			t.Fatalf("index: %v", err)
		}
		if d := <-got; i == 0 {
			first = d
		} else if d != first {
			t.Errorf("index %s, then %s", first, d)
		}
	}
	if n := gate.asked.Load(); n != int32(len(platforms)) {
		t.Errorf("%d archive size requests for %d archives, want one each", n, len(platforms))
	}
}

// lyingSizer is an origin whose archive size answers for the providers
// of one host (a hostile origin's) state a size its archives do not have.
type lyingSizer struct {
	Origin
	host string
}

func (l *lyingSizer) ArchiveSize(ctx context.Context, p addrs.Provider, rawURL string) (int64, error) {
	n, err := l.Origin.ArchiveSize(ctx, p, rawURL)
	if err == nil && p.Hostname.String() == l.host {
		n += 100
	}
	return n, err
}

// An archive's size one origin states is that origin's word on its own
// archives only: a hostile origin that states a wrong size for an archive
// another origin serves too (the same bytes, so the same sha256) leaves
// the other origin's documents as that origin states them, where the
// size it stated first stood for every origin's archive of that digest.
func TestOCIArchiveSizeLearnedPerOrigin(t *testing.T) {
	t.Parallel()
	const hostile = "registry.opentofu.org" // allowed by the origin client as registry.terraform.io is
	h := newHarness(t, harnessOptions{
		origin:     fakeorigin.Options{Hostnames: []string{originHost, hostile}},
		cfg:        Config{AllowedOrigins: []string{originHost, hostile}},
		wrapOrigin: func(o Origin) Origin { return &lyingSizer{Origin: o, host: hostile} },
	})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	o := mustOCI(t, h.engine)
	v := versions.MustParseVersion("1.0.0")
	layerSize := func(p addrs.Provider) int64 {
		t.Helper()
		doc, err := o.Index(t.Context(), p, v)
		if err != nil {
			t.Fatalf("index of %s: %v", p, err)
		}
		var index ocispec.Index
		if err := json.Unmarshal(doc.Bytes, &index); err != nil || len(index.Manifests) != 1 {
			t.Fatalf("index of %s: %s", p, doc.Bytes)
		}
		m, _, err := o.docs.Manifest(t.Context(), p, index.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		l, ok := oci.ProviderTargetLayer(m)
		if !ok {
			t.Fatalf("manifest of %s: %s", p, m.Bytes)
		}
		return l.Size
	}
	want := int64(len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")))
	if n := layerSize(addrs.Provider{Hostname: hostile, Namespace: ns, Type: typ}); n != want+100 {
		t.Fatalf("the hostile origin's own index states %d bytes, want the %d it stated", n, want+100)
	}
	if n := layerSize(h.provider()); n != want {
		t.Errorf("%s's index states %d bytes for its archive of %d, the size another origin stated for the same digest", h.provider(), n, want)
	}
}

// An archive whose size the origin fails to tell (its first byte answered
// 404 or 503) costs the origin a bounded number of requests however many
// times the index is asked for: the failure is remembered for a while, as
// a not-found is (a 404 for not_found_ttl; a 5xx opens the origin's
// circuit breaker), and not asked again on every index request.
func TestOCIArchiveSizeFailureRemembered(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusNotFound, http.StatusServiceUnavailable} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			platforms := []string{"linux_amd64", "darwin_arm64", "windows_amd64"}
			h := newHarness(t, harnessOptions{cfg: Config{NotFoundTTL: time.Minute}})
			h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
			o := mustOCI(t, h.engine)
			p, v := h.provider(), versions.MustParseVersion("1.0.0")
			h.origin.SetKindStatus(fakeorigin.ArchiveSize, status)
			if _, err := o.Index(t.Context(), p, v); err == nil {
				t.Fatal("the index was answered with no archive's size known")
			}
			// The index fails at the first size refused; the other sizes'
			// asks, coalesced work, end on their own.
			h.waitIdle()
			first := h.origin.TotalHits()
			const requests = 10
			for range requests {
				if _, err := o.Index(t.Context(), p, v); err == nil {
					t.Fatal("the index was answered with no archive's size known")
				}
			}
			h.waitIdle()
			if n := h.origin.TotalHits() - first; n != 0 {
				t.Errorf("%d more index requests made %d more origin requests (sizes %d, download answers %d in all), want none", requests, n,
					h.origin.Hits(fakeorigin.ArchiveSize), h.origin.Hits(fakeorigin.Download))
			}
		})
	}
}

// mustOCI is e's OCI side, the test failed when it cannot be made.
func mustOCI(t *testing.T, e *Engine) *OCI {
	t.Helper()
	o, err := e.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

package mirror

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/internal/enginetest"
	"github.com/tfmirror/tfmirror/mirror/ocistore"
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
	o, err := h.engine.NewOCI(enginetest.OriginClient(t, h.origin))
	if err != nil {
		t.Fatal(err)
	}
	p := h.provider()
	v1, v2 := versions.MustParseVersion("1.0.0"), versions.MustParseVersion("2.0.0")
	idx1, man1, blobs1 := ociDigests(t, o, p, v1)
	idx2, man2, blobs2 := ociDigests(t, o, p, v2)

	if err := h.engine.Held().RemoveVersion("provider", p.String(), "1.0.0"); err != nil {
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

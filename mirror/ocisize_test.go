package mirror

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/mirror/ocistore"
)

// dropCounter counts the versions whose OCI documents were dropped for a
// wrong size.
type dropCounter struct {
	noMetrics
	n atomic.Int64
}

func (m *dropCounter) OCIWrongSizeDropped() { m.n.Add(1) }

// Documents made with an archive size the origin stated wrongly are
// dropped on every OCI side of the engine once the archive is fetched,
// for any door, and verified: what either side made of the old index
// holds no longer, the next index either answers bears the sizes out and
// is made again from the verified size, the wrong manifest resolves on
// neither, and the manifest of the platform whose size was right keeps
// its digest. The version is counted once, however often its archive is
// read after.
func TestWrongSizeDroppedOnEverySide(t *testing.T) {
	t.Parallel()
	met := &dropCounter{}
	h := newHarness(t, harnessOptions{cfg: Config{Metrics: met}, origin: fakeorigin.Options{PackageHashes: true}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	size := int64(len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")))
	h.origin.SetStatedSize(ns, typ, "1.0.0", "linux_amd64", size+3)
	o1 := mustOCI(t, h.engine)
	o2 := mustOCI(t, h.engine)
	p, v := h.provider(), versions.MustParseVersion("1.0.0")
	idx, man := indexDigests(t, o1, p, v)
	_, holds1, err := o1.IndexAnswer(t.Context(), p, v)
	if err != nil {
		t.Fatal(err)
	}
	_, holds2, err := o2.IndexAnswer(t.Context(), p, v)
	if err != nil {
		t.Fatal(err)
	}
	if holds1 == nil || holds2 == nil || !holds1() || !holds2() {
		t.Fatal("the indexes do not hold before the archive is fetched")
	}

	for range 2 {
		if a := h.read(t.Context(), "1.0.0", "linux_amd64"); a.err != nil {
			t.Fatal(a.err)
		}
		h.waitIdle()
	}
	if holds1() || holds2() {
		t.Error("an index made with the wrong size still holds")
	}
	for i, o := range []*OCI{o1, o2} {
		again, manAgain, _ := ociDigests(t, o, p, v)
		if again == idx {
			t.Errorf("side %d: the index kept its digest", i)
		}
		kept := 0
		for _, d := range man {
			if slices.Contains(manAgain, d) {
				kept++
			} else if _, err := o.Manifest(t.Context(), p, d); !errors.Is(err, ocistore.ErrDigestUnknown) {
				t.Errorf("side %d: the wrong manifest %s: %v, want ErrDigestUnknown", i, d, err)
			}
		}
		if kept != 1 {
			t.Errorf("side %d: %d of the manifests kept their digests, want the right platform's", i, kept)
		}
	}
	if n := met.n.Load(); n != 1 {
		t.Errorf("%d versions dropped, want 1", n)
	}
}

// indexDigests returns the digests of the index of version v of p and of
// the manifests it names, asking for the index alone (a manifest asked
// for waits for its archive: OCI.bearOut).
func indexDigests(t *testing.T, o *OCI, p addrs.Provider, v versions.Version) (index digest.Digest, manifests []digest.Digest) {
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
	}
	return doc.Digest, manifests
}

// A platform's manifest is answered once its archive is verified: the
// index downloads no archive, a manifest its own platform's only, once
// however many ask. A manifest made with a size the origin stated
// wrongly is withdrawn before it is answered: a *ocistore.WrongSizeError
// (failure.ErrDigestGone) with both sizes, the version's documents
// dropped (counted once), and the next index, made at once from the
// verified size, names a manifest that is answered.
func TestManifestWaitsForItsArchive(t *testing.T) {
	t.Parallel()
	met := &dropCounter{}
	h := newHarness(t, harnessOptions{cfg: Config{Metrics: met}, origin: fakeorigin.Options{PackageHashes: true}})
	platforms := []string{"linux_amd64", "darwin_arm64"}
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	size := int64(len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")))
	h.origin.SetStatedSize(ns, typ, "1.0.0", "linux_amd64", size+3)
	o := mustOCI(t, h.engine)
	p, v := h.provider(), versions.MustParseVersion("1.0.0")
	idx, man := indexDigests(t, o, p, v)
	if n := h.origin.Hits(fakeorigin.Archive); n != 0 {
		t.Fatalf("the index downloaded %d archives", n)
	}
	byPlatform := map[string]digest.Digest{}
	doc, err := o.Index(t.Context(), p, v)
	if err != nil {
		t.Fatal(err)
	}
	var index ocispec.Index
	if err := json.Unmarshal(doc.Bytes, &index); err != nil {
		t.Fatal(err)
	}
	for _, m := range index.Manifests {
		byPlatform[m.Platform.OS+"_"+m.Platform.Architecture] = m.Digest
	}
	if len(byPlatform) != 2 || len(man) != 2 {
		t.Fatalf("index %s names %v", idx, byPlatform)
	}

	// The platform whose size was right: answered, its archive alone
	// downloaded, once for two callers.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = o.Manifest(t.Context(), p, byPlatform["darwin_arm64"])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if d, l := h.origin.ArchiveHits(ns, typ, "1.0.0", "darwin_arm64"), h.origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); d != 1 || l != 0 {
		t.Errorf("archives downloaded for darwin_arm64's manifest: darwin_arm64 %d, linux_amd64 %d; want 1 and 0", d, l)
	}

	_, err = o.Manifest(t.Context(), p, byPlatform["linux_amd64"])
	var wrong *ocistore.WrongSizeError
	if !errors.As(err, &wrong) || !errors.Is(err, failure.ErrDigestGone) || wrong.Stated != size+3 || wrong.Verified != size || wrong.Manifest != byPlatform["linux_amd64"] {
		t.Fatalf("the manifest made with the stated size: %v", err)
	}
	if n := met.n.Load(); n != 1 {
		t.Errorf("%d versions dropped, want 1", n)
	}
	again, _, blobs := ociDigests(t, o, p, v)
	if again == idx {
		t.Error("the index kept its digest")
	}
	if len(blobs) != 2 || h.origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64") != 1 || h.origin.ArchiveHits(ns, typ, "1.0.0", "darwin_arm64") != 1 {
		t.Errorf("after the repair: blobs %v, archives downloaded again", blobs)
	}
	if n := met.n.Load(); n != 1 {
		t.Errorf("%d versions dropped, want 1", n)
	}
}

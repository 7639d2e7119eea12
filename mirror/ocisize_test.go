package mirror

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
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
	o1, err := h.engine.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	o2, err := h.engine.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	p, v := h.provider(), versions.MustParseVersion("1.0.0")
	idx, man, _ := ociDigests(t, o1, p, v)
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

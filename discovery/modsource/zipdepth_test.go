package modsource

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// linkLadder is a package of n directories d0 ... d(n-1), each holding
// a link to the next (dI/next -> ../dI+1), the last a file: 2n entries,
// none nested more than two deep, every link inside it.
func linkLadder(n int) []byte {
	var entries []fakeorigin.TarEntry
	for i := range n - 1 {
		entries = append(entries,
			fakeorigin.TarEntry{Name: fmt.Sprintf("d%d/", i), Type: tar.TypeDir},
			fakeorigin.TarEntry{Name: fmt.Sprintf("d%d/next", i), Type: tar.TypeSymlink, Target: fmt.Sprintf("../d%d", i+1)})
	}
	entries = append(entries, fakeorigin.TarEntry{Name: fmt.Sprintf("d%d/main.tf", n-1), Body: "# bottom\n"})
	return fakeorigin.TarGzEntries(entries)
}

// TestWriteZipBoundsNesting: a package whose links to directories lead
// from one to the next (each copied into the one before, in the zip) is
// refused once a copy would nest a name deeper than safetree.MaxDepth, as
// a package's own names may not be. Before, a ladder of 5,000 links
// (10,000 entries, within the 20,000 allowed by default) made the copying
// hold memory with the square of the depth (the heap grew by 455 MiB),
// for a zip with names thousands of directories deep, which no client
// can unpack. A ladder within the depth is copied.
func TestWriteZipBoundsNesting(t *testing.T) {
	limits := Limits{MaxDownloadBytes: 16 << 20, MaxTreeBytes: 16 << 20, MaxEntries: 20000}
	ok := linkLadder(safetree.MaxDepth / 2)
	var out bytes.Buffer
	if _, err := WriteZip(context.Background(), bytes.NewReader(ok), &out, t.TempDir(), limits); err != nil {
		t.Fatalf("a ladder %d deep: %v", safetree.MaxDepth/2, err)
	}
	deep := linkLadder(3000)
	var err error
	growth := heapGrowth(func() {
		_, err = WriteZip(context.Background(), bytes.NewReader(deep), io.Discard, t.TempDir(), limits)
	})
	t.Logf("heap grew by %d MiB", growth>>20)
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "deep") {
		t.Errorf("a ladder 3,000 deep: %v, want a LimitError about the depth", err)
	}
	if growth > 64<<20 {
		t.Errorf("the heap grew by %d MiB", growth>>20)
	}
}

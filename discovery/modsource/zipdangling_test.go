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
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// danglingFan is a package of a directory d holding n links to nothing
// (d/xI -> missingI) and n links to d (lI -> d): 2n+1 entries.
func danglingFan(n int) []byte {
	entries := []fakeorigin.TarEntry{{Name: "d/", Type: tar.TypeDir}}
	for i := range n {
		entries = append(entries,
			fakeorigin.TarEntry{Name: fmt.Sprintf("d/x%d", i), Type: tar.TypeSymlink, Target: fmt.Sprintf("missing%d", i)},
			fakeorigin.TarEntry{Name: fmt.Sprintf("l%d", i), Type: tar.TypeSymlink, Target: "d"})
	}
	return fakeorigin.TarGzEntries(entries)
}

// TestWriteZipCountsLinksLeftOut: every link the zip's walk resolves
// costs an entry of the budget, those left out of the zip (their target
// does not exist) too, as the package's own links did. Before, a package
// of a directory of n links to nothing and n links to that directory
// (2n+1 entries) had the walk resolve n*n links at no cost: 3,000 of
// each, 6,001 entries within the 20,000 allowed by default, took minutes
// of CPU for a zip of 3,001 directories.
func TestWriteZipCountsLinksLeftOut(t *testing.T) {
	limits := Limits{MaxDownloadBytes: 16 << 20, MaxTreeBytes: 16 << 20, MaxEntries: 2000}
	var out bytes.Buffer
	if _, err := WriteZip(context.Background(), bytes.NewReader(danglingFan(3)), &out, t.TempDir(), limits); err != nil {
		t.Fatalf("a fan of 3: %v", err)
	}
	start := time.Now()
	_, err := WriteZip(context.Background(), bytes.NewReader(danglingFan(900)), io.Discard, t.TempDir(), limits)
	t.Logf("a fan of 900 (1,801 entries): %v in %v", err, time.Since(start))
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "2000") {
		t.Errorf("a fan of 900: %v, want a LimitError naming the 2000 entries allowed", err)
	}
}

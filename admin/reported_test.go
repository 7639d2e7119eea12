package admin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportReportListedWithinBound: an import of a directory whose
// entries each make a line of its report (here 1,200 zips of a provider
// not named as its packages) answers the first maxListedFailures lines
// and one saying how many more there were, not a line per entry of a
// stranger's directory however many it holds.
func TestImportReportListedWithinBound(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	a := h.newAPI(t, nil, nil, Options{})
	in := t.TempDir()
	dir := filepath.Join(in, "registry.example", "acme", "net")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 1200
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("stray-%04d.zip", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, _ := a.Import(context.Background(), ImportRequest{In: in, AllowUnsigned: true})
	if len(res.Failures) != maxListedFailures+1 {
		t.Fatalf("%d lines answered, want %d and one saying how many more", len(res.Failures), maxListedFailures)
	}
	if last := res.Failures[maxListedFailures]; !strings.Contains(last, fmt.Sprintf("%d more not listed", n-maxListedFailures)) {
		t.Errorf("the last line %q does not say %d more", last, n-maxListedFailures)
	}
	if first := res.Failures[0]; !strings.Contains(first, "not named as a package") {
		t.Errorf("the first line %q is not an entry's", first)
	}
}

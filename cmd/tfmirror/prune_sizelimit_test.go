package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A prune on a data directory whose configuration file lowered
// cache_max_bytes below what is cached lists, as it lists what the rules
// remove, the versions whose packages the size limit evicted: the
// listing and its total say what went.
func TestCachePruneListsSizeLimitEvictions(t *testing.T) {
	dataDir := syncedDataDir(t)
	conf := filepath.Join(t.TempDir(), "tfmirror.hcl")
	if err := os.WriteFile(conf, []byte("cache_max_bytes = \"1KiB\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code := pruneInProcess(t, dataDir, "--config", conf)
	if code != 0 {
		t.Fatalf("prune: exit %d", code)
	}
	after, _, code := verifyInProcess(t, dataDir)
	if code != 0 {
		t.Fatalf("cache verify: exit %d", code)
	}
	var left int
	if _, err := fmt.Sscanf(after, "checked %d packages", &left); err != nil || left >= 9 {
		t.Fatalf("cache verify after the prune: %q (%v), want fewer than the 9 packages synced", after, err)
	}
	line := regexp.MustCompile(`(?m)^size-limit +provider +` + regexp.QuoteMeta(tfRegistry) + `/(hashicorp/random|acme/widget) +\d+\.\d+\.\d+ +(\d) archives +`)
	lines := line.FindAllStringSubmatch(out, -1)
	listed := 0
	for _, m := range lines {
		n, _ := strconv.Atoi(m[2])
		listed += n
	}
	if listed != 9-left {
		t.Errorf("the prune lists %d archives evicted by the size limit, and %d went:\n%s", listed, 9-left, out)
	}
	if total := fmt.Sprintf("removed the packages of %d versions", len(lines)); !strings.Contains(out, total) {
		t.Errorf("the prune's total is not %q:\n%s", total, out)
	}
}

// A dry run on such a data directory lists the versions whose packages
// the size limit would evict, as the prune then evicts them, and evicts
// nothing itself.
func TestCachePruneDryRunListsSizeLimitEvictions(t *testing.T) {
	dataDir := syncedDataDir(t)
	conf := filepath.Join(t.TempDir(), "tfmirror.hcl")
	if err := os.WriteFile(conf, []byte("cache_max_bytes = \"1KiB\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dry, _, code := pruneInProcess(t, dataDir, "--config", conf, "--dry-run")
	if code != 0 {
		t.Fatalf("prune --dry-run: exit %d", code)
	}
	if after, _, _ := verifyInProcess(t, dataDir); !strings.HasPrefix(after, "checked 9 packages") {
		t.Fatalf("cache verify after the dry run: %q, want the 9 packages synced", after)
	}
	out, _, code := pruneInProcess(t, dataDir, "--config", conf)
	if code != 0 {
		t.Fatalf("prune: exit %d", code)
	}
	line := regexp.MustCompile(`(?m)^size-limit +provider .*$`)
	want, got := line.FindAllString(out, -1), line.FindAllString(dry, -1)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("the dry run lists as evicted by the size limit:\n%s\nthe prune then evicted:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	total := regexp.MustCompile(`the packages of (\d+) versions`)
	if d, p := total.FindStringSubmatch(dry), total.FindStringSubmatch(out); d == nil || p == nil || d[1] != p[1] {
		t.Errorf("totals: dry run %q, prune %q", d, p)
	}
}

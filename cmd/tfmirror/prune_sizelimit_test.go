package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

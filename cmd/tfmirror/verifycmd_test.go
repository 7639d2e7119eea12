package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
)

func verifyInProcess(t *testing.T, dataDir string) (string, string, int) {
	t.Helper()
	return cacheInProcess(t, "verify", runVerify, dataDir)
}

// cache verify on a data directory: every synced package checks out
// against its stored evidence, and after one byte of one archive changes
// on disk, that archive alone is named and the exit status is 1; nothing
// is removed: the archive the check found damaged is reported again by
// the next check (by its mark, not read again).
func TestCacheVerify(t *testing.T) {
	origin := syncOrigin(t)
	dataDir := t.TempDir()
	if _, _, code := syncInProcess(t, origin, dataDir, syncManifest(t, tfRegistry, "")); code != 0 {
		t.Fatalf("sync exit %d", code)
	}
	summary := regexp.MustCompile(`checked (\d+) packages, .* \((\d+) against stored evidence, (\d+) against their sha256\): (\d+) failed`)
	out, _, code := verifyInProcess(t, dataDir)
	m := summary.FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] == "0" || m[1] != m[2] || m[3] != "0" || m[4] != "0" {
		t.Fatalf("intact: exit %d, %q", code, out)
	}
	checked := m[1]

	sha := origin.SHA256("hashicorp", "random", "3.5.0", "linux_amd64")
	store, err := cache.Open(cache.Options{Dir: filepath.Join(dataDir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	err = cachetest.FlipBlobByte(store, sha, 10)
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, code := verifyInProcess(t, dataDir)
	m = summary.FindStringSubmatch(out)
	if code != 1 || m == nil || m[1] != checked || m[4] != "1" {
		t.Fatalf("one damaged archive: exit %d, %q", code, out)
	}
	want := "FAILED provider " + tfRegistry + "/hashicorp/random 3.5.0 linux_amd64 (sha256 " + sha + "): "
	if strings.Count(stderr, "FAILED ") != 1 || !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want one line %q", stderr, want)
	}
	// Nothing removed: the next check finds the same.
	out, stderr, code = verifyInProcess(t, dataDir)
	if m := summary.FindStringSubmatch(out); code != 1 || m == nil || m[1] != checked || m[4] != "1" || !strings.Contains(stderr, want) {
		t.Errorf("after the check: exit %d, %q, %q", code, out, stderr)
	}
}

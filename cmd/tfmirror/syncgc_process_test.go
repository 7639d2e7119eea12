package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestSyncAloneReturnsEvictedSpace: a sync with no serve running, on a
// data directory limited by --cache-max-bytes to less than what it
// syncs, evicts as it goes and gets the space of what it evicted back
// from the disk (the cache runs its value-log GC itself), so that every
// package is fetched and verified and stored, none refused at the data
// directory's disk budget.
func TestSyncAloneReturnsEvictedSpace(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: []string{tfRegistry}, ArchiveSize: 6 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	all := append([]string{"linux_arm64"}, syncPlatforms...)
	origin.AddProvider("hashicorp", "random", []string{"3.4.0", "3.5.0", "3.6.0", "4.0.0"}, all)
	origin.AddProvider("acme", "widget", []string{"0.1.0", "0.2.0", "1.0.0"}, all)
	dataDir := filepath.Join(t.TempDir(), "data")
	// 9 packages of 6 MiB (54 MiB) through a 16 MiB cache, whose data
	// directory's budget is 16 MiB and a quarter, plus the reserve. One
	// at a time: with three in flight (18 MiB) the size limit may evict
	// one just cached before sync sees it stored, which sync reports as
	// a limit too small for its --parallel, whatever the disk.
	stdout, stderr, code := syncProcess(t, bin, dataDir, origin, originCAFile(t, origin),
		"--cache-max-bytes", "16MiB", "--parallel", "1", syncManifest(t, origin.Addr, ""))
	if code != 0 || !strings.Contains(stdout, "9 provider packages fetched") {
		t.Fatalf("sync exited %d, want 0 and 9 provider packages fetched:\n%s\n%s", code, stdout, stderr)
	}
	if strings.Contains(stderr, "disk budget") {
		t.Errorf("sync ran into the data directory's disk budget:\n%s", stderr)
	}
}

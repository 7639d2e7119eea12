package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A cached archive that a read found damaged stays refused after the
// process is killed and started again: the first client after the
// restart is not sent the damaged copy (a transfer broken off part way)
// but the archive fetched again from the origin, whole; the restart logs
// that the store keeps archives marked damaged, and counts them in
// tfmirror_cache_damaged_archives until the copy is replaced.
func TestDamagedArchiveAfterKillAndRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const ns, typ, version = "hashicorp", "random", "1.0.0"
	platforms := []string{"linux_amd64", "darwin_arm64"}
	bin := buildBinary(t)
	origin, err := fakeorigin.Start(fakeorigin.Options{ArchiveSize: 3 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	origin.AddProvider(ns, typ, []string{version}, platforms)
	caFile := originCAFile(t, origin)
	dataDir := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// With a size limit the value-log files are 4 MiB: the first
	// archive's chunks are in a file that is not the last.
	start := func() *proc { return startProcess(t, bin, dataDir, origin, caFile, "--cache-max-bytes", "64MiB") }

	m := start()
	for i, pl := range platforms {
		if body, _, err := m.get(ctx, providerArchivePath(origin, ns, typ, version, pl)); err != nil || !bytes.Equal(body, origin.Archive(ns, typ, version, pl)) {
			t.Fatalf("%s: %v, %d bytes", pl, err, len(body))
		}
		waitCached(t, m, i+1)
	}
	stopProcess(t, m, syscall.SIGTERM)

	want := origin.Archive(ns, typ, version, platforms[0])
	target := want[1<<20+4096 : 1<<20+4160]
	logs, _ := filepath.Glob(filepath.Join(dataDir, "cache", "*.vlog"))
	flipped := false
	for _, name := range logs[:max(len(logs)-1, 0)] {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, target); i >= 0 {
			b[i+7] ^= 0x55
			if err := os.WriteFile(name, b, 0o600); err != nil {
				t.Fatal(err)
			}
			flipped = true
		}
	}
	if !flipped {
		t.Fatalf("the archive's second chunk is in none of the value-log files but the last (%d files)", len(logs))
	}

	path := providerArchivePath(origin, ns, typ, version, platforms[0])
	m = start()
	if body, _, err := m.get(ctx, path); err == nil {
		t.Fatalf("a damaged cached archive was sent whole (%d bytes, equal to the archive: %v)", len(body), bytes.Equal(body, want))
	}
	if m.waitLog("a cached archive is damaged where it is stored; it is not served, and is fetched again when it can be: check the disk, then run tfmirror cache verify and prune or re-import what it finds", 30*time.Second) == nil {
		t.Fatal("the damage was not logged")
	}
	// Counted as the disk's, not as an origin's failed verification
	// (whose alert sends the operator to the origin).
	if got := metricValue(t, m, "tfmirror_cache_damaged_reads_total"); got != 1 {
		t.Errorf("tfmirror_cache_damaged_reads_total: %v, want 1", got)
	}
	if got := metricValue(t, m, `tfmirror_verification_failures_total{reason="checksum_mismatch"}`); got != 0 {
		t.Errorf("tfmirror_verification_failures_total{reason=\"checksum_mismatch\"}: %v, want 0: the origin served nothing wrong", got)
	}
	stopProcess(t, m, syscall.SIGKILL)

	m = start()
	if got := metricValue(t, m, "tfmirror_cache_damaged_archives"); got != 1 {
		t.Errorf("tfmirror_cache_damaged_archives after the restart: %v, want 1", got)
	}
	wantDamagedOnPage(t, m, 1)
	hits := origin.ArchiveHits(ns, typ, version, platforms[0])
	body, resp, err := m.get(ctx, path)
	if err != nil || !bytes.Equal(body, want) {
		t.Fatalf("the first client after the restart: %v, %d bytes (equal to the archive: %v); want it fetched again, whole", err, len(body), bytes.Equal(body, want))
	}
	if m.waitLog("cached archives found damaged where they are stored are kept and not served: those that can be fetched again are replaced when asked for; run tfmirror cache verify to name them, and re-import or prune the others", 30*time.Second) == nil {
		t.Error("the restart did not log the archive kept marked damaged")
	}
	if got := resp.Header.Get("X-Tfmirror-Cache"); got != "miss" {
		t.Errorf("X-Tfmirror-Cache %q, want miss", got)
	}
	if n := origin.ArchiveHits(ns, typ, version, platforms[0]) - hits; n != 1 {
		t.Errorf("the origin was asked for the archive %d times, want once", n)
	}
	// The copy fetched again replaces the damaged one when its download
	// is stored, which may end after the client's last byte: the mark
	// goes with the damaged copy.
	for deadline := time.Now().Add(2 * time.Minute); metricValue(t, m, "tfmirror_cache_damaged_archives") != 0; {
		if time.Now().After(deadline) {
			t.Fatal("tfmirror_cache_damaged_archives is not 0 2 minutes after the copy was fetched again")
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitCached(t, m, len(platforms))
	if body, resp, err := m.get(ctx, path); err != nil || !bytes.Equal(body, want) || resp.Header.Get("X-Tfmirror-Cache") != "hit" {
		t.Fatalf("the archive fetched again is not served from the cache: %v, %d bytes", err, len(body))
	}
	wantDamagedOnPage(t, m, 0)
	stopProcess(t, m, syscall.SIGTERM)
}

// wantDamagedOnPage checks the count of archives found damaged on m's
// status page, as an operator reads it: health.damaged_archives in the
// JSON, and the Health block's line on what it means while it is not 0.
func wantDamagedOnPage(t *testing.T, m *proc, n int) {
	t.Helper()
	if got := m.status(t).Health.DamagedArchives; got == nil || *got != n {
		t.Errorf("status page health.damaged_archives %v, want %d", got, n)
	}
	body, _, err := m.get(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	line := `<li id="health-damaged"><span class="bad">1 archive found damaged where it is stored</span>`
	if has := bytes.Contains(body, []byte(line)); has != (n == 1) || (n == 0 && bytes.Contains(body, []byte(`id="health-damaged"`))) {
		t.Errorf("status page with %d archives damaged: the line on them shown %v:\n%s", n, has, body)
	}
	if n > 0 && !bytes.Contains(body, []byte("<code>tfmirror cache verify</code> names them")) {
		t.Error("the status page's line on damaged archives does not say what names them")
	}
}

// stopProcess signals m and waits for it to exit: cleanly after SIGTERM.
func stopProcess(t *testing.T, m *proc, sig syscall.Signal) {
	t.Helper()
	if err := m.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	err := m.wait(30 * time.Second)
	if sig == syscall.SIGTERM && err != nil {
		t.Fatalf("tfmirror exited with %v after SIGTERM", err)
	}
}

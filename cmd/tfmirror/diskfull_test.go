//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// mountSmallFS mounts a tmpfs of size bytes on a fresh directory and
// unmounts it when the test ends, or skips the test where mounting is not
// permitted (not root, no CAP_SYS_ADMIN).
func mountSmallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("needs a small file system: mounting a tmpfs on %s is not permitted here (%v); run as root to run this test", dir, err)
	}
	// Registered before the processes are started, so it runs after they
	// are killed.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// TestFullDiskDoesNotCrash fills a 64 MiB file system, with the default
// --disk-reserve, and checks that the process stays up, that clients get
// correct archives or clean failures, that /readyz says why it is not
// ready, and that a restart on the full file system serves.
//
// The file system is filled by one archive through the mirror, then by a
// file that leaves it just above the reserve and below the point where a
// cache that stopped writing writes again (disk.Space's resumeAt, an
// eighth above the reserve): the clients then ask for four times what it
// can take. Filled by the clients' archives alone, what is left once the
// writes that failed are removed depends on how far each got, and may be
// enough for the cache to write again, as it should.
func TestFullDiskDoesNotCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const (
		ns, typ, version = "hashicorp", "random", "1.0.0"
		archiveSize      = 16 << 20
		clientsPerFile   = 2
		reserve          = 10 << 20 // the default --disk-reserve
	)
	mnt := mountSmallFS(t, "64m")
	bin := buildBinary(t)
	origin, err := fakeorigin.Start(fakeorigin.Options{ArchiveSize: archiveSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	warm := "linux_amd64"
	others := []string{"darwin_arm64", "linux_arm64", "windows_amd64", "freebsd_amd64"}
	origin.AddProvider(ns, typ, []string{version}, append([]string{warm}, others...))
	caFile := originCAFile(t, origin)
	dataDir := filepath.Join(mnt, "data")
	ctx := context.Background()

	m := startProcess(t, bin, dataDir, origin, caFile)
	if body, _, err := m.get(ctx, providerArchivePath(origin, ns, typ, version, warm)); err != nil ||
		!bytes.Equal(body, origin.Archive(ns, typ, version, warm)) {
		t.Fatalf("first download: %v, %d bytes", err, len(body))
	}
	waitCached(t, m, 1)
	fillTo(t, mnt, reserve+reserve/16)
	waitFreeAtMost(t, m, reserve+reserve/16+1<<20)

	// 64 MiB more than the file system can take, all at once.
	type result struct {
		platform string
		body     []byte
		err      error
	}
	results := make(chan result, len(others)*clientsPerFile)
	var wg sync.WaitGroup
	for _, pl := range others {
		for range clientsPerFile {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body, _, err := m.get(ctx, providerArchivePath(origin, ns, typ, version, pl))
				results <- result{pl, body, err}
			}()
		}
	}
	wg.Wait()
	close(results)
	complete := 0
	for r := range results {
		switch {
		case r.err != nil:
			t.Logf("%s: clean failure: %v", r.platform, r.err)
		case !bytes.Equal(r.body, origin.Archive(ns, typ, version, r.platform)):
			t.Errorf("%s: a complete response with the wrong bytes (%d bytes)", r.platform, len(r.body))
		default:
			complete++
		}
	}
	if complete == 0 {
		t.Error("no client got its archive: the mirror should stream archives it cannot cache")
	}
	select {
	case <-m.exited:
		t.Fatalf("tfmirror died on the full file system: %v", m.err)
	default:
	}

	reason := notReady(t, m)
	if !strings.Contains(reason, "reserve") {
		t.Errorf("/readyz reason %q does not mention the reserve", reason)
	}
	// The status page says so too, from the same source.
	if raw, _, err := m.get(ctx, "/?format=json"); err != nil {
		t.Errorf("status page: %v", err)
	} else {
		var st proxy.Status
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Errorf("status JSON: %v", err)
		} else if h := st.Health; h.Cache != proxy.HealthCacheNotWritable || !strings.Contains(h.CacheError, "reserve") ||
			h.DiskFreeBytes == nil || h.DiskReserveBytes == nil {
			t.Errorf("status health %s, want the cache not writable below the reserve, with free space and reserve", raw)
		}
	}
	if n := m.count("cache not writable: free disk space below the reserve; archives are served but not cached until there is room"); n != 1 {
		t.Errorf("the cache logged going not writable %d times, want once", n)
	}
	// The archives served but not cached meanwhile are counted, and
	// logged at debug level only (the state is the WARN line above).
	if n := metricValue(t, m, "tfmirror_cache_write_errors_total"); n < 1 {
		t.Errorf("tfmirror_cache_write_errors_total = %v: no archive was counted as served but not cached", n)
	}
	if l := m.logged("archive served but not cached"); l != nil {
		t.Errorf("an archive served but not cached below the reserve was logged at %v, want debug only", l["level"])
	}

	// A restart on the full file system starts and serves, the cached
	// archive included.
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := m.wait(30 * time.Second); err != nil {
		t.Fatalf("tfmirror exited with %v after SIGTERM", err)
	}
	m2 := startProcess(t, bin, dataDir, origin, caFile)
	if m2.logged("disk full at start-up: cache opened read-only, serving what it holds until there is room") == nil {
		t.Error("restart did not report opening the cache read-only")
	}
	body, resp, err := m2.get(ctx, providerArchivePath(origin, ns, typ, version, warm))
	if err != nil || !bytes.Equal(body, origin.Archive(ns, typ, version, warm)) || resp.Header.Get("X-Tfmirror-Cache") != "hit" {
		t.Errorf("cached archive after restart on the full disk: %v", err)
	}
	body, _, err = m2.get(ctx, providerArchivePath(origin, ns, typ, version, others[0]))
	if err != nil || !bytes.Equal(body, origin.Archive(ns, typ, version, others[0])) {
		t.Errorf("uncached archive after restart on the full disk: %v", err)
	}
	notReady(t, m2)
}

// notReady checks that /readyz answers 503 and returns its reason.
// fillTo writes a file on the file system of dir that leaves free bytes
// free on it.
func fillTo(t *testing.T, dir string, free int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	size := int64(st.Bavail)*st.Bsize - free
	if size <= 0 {
		t.Fatalf("%s has %d bytes free, not more than %d", dir, int64(st.Bavail)*st.Bsize, free)
	}
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		t.Fatalf("filling %s: %v", dir, err)
	}
}

// waitFreeAtMost waits until m's status reports at most max bytes free on
// the cache's file system: the cache has looked since it was filled.
func waitFreeAtMost(t *testing.T, m *proc, max int64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		raw, _, err := m.get(context.Background(), "/?format=json")
		if err != nil {
			t.Fatal(err)
		}
		var st proxy.Status
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatalf("status JSON: %v", err)
		}
		if f := st.Health.DiskFreeBytes; f != nil && *f <= max {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status never reported at most %d bytes free: %s", max, raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func notReady(t *testing.T, m *proc) string {
	t.Helper()
	resp, err := m.client.Get(m.url + "readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d %s, want 503", resp.StatusCode, raw)
	}
	var body struct{ Reason string }
	json.Unmarshal(raw, &body)
	return body.Reason
}

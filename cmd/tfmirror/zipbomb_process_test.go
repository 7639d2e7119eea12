package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// cpuTime is the CPU time (user and system) process pid has used, from
// /proc/PID/stat.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc to measure CPU time: %v", err)
	}
	// The fields after the command name, which ends with the last ')':
	// state is field 3, utime 14 and stime 15.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, err1 := strconv.ParseInt(fields[14-3], 10, 64)
	stime, err2 := strconv.ParseInt(fields[15-3], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	const ticksPerSecond = 100 // USER_HZ, 100 on every Linux ABI
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// bombGet is what one client got when asking for a zip bomb.
type bombGet struct {
	status int
	body   []byte
	err    error // of the request or of reading the body
}

// TestSignedZipBombRefused: an origin publishes, correctly signed, a
// provider whose zip is a bomb; four clients ask the mirror for it at
// once. None gets the archive complete (waiting clients get a 502 that
// says why, clients already streaming it an aborted body), refusing it
// costs the mirror little CPU, nothing is cached, the refusal is counted,
// and SIGTERM right after makes the mirror exit within its shutdown
// timeout.
func TestSignedZipBombRefused(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const ns, typ, version, pl, clients = "evil", "bomb", "1.0.0", "linux_amd64", 4
	exe := "terraform-provider-" + typ + "_v" + version
	bin := buildBinary(t)

	tests := []struct {
		name   string
		data   []byte
		reason string // the refusal's metric label, also in the 502's message
		flags  []string
	}{
		// A few MiB that inflate to 6 GiB, over the default 2 GiB.
		{name: "6 GiB of zeros", data: verifytest.Zeros(exe, 6<<30), reason: "archive_too_large"},
		// 64 entries of 32 MiB that share one entry's compressed bytes:
		// 2 GiB declared, within the limit, but overlapping.
		{name: "overlapping entries", data: verifytest.Overlapping(exe, 64, 32<<20), reason: "bad_archive"},
		// Under a low limit, a small bomb.
		{name: "over a low unpacked limit", data: verifytest.Zeros(exe, 256<<20), reason: "archive_too_large",
			flags: []string{"--archive-max-unpacked-bytes", "64MiB"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			origin, err := fakeorigin.Start(fakeorigin.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(origin.Close)
			origin.AddProvider(ns, typ, []string{version}, []string{pl})
			origin.SetArchiveBytes(ns, typ, version, pl, tc.data)
			// Long enough that a loaded machine's exit (the cache
			// closed, the process torn down) fits in it: an idle one
			// exits in well under a second. A refusal that held up the
			// shutdown would be cut off only at it, and fail the test.
			const shutdownTimeout = time.Minute
			args := append([]string{"--shutdown-timeout", shutdownTimeout.String()}, tc.flags...)
			m := startProcess(t, bin, filepath.Join(t.TempDir(), "data"), origin, originCAFile(t, origin), args...)
			path := providerArchivePath(origin, ns, typ, version, pl)

			before := cpuTime(t, m.cmd.Process.Pid)
			var wg sync.WaitGroup
			got := make([]bombGet, clients)
			for i := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i] = getBomb(m, path)
				}()
			}
			wg.Wait()
			m.waitLog("archive failed verification; nothing was cached", 30*time.Second)
			used := cpuTime(t, m.cmd.Process.Pid) - before

			for i, g := range got {
				switch {
				case g.status == http.StatusOK && g.err == nil:
					t.Errorf("client %d got a complete 200 answer (%d bytes, the archive's %v)", i, len(g.body), bytes.Equal(g.body, tc.data))
				case g.status == http.StatusOK:
					// Streaming when the refusal came: cut off short.
					if len(g.body) >= len(tc.data) {
						t.Errorf("client %d got all %d bytes before the error %v", i, len(g.body), g.err)
					}
				case g.status == http.StatusBadGateway:
					if !strings.Contains(string(g.body), tc.reason) {
						t.Errorf("client %d: 502 %s, want it to say %s", i, g.body, tc.reason)
					}
				default:
					t.Errorf("client %d: status %d, %v: %s", i, g.status, g.err, g.body)
				}
			}
			t.Logf("CPU time used for %d clients: %v; answers %v", clients, used, statuses(got))
			if used >= 5*time.Second {
				t.Errorf("the mirror used %v of CPU for the bomb, want less than 5s", used)
			}
			if n := metricValue(t, m, `tfmirror_verification_failures_total{reason="`+tc.reason+`"}`); n < 1 {
				t.Errorf("%s verification failures = %v, want at least 1", tc.reason, n)
			}
			// Nothing cached: the status page lists no archive, and asking
			// again refuses it again from a new download.
			if st := m.status(t); st.Archives != 0 || len(st.cachedPlatforms()) != 0 {
				t.Errorf("status: %d archives cached (%v), want none", st.Archives, st.cachedPlatforms())
			}
			hits := origin.ArchiveHits(ns, typ, version, pl)
			if g := getBomb(m, path); g.status == http.StatusOK && g.err == nil {
				t.Errorf("asked again: a complete %d-byte answer", len(g.body))
			}
			if n := origin.ArchiveHits(ns, typ, version, pl); n != hits+1 {
				t.Errorf("asked again: %d origin downloads, want 1 (nothing was cached)", n-hits)
			}

			start := time.Now()
			if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := m.wait(shutdownTimeout + 5*time.Second); err != nil {
				t.Errorf("exit after SIGTERM: %v", err)
			}
			if d := time.Since(start); d > shutdownTimeout {
				t.Errorf("exited %v after SIGTERM, more than the %v shutdown timeout", d, shutdownTimeout)
			}
		})
	}
}

// TestShutdownStopsArchiveCheck: SIGTERM while the mirror checks a bomb
// its limits allow (8 GiB of zeros under a 16 GiB limit: much longer to
// inflate than the shutdown timeout) stops the check: the log says the
// shutdown stopped it, after the shutdown began, and the mirror exits 0;
// the client gets no complete archive and nothing is cached. The verdict
// rests on those events, not on how long the exit took: a loaded machine
// is slow, not wrong.
func TestShutdownStopsArchiveCheck(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const ns, typ, version, pl = "evil", "bomb", "1.0.0", "linux_amd64"
	// The mirror's default: how many final bytes it holds back from
	// clients until the archive passed its checks.
	const holdBack = 64 << 10
	// Hang guards only: what the test checks does not depend on them.
	const hang = 2 * time.Minute
	bomb := verifytest.Zeros("terraform-provider-"+typ+"_v"+version, 8<<30)
	bin := buildBinary(t)
	origin, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	origin.AddProvider(ns, typ, []string{version}, []string{pl})
	origin.SetArchiveBytes(ns, typ, version, pl, bomb)
	const shutdownTimeout = time.Second
	dataDir := filepath.Join(t.TempDir(), "data")
	m := startProcess(t, bin, dataDir, origin, originCAFile(t, origin),
		"--shutdown-timeout", shutdownTimeout.String(), "--archive-max-unpacked-bytes", "16GiB")

	// The mirror streams all but the final holdBack bytes until the
	// check passed: a client holding all of those shows that the whole
	// archive arrived and matched its sha256, so the check is under way.
	progress := make(chan struct{}, 1)
	done := make(chan download, 1)
	go func() {
		done <- fetchAll(m, providerArchivePath(origin, ns, typ, version, pl), len(bomb)-holdBack-1, progress)
	}()
	select {
	case <-progress:
	case d := <-done:
		t.Fatalf("download ended before the check: %v, %d bytes", d.err, len(d.body))
	case <-time.After(hang):
		t.Fatal("the download did not arrive")
	}
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := m.wait(hang); err != nil {
		t.Errorf("exit after SIGTERM: %v, want status 0", err)
	}

	// The process has exited: its log is complete.
	m.mu.Lock()
	lines := m.lines
	m.mu.Unlock()
	shuttingDown, stopped := -1, -1
	for i, l := range lines {
		switch l["msg"] {
		case "shutting down":
			if shuttingDown < 0 {
				shuttingDown = i
			}
		case "archive fetch stopped by shutdown; nothing was cached":
			stopped = i
			if l["stage"] != "check" || l["file"] != filepath.Base(providerArchivePath(origin, ns, typ, version, pl)) {
				t.Errorf("the shutdown stopped %v of %v, want the check of the bomb", l["stage"], l["file"])
			}
		case "archive fetch failed", "archive failed verification; nothing was cached":
			t.Errorf("the check ended otherwise than stopped: %v", l)
		}
	}
	switch {
	case shuttingDown < 0:
		t.Error("no shutdown was logged after SIGTERM")
	case stopped < 0:
		t.Error("the log does not say the shutdown stopped the archive check")
	case stopped < shuttingDown:
		t.Error("the archive check was stopped before the shutdown began")
	}
	if d := <-done; d.err == nil {
		t.Errorf("the client got a complete archive (%d bytes)", len(d.body))
	}
	if n := cachedArchives(t, dataDir); n != 0 {
		t.Errorf("%d archives cached, want none", n)
	}
}

// getBomb asks the mirror for path and reads the whole answer.
func getBomb(m *proc, path string) bombGet {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, m.url+strings.TrimPrefix(path, "/"), nil)
	if err != nil {
		return bombGet{err: err}
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return bombGet{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return bombGet{status: resp.StatusCode, body: body, err: err}
}

func statuses(got []bombGet) []string {
	out := make([]string, len(got))
	for i, g := range got {
		out[i] = strconv.Itoa(g.status)
		if g.err != nil {
			out[i] += " (cut off)"
		}
	}
	return out
}

// cachedArchives opens the cache of a stopped mirror's data directory and
// returns how many archives it holds.
func cachedArchives(t *testing.T, dataDir string) int {
	t.Helper()
	store, err := cache.Open(cache.Options{Dir: filepath.Join(dataDir, "cache")})
	if err != nil {
		t.Fatalf("reopening the cache: %v", err)
	}
	defer store.Close()
	n, _ := store.Stats()
	return n
}

//go:build linux

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestHangupWithNothingToReloadKeepsServing: SIGHUP to a serve with no
// configuration file, no client tokens file and no trusted keys (every
// setting a flag or a TFMIRROR_ variable) is what tfmirror reload is
// there: nothing to reload, said in the log; the mirror goes on serving.
// It ended the process at once, as the signal's default does, cutting off
// every request in flight and leaving the cache unclosed.
func TestHangupWithNothingToReloadKeepsServing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	caFile := originCAFile(t, origin)
	m := startProcess(t, bin, filepath.Join(t.TempDir(), "data"), origin, caFile)
	if err := m.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	line := m.waitLog(hangupIgnored, 10*time.Second)
	if why, _ := line["error"].(string); !strings.Contains(why, "nothing to reload") {
		t.Errorf("%q says %q, want why (nothing to reload)", hangupIgnored, why)
	}
	if _, _, err := m.get(t.Context(), "/healthz"); err != nil {
		t.Errorf("after SIGHUP: %v", err)
	}
}

// TestHangupWhileStartingIsNoEnd: a SIGHUP that reaches tfmirror serve
// while it starts (here: waiting for its cache's directory lock, as it
// may wait opening a large cache) does not end it; the reload it asks for
// runs once the mirror serves. It ended the process, which only caught
// SIGHUP once it listened: a `kill -HUP` after editing the file, racing a
// restart, took the mirror down.
func TestHangupWhileStartingIsNoEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	caFile := originCAFile(t, origin)
	dataDir := filepath.Join(t.TempDir(), "data")
	conf := filepath.Join(t.TempDir(), "tfmirror.hcl")
	if err := os.WriteFile(conf, []byte("log_level = \"info\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The cache's directory, locked as a serve still running on it
	// would hold it: the new serve waits for it (up to 2s) on its way up.
	cacheDir := filepath.Join(dataDir, "cache")
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		t.Fatal(err)
	}
	lock, err := os.Open(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--config", conf,
		"--allowed-origins", origin.Addr, "--allow-private-origins", "--log-format", "json")
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+caFile)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()
	log := func() string {
		b, _ := os.ReadFile(stderr.Name())
		return string(b)
	}
	// It waits for the lock once it has the directory open.
	deadline := time.Now().Add(time.Minute)
	for !holdsOpen(cmd.Process.Pid, cacheDir) {
		select {
		case <-exited:
			t.Fatalf("tfmirror serve exited (%v) before it opened its cache:\n%s", waitErr, log())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("tfmirror serve did not open its cache's directory within a minute:\n%s", log())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // delivered while it waits
	lock.Close()
	for !strings.Contains(log(), `"msg":"configuration file reloaded"`) {
		select {
		case <-exited:
			var ee *exec.ExitError
			if errors.As(waitErr, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					t.Fatalf("SIGHUP while starting ended tfmirror serve (%v):\n%s", ws.Signal(), log())
				}
			}
			t.Fatalf("tfmirror serve exited (%v):\n%s", waitErr, log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reload after the SIGHUP sent while starting within a minute:\n%s", log())
		}
	}
	// The reload may be logged before the listener is: the signal is
	// taken up as soon as the configuration is in force.
	for !strings.Contains(log(), `"msg":"tfmirror is serving"`) {
		select {
		case <-exited:
			t.Fatalf("reloaded, then exited (%v) before serving:\n%s", waitErr, log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("reloaded, but not serving within a minute:\n%s", log())
		}
	}
}

// holdsOpen says whether process pid has dir open.
func holdsOpen(pid int, dir string) bool {
	fds := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(fds)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && target == dir {
			return true
		}
	}
	return false
}

// TestHangupWhileShuttingDownIsSaid: a SIGHUP that reaches a serve after
// SIGTERM (during its --shutdown-delay, a rollout racing a config
// change) reloads nothing, and the log says so; it was dropped without a
// word, the operator left to think the file in force. tfmirror reload is
// refused then too, where it reloaded.
func TestHangupWhileShuttingDownIsSaid(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	caFile := originCAFile(t, origin)
	conf := filepath.Join(t.TempDir(), "tfmirror.hcl")
	if err := os.WriteFile(conf, []byte("log_level = \"info\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	m := startProcess(t, bin, dataDir, origin, caFile,
		"--config", conf, "--shutdown-delay", "20s")
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The delay has begun: the SIGHUP comes within it.
	m.waitLog("shutting down: /readyz answers 503, serving on while load balancers take the mirror out", 10*time.Second)
	if err := m.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	m.waitLog(hangupShuttingDown, 10*time.Second)
	// tfmirror reload, which does what SIGHUP does, is refused alike.
	if _, stderr, code := runProcess(t, bin, "", "reload", "--data-dir", dataDir); code != 1 || !strings.Contains(stderr, "nothing reloaded: the mirror is shutting down") {
		t.Errorf("tfmirror reload during the shutdown delay: exit %d\n%s\nwant 1, refused: shutting down", code, stderr)
	}
	// A second SIGTERM ends the delay (and the test's wait) at once.
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	m.waitLog("stopped", 10*time.Second)
}

//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestReadOnlyDataDirProcess starts tfmirror serve on a data directory
// whose file system is mounted read-only (a disk the kernel remounted
// read-only after errors, a volume mounted so by mistake), in a mount
// namespace of its own: it serves what the cache holds, as on a disk full
// at start-up, rather than exiting; says why the cache does not write;
// and answers /readyz 503, as for a full disk.
func TestReadOnlyDataDirProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	unshare, err := exec.LookPath("unshare")
	if err == nil {
		err = exec.Command(unshare, "--mount", "--map-root-user", "true").Run()
	}
	if err != nil {
		// A mount namespace is the kernel's and the sandbox's to give
		// (user namespaces may be off), not a tool the project installs.
		t.Skipf("no mount namespace (unshare --mount --map-root-user): %v", err)
	}
	const ns, typ, version, platform = "hashicorp", "random", "1.0.0", "linux_amd64"
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider(ns, typ, []string{version}, []string{platform})
	caFile := originCAFile(t, origin)
	dataDir := filepath.Join(t.TempDir(), "data")
	ctx := context.Background()

	// A first serve caches the archive, and stops.
	m := startProcess(t, bin, dataDir, origin, caFile)
	path := providerArchivePath(origin, ns, typ, version, platform)
	if _, _, err := m.get(ctx, path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(m.status(t).cachedPlatforms()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	if err := m.wait(30 * time.Second); err != nil {
		t.Fatalf("first serve: %v", err)
	}

	// The second on the same directory, mounted read-only.
	const script = `set -e
mount --bind "$DIR" "$DIR"
mount -o remount,bind,ro "$DIR"
exec "$BIN" "$@"
`
	cmd := exec.Command(unshare, "--mount", "--map-root-user", "sh", "-c", script, "sh", "serve",
		"--listen", "127.0.0.1:0", "--data-dir", dataDir, "--allowed-origins", origin.Addr, "--allow-private-origins", "--log-format", "json")
	cmd.Env = append(os.Environ(), "DIR="+dataDir, "BIN="+bin, "SSL_CERT_FILE="+caFile)
	m = startCmd(t, cmd, dataDir)
	body, _, err := m.get(ctx, path)
	if err != nil || !bytes.Equal(body, origin.Archive(ns, typ, version, platform)) {
		t.Errorf("the cached archive on a read-only data directory: %v, %d bytes", err, len(body))
	}
	if _, resp, _ := m.get(ctx, "/readyz"); resp == nil || resp.StatusCode != 503 {
		t.Errorf("/readyz on a read-only data directory: %v, want 503", resp)
	}
	found := false
	m.mu.Lock()
	for _, l := range m.lines {
		msg, _ := l["msg"].(string)
		found = found || strings.Contains(msg, "read-only")
	}
	m.mu.Unlock()
	if !found {
		t.Error("no log line says the data directory is read-only")
	}
	if hits := origin.Hits(fakeorigin.Archive); hits != 1 {
		t.Errorf("the origin served the archive %d times, want once: the second serve should serve it from the cache", hits)
	}
}

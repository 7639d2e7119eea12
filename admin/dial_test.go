package admin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A data directory whose socket path is too long to be a unix socket's
// has no server on it: Listen fails there too (a serve says "admin socket
// unavailable" and serves on), so Dial says ErrNoServer, and a subcommand
// opens the data directory itself, or finds it held and says so.
func TestDialTooLongAPathIsNoServer(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix socket paths")
	}
	dir := filepath.Join(t.TempDir(), strings.Repeat("v", 60), strings.Repeat("w", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if ln, err := Listen(dir); err == nil {
		ln.Close()
		t.Skip("this platform's unix sockets take a path of", len(SocketPath(dir)), "bytes")
	}
	c, err := Dial(context.Background(), dir)
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, ErrNoServer) {
		t.Fatalf("Dial of a socket path of %d bytes: %v, want ErrNoServer", len(SocketPath(dir)), err)
	}
	if !strings.Contains(err.Error(), "too long") {
		t.Errorf("Dial's error %q does not say the path is too long", err)
	}
}

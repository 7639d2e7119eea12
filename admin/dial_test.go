package admin

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
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

// A process that holds the admin socket but answers nothing on it (a
// serve stopped with SIGSTOP, or hung) is said to be so by Dial, within
// its bound: a command's call through it waited for ever. Any HTTP
// answer is one (a serve of an earlier release, without /v1/ping, answers
// 404).
func TestDialAProcessThatDoesNotAnswer(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix sockets")
	}
	old := pingTimeout
	pingTimeout = 300 * time.Millisecond
	t.Cleanup(func() { pingTimeout = old })

	dir := t.TempDir()
	ln, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c // accepted, never answered
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range held {
			c.Close()
		}
	})
	done := make(chan error, 1)
	go func() {
		c, err := Dial(context.Background(), dir)
		if c != nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotAnswering) || errors.Is(err, ErrNoServer) {
			t.Fatalf("Dial of a socket whose process does not answer: %v, want ErrNotAnswering", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Dial of a socket whose process does not answer did not return")
	}

	// An earlier release's serve: any answer is one.
	dir2 := t.TempDir()
	ln2, err := Listen(dir2)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	go srv.Serve(ln2)
	t.Cleanup(func() { srv.Close() })
	pingTimeout = time.Minute
	c, err := Dial(context.Background(), dir2)
	if err != nil {
		t.Fatalf("Dial of a serve without /v1/ping: %v, want it answering", err)
	}
	c.Close()
}

// A socket the command's user may not open (the serve's socket, mode
// 0600, and its data directory are another user's) is said to be so,
// with what to do, not as the kernel's bare "permission denied"; the
// other errors of a connect keep their meaning.
func TestDialErrors(t *testing.T) {
	path := "/var/lib/tfmirror/tfmirror.sock"
	connect := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", errno)}
	}
	err := dialError(path, connect(syscall.EACCES))
	if errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), "are the mirror's user's, and only that user or root may use them") || !strings.Contains(err.Error(), path) {
		t.Errorf("EACCES: %v, want it to say whose socket it is, and its path", err)
	}
	if err := dialError(path, connect(syscall.ECONNREFUSED)); err != ErrNoServer {
		t.Errorf("ECONNREFUSED: %v, want ErrNoServer (a socket left by a process that is gone)", err)
	}
	if err := dialError(path, connect(syscall.ENOENT)); err != ErrNoServer {
		t.Errorf("ENOENT: %v, want ErrNoServer", err)
	}
	if err := dialError(path, connect(syscall.EINVAL)); !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), "too long") {
		t.Errorf("EINVAL: %v, want ErrNoServer saying the path is too long", err)
	}
}

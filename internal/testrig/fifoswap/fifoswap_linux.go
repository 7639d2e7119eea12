// Package fifoswap swaps a file with a FIFO again and again, for the
// tests of readers that must check what they opened, not the name before
// the open: a reader that opens a FIFO in a file's place waits for a
// writer for ever. Linux only (RENAME_EXCHANGE). Tests only: the shipped
// binary links none of it.
package fifoswap

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Swapper exchanges a file's name with a FIFO's until it is stopped.
type Swapper struct {
	path, fifo string
	stop       atomic.Bool
	wg         sync.WaitGroup
}

// Start makes a FIFO beside path (a regular file) and exchanges the two
// names (RENAME_EXCHANGE, so that path always leads to one of them) as
// fast as the system lets it, until Stop, Unblock or the end of the test.
// It skips the test where the file system cannot exchange names.
func Start(t testing.TB, path string) *Swapper {
	t.Helper()
	s := &Swapper{path: path, fifo: filepath.Join(filepath.Dir(path), ".fifoswap")}
	if err := syscall.Mkfifo(s.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.exchange(); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
			t.Skipf("the file system cannot exchange names (RENAME_EXCHANGE): %v", err)
		}
		t.Fatalf("RENAME_EXCHANGE: %v", err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for !s.stop.Load() {
			if err := s.exchange(); err != nil {
				t.Errorf("RENAME_EXCHANGE: %v", err)
				return
			}
		}
	}()
	t.Cleanup(s.Unblock)
	return s
}

func (s *Swapper) exchange() error {
	return unix.Renameat2(unix.AT_FDCWD, s.path, unix.AT_FDCWD, s.fifo, unix.RENAME_EXCHANGE)
}

// Stop ends the swaps and waits for the last one.
func (s *Swapper) Stop() {
	s.stop.Store(true)
	s.wg.Wait()
}

// Unblock ends the swaps and gives a reader waiting on the FIFO, under
// either name, a writer and an end, so that it returns.
func (s *Swapper) Unblock() {
	s.Stop()
	for _, p := range []string{s.path, s.fifo} {
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	}
}

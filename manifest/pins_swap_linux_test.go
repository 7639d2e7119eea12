package manifest

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPinsNeverWaitOnAFIFO swaps a pins file with a FIFO (RENAME_EXCHANGE,
// so that the name always leads to one of them) as fast as the system
// lets it while the pins are read again and again, as retention does
// every PinsInterval: whichever the name leads to when it is opened is
// what is checked and read, so a reading gets the pins or refuses the
// FIFO, and never waits on it for a writer (which held retention's
// goroutine, every prune after it and the shutdown for ever).
func TestPinsNeverWaitOnAFIFO(t *testing.T) {
	dir := t.TempDir()
	pins := filepath.Join(dir, "pins")
	if err := os.Mkdir(pins, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(pins, "team.hcl")
	fifo := filepath.Join(dir, "swap")
	if err := os.WriteFile(path, []byte("provider \"registry.terraform.io/hashicorp/random\" {\n  versions = [\"3.6.0\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, path, unix.AT_FDCWD, fifo, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("RENAME_EXCHANGE: %v", err)
				return
			}
		}
	}()
	unblock := func() {
		stop.Store(true)
		wg.Wait()
		for _, p := range []string{path, fifo} {
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
	}
	d := NewPinsDir(pins)
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; i < 10000 && time.Now().Before(deadline); i++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			d.Pins()
		}()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			unblock()
			<-done
			t.Fatalf("reading the pins waited 3s on a FIFO swapped in for a pins file (reading %d)", i)
		}
	}
	stop.Store(true)
	wg.Wait()
}

//go:build unix

package airgap

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A tar file given as a FIFO (a stream the operator pipes in, `<(...)`)
// is read as given, but an interrupt (Ctrl-C, SIGTERM, the caller of the
// admin socket gone) still stops the import at once: while it waits for a
// writer to open the FIFO, and while a writer that opened it sends
// nothing more. It returns the interruption, and leaves no scratch
// directory; the FIFO can be written to again (nothing holds it open).
// Before, the import waited in the open, or in the read, for as long as
// nobody wrote: a standalone import held the data directory's lock until
// killed, and left its scratch directory behind.
func TestImportOfAFIFOInterrupted(t *testing.T) {
	engine := newEngine(t, nil)
	for _, tc := range []struct {
		name string
		// write is what a writer does before the interrupt; it returns
		// the end of its writing.
		write func(t *testing.T, fifo string) func()
	}{
		{"no writer", func(*testing.T, string) func() { return func() {} }},
		{"a writer that stalls", func(t *testing.T, fifo string) func() {
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return func() {}
			}
			tw := tar.NewWriter(w)
			if err := tw.WriteHeader(&tar.Header{Name: "tf.corp.example/acme/thing/terraform-provider-thing_1.0.0_linux_amd64.zip",
				Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 20}); err != nil {
				t.Error(err)
			}
			if _, err := tw.Write(make([]byte, 4096)); err != nil {
				t.Error(err)
			}
			// ... and nothing more, the FIFO held open.
			return func() { w.Close() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "a writer that stalls" && runtime.GOOS == "darwin" {
				t.Skip("Go reads a FIFO on macOS without its poller, and no deadline ends the read")
			}
			fifo := filepath.Join(t.TempDir(), "bundle.tar")
			mkfifo(t, fifo)
			scratch := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := Import(ctx, engine, fifo, ImportOptions{ScratchDir: scratch}, func(string) {})
				done <- err
			}()
			end := tc.write(t, fifo)
			defer end()
			time.Sleep(100 * time.Millisecond)
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("import interrupted: %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				// Let it go: be the writer it waits for, then close.
				end()
				if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
				t.Fatalf("the import did not stop at the interrupt: it waits on the FIFO (%v)", <-done)
			}
			if entries, _ := os.ReadDir(scratch); len(entries) != 0 {
				t.Errorf("the interrupted import left %v in its scratch directory", names(entries))
			}
		})
	}
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

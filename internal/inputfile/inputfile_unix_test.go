//go:build unix

package inputfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within runs open, which must not block, and fails the test when it
// has not returned after a while; a FIFO it waits on is then opened for
// writing, so that it returns and the test ends.
func within(t *testing.T, fifo string, open func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- open() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute): // a refusal takes milliseconds; a wait on the FIFO never ends
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatalf("opening %s blocked", fifo)
		return nil
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	mkfifo(t, fifo)
	for name, target := range map[string]string{"link": file, "fifolink": fifo, "dirlink": dir} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}

	f, info, err := Open(file)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(data) != "content" || info.Size() != 7 {
		t.Fatalf("a regular file: %q, %d bytes, %v", data, info.Size(), err)
	}

	tests := []struct{ name, want string }{
		{"fifo", "is a FIFO, not a regular file"},
		{"link", "is a symbolic link, not a regular file"},
		{"fifolink", "is a symbolic link, not a regular file"},
		{"dirlink", "is a symbolic link, not a regular file"},
		{".", "is a directory, not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			err := within(t, fifo, func() error {
				f, _, err := Open(path)
				if err == nil {
					f.Close()
				}
				return err
			})
			var ke *KindError
			if !errors.As(err, &ke) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open(%s): %v, want %q", tc.name, err, tc.want)
			}
		})
	}
}

func TestOpenDir(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	mkfifo(t, fifo)
	if err := os.Symlink(sub, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenDir(sub)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for name, want := range map[string]string{
		"fifo": "is a FIFO, not a directory",
		"link": "is a symbolic link, not a directory",
		"file": "is a regular file, not a directory",
	} {
		err := within(t, fifo, func() error {
			f, err := OpenDir(filepath.Join(dir, name))
			if err == nil {
				f.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenDir(%s): %v, want %q", name, err, want)
		}
	}
}

// In a root, a link is refused even where it leads inside the root, and
// a FIFO does not block.
func TestOpenIn(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte("# ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pipe.tf")
	mkfifo(t, fifo)
	if err := os.Symlink("main.tf", filepath.Join(dir, "link.tf")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f, info, err := OpenIn(root, "main.tf")
	if err != nil || info.Size() != 5 {
		t.Fatalf("a regular file: %v, %v", info, err)
	}
	f.Close()
	for name, want := range map[string]string{"pipe.tf": "is a FIFO", "link.tf": "is a symbolic link"} {
		err := within(t, fifo, func() error {
			f, _, err := OpenIn(root, name)
			if err == nil {
				f.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenIn(%s): %v, want %q", name, err, want)
		}
	}
}

// TestOpenOperator: an operator's file is opened through a link (a
// mounted Secret's), and a FIFO (itself or behind a link), a directory and
// a socket are refused at once with what they are.
func TestOpenOperator(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("content"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	mkfifo(t, fifo)
	for name, target := range map[string]string{"link": file, "fifolink": fifo} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"file", "link"} {
		f, info, err := OpenOperator(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil || string(b) != "content" || info.Size() != 7 {
			t.Errorf("%s: read %q, %v, size %d", name, b, err, info.Size())
		}
	}
	for name, kind := range map[string]string{"fifo": "a FIFO", "fifolink": "a FIFO", ".": "a directory"} {
		err := within(t, fifo, func() error {
			f, _, err := OpenOperator(filepath.Join(dir, name))
			if err == nil {
				f.Close()
			}
			return err
		})
		var ke *KindError
		if !errors.As(err, &ke) || ke.Kind != kind {
			t.Errorf("%s: %v, want a *KindError of %s", name, err, kind)
		}
	}
}

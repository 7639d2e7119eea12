package inputfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A file written in place while it is read (a tokens file a reload reads
// as an editor writes it) is read again until a read saw it whole, and
// refused, naming it, when it changes under every read; a file that does
// not change is read once.
func TestFileChangedWhileReadIsReadAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("first-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	whole := "first-token-0123456789\nsecond-token-0123456789\n"
	reads := 0
	change := func(times int) func(string) {
		return func(string) {
			reads++
			if reads > times {
				return
			}
			// The rest of the file arrives as the read ends, a moment
			// later (a modification time of its own).
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("second-token-0123456789\n")
			f.Close()
			os.Chtimes(path, time.Time{}, time.Now().Add(time.Duration(reads)*time.Second))
		}
	}
	afterRead = change(1)
	t.Cleanup(func() { afterRead = nil })
	for _, read := range []func(string, int64) ([]byte, error){ReadOperator, ReadTrusted} {
		if err := os.WriteFile(path, []byte("first-token-0123456789\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		reads = 0
		data, err := read(path, 1<<20)
		if err != nil || string(data) != whole {
			t.Fatalf("read: %q, %v, want the whole file the second read saw", data, err)
		}
		if reads != 2 {
			t.Errorf("%d reads, want 2", reads)
		}
	}

	afterRead = change(readTries)
	reads = 0
	_, err := ReadTrusted(path, 1<<20)
	var changed *ChangedError
	if !errors.As(err, &changed) || changed.Path != path {
		t.Fatalf("a file changing under every read: %v, want a *ChangedError naming it", err)
	}
	if reads != readTries {
		t.Errorf("%d reads, want %d", reads, readTries)
	}

	afterRead = change(0)
	reads = 0
	if _, err := ReadTrusted(path, 1<<20); err != nil || reads != 1 {
		t.Errorf("a file that does not change: %d reads, %v; want one", reads, err)
	}
}

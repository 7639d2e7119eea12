//go:build unix

package hclfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
)

// Parse opens a file as every operator's file is opened: a FIFO (whose
// open would wait for a writer for ever), a device (which never ends) and
// a directory are refused at once, naming the file; a link to a regular
// file (a mounted Secret's) is followed.
func TestParseRefusesWhatIsNoRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "credentials.tfrc")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(dir, "real.hcl")
	if err := os.WriteFile(regular, []byte("a = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.hcl")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, kind string
	}{{fifo, "a FIFO"}, {"/dev/zero", "a device"}, {dir, "a directory"}, {link, ""}} {
		done := make(chan error, 1)
		go func() {
			_, diags, err := Parse(nil, tc.path)
			if err == nil && diags.HasErrors() {
				err = diags
			}
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute): // a refusal takes milliseconds; a wait on the FIFO never ends
			// Let the open that waits for a writer go.
			if w, werr := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); werr == nil {
				w.Close()
			}
			t.Fatalf("Parse(%s) still waiting after a minute", tc.path)
		}
		var kind *inputfile.KindError
		switch {
		case tc.kind == "" && err != nil:
			t.Errorf("Parse(%s): %v", tc.path, err)
		case tc.kind != "" && (!errors.As(err, &kind) || kind.Kind != tc.kind || !strings.Contains(err.Error(), tc.path)):
			t.Errorf("Parse(%s): %v, want it refused as %s, naming it", tc.path, err, tc.kind)
		}
	}
}

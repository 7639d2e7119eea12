package settings

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fifoswap"
)

// TestReadFileNeverWaitsOnAFIFO swaps the configuration file with a FIFO
// (RENAME_EXCHANGE, so that the name always leads to one of them) as fast
// as the system lets it while the file is read again and again, as a
// reload does: whichever the name leads to when it is opened is what is
// checked and read, so a read either gets the file or refuses a FIFO,
// and never waits on one for a writer (which held a reload, every later
// one and the shutdown for ever). The file is checked for being a regular
// file on the descriptor it is read from, not by a look at the name
// before the open.
func TestReadFileNeverWaitsOnAFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tfmirror.hcl")
	if err := os.WriteFile(path, []byte("log_level = \"info\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	swap := fifoswap.Start(t, path)
	read, refused := 0, 0
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; i < 10000 && time.Now().Before(deadline); i++ {
		done := make(chan bool, 1)
		go func() {
			f, diags := ReadFile(path)
			done <- f != nil && !diags.HasErrors()
		}()
		select {
		case ok := <-done:
			if ok {
				read++
			} else {
				refused++
			}
		case <-time.After(time.Minute): // a read takes milliseconds; a wait on the FIFO never ends
			swap.Unblock()
			<-done
			t.Fatalf("reading the configuration file waited a minute on a FIFO swapped in for it (after %d reads, %d refusals)", read, refused)
		}
	}
	swap.Stop()
	if read == 0 || refused == 0 {
		t.Logf("%d reads, %d refusals: the swaps did not land between them", read, refused)
	}
}

package manifest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fifoswap"
)

// TestPinsNeverWaitOnAFIFO swaps a pins file with a FIFO (RENAME_EXCHANGE,
// so that the name always leads to one of them) as fast as the system
// lets it while the pins are read again and again, as retention does
// every PinsInterval: whichever the name leads to when it is opened is
// what is checked and read, so a reading gets the pins or refuses the
// FIFO, and never waits on it for a writer (which held retention's
// goroutine, every prune after it and the shutdown for ever).
func TestPinsNeverWaitOnAFIFO(t *testing.T) {
	pins := filepath.Join(t.TempDir(), "pins")
	if err := os.Mkdir(pins, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(pins, "team.hcl")
	if err := os.WriteFile(path, []byte("provider \"registry.terraform.io/hashicorp/random\" {\n  versions = [\"3.6.0\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	swap := fifoswap.Start(t, path)
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
		case <-time.After(time.Minute): // a read takes milliseconds; a wait on the FIFO never ends
			swap.Unblock()
			<-done
			t.Fatalf("reading the pins waited a minute on a FIFO swapped in for a pins file (reading %d)", i)
		}
	}
	swap.Stop()
}

package airgap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// cancelledAfterFirstLook is a context whose Done is closed from the
// start but whose Err is nil the first time it is asked: an import that
// checked it before a version, and is then interrupted (Ctrl-C, the
// caller of the admin socket gone) while it imports that version.
type cancelledAfterFirstLook struct {
	context.Context
	looked atomic.Bool
}

func (c *cancelledAfterFirstLook) Err() error {
	if c.looked.CompareAndSwap(false, true) {
		return nil
	}
	return context.Canceled
}

// An import interrupted while it imports a version stops with the
// interruption as its error, and does not count or report that version
// as refused: nothing in the bundle is at fault, and the operator, told
// "1 failed" and "refused: context canceled", would look for a fault in
// the bundle, not run the import again.
func TestImportInterruptedRefusesNothing(t *testing.T) {
	in := t.TempDir()
	pdir := filepath.Join(in, "tf.corp.example", "acme", "thing")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"1.0.0", "1.1.0"} {
		if err := os.WriteFile(filepath.Join(pdir, "terraform-provider-thing_"+v+"_linux_amd64.zip"), enginetest.ZipOfSize(t, "thing", 1<<20, uint64(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	engine := newEngine(t, enginetest.StartOrigin(t, fakeorigin.Options{}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var reports []string
	sum, err := Import(&cancelledAfterFirstLook{Context: ctx}, engine, in, ImportOptions{AllowUnsigned: true, ScratchDir: t.TempDir()},
		func(s string) { reports = append(reports, s) })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("import interrupted: error %v, want context.Canceled", err)
	}
	if sum.Failed != 0 || len(reports) != 0 {
		t.Errorf("import interrupted: %d failed, reports %q; want none: nothing was refused", sum.Failed, reports)
	}
	time.Sleep(100 * time.Millisecond) // let a fetch the import left go
}

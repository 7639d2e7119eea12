package airgap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// An OCI layout export into the directory of an earlier one that stops
// half-way (interrupted, or a write that fails) leaves no push.sh: the
// earlier export's, left in place, made the directory look finished, and
// pushed the earlier tags alone, without a word about what this export
// did not write. Run again, the export finishes and writes push.sh.
func TestExportOCILayoutInterruptedLeavesNoPushScript(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	side, names := ociLayoutParts(t, engine)
	out := filepath.Join(t.TempDir(), "layout")
	script := filepath.Join(out, PushScriptName)
	if sum, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{Providers: []addrs.Provider{p}}, out, func(s string) { t.Log(s) }); err != nil || sum.Tags != 1 {
		t.Fatalf("first export: %+v, %v", sum, err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ExportOCILayout(&cancelledAfterFirstLook{Context: ctx}, engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { t.Log(s) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("export interrupted: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(script); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("push.sh after an interrupted export: %v, want none", err)
	}

	sum, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { t.Log(s) })
	if err != nil || sum.Tags != 2 {
		t.Fatalf("export run again: %+v, %v", sum, err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Errorf("push.sh after the export run again: %v", err)
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/admin"
)

// TestExportOfWhatTheCacheLacksFails: `tfmirror export` naming a provider
// and a version the cache does not hold, as a pipeline runs it, exits 1
// naming each, and writes nothing under OUT; with no selection, an empty
// cache exports an empty bundle, exit 0, as before.
func TestExportOfWhatTheCacheLacksFails(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir() // an empty data directory: a cache with nothing in it
	parent := t.TempDir()
	out := filepath.Join(parent, "bundle.tar.gz")
	var stdout, stderr bytes.Buffer
	code := runExport([]string{"--data-dir", dataDir, "--provider", "acme/nope", "--version", "9.9.9", out}, &stdout, &stderr)
	t.Logf("export: exit %d\n%s%s", code, stdout.String(), stderr.String())
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	for _, want := range []string{"--provider registry.terraform.io/acme/nope: the cache holds no package of it", "--version 9.9.9"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("a failed export left %v", entries)
	}

	stdout.Reset()
	stderr.Reset()
	if code := runExport([]string{"--data-dir", dataDir, out}, &stdout, &stderr); code != 0 {
		t.Errorf("export of everything from an empty cache: exit %d, want 0\n%s%s", code, stdout.String(), stderr.String())
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("export of everything from an empty cache: %v", err)
	}
}

// interruptedExport is an engine whose export is interrupted (Ctrl-C)
// while it runs.
type interruptedExport struct {
	engineOps
	cancel context.CancelFunc
}

func (o interruptedExport) Export(ctx context.Context, _ admin.ExportRequest) (admin.Exported, error) {
	o.cancel()
	return admin.Exported{}, ctx.Err()
}

// TestExportInterruptedSaysSo: an interrupted export says it was
// interrupted and what it left at OUT (a tar file: nothing; a
// directory: an incomplete one, to finish by running it again), as an
// interrupted import does, not a bare "context canceled".
func TestExportInterruptedSaysSo(t *testing.T) {
	for _, tc := range []struct {
		req  admin.ExportRequest
		want string
	}{
		{admin.ExportRequest{Out: "/media/usb/b.tar.gz"}, "export interrupted: nothing was written to /media/usb/b.tar.gz"},
		{admin.ExportRequest{Out: "/media/usb/b"}, "export interrupted: the directory /media/usb/b is incomplete, without a new signed manifest; run the same tfmirror export again"},
		{admin.ExportRequest{Out: "/media/usb/l", Format: admin.FormatOCILayout}, "without a new push.sh"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		_, err := exportOp(tc.req)(ctx, interruptedExport{cancel: cancel})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("export to %s interrupted: %v, want %q", tc.req.Out, err, tc.want)
		}
	}
}

package airgap

import (
	"archive/zip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// holeWriter writes to f, or, while hole, leaves a hole of as many bytes.
type holeWriter struct {
	f    *os.File
	hole bool
}

func (h *holeWriter) Write(p []byte) (int, error) {
	if h.hole {
		_, err := h.f.Seek(int64(len(p)), io.SeekCurrent)
		return len(p), err
	}
	return h.f.Write(p)
}

// sparseZip writes at path a zip of one stored entry, name, of n zero
// bytes: a hole on disk, which takes a few KiB of it and n bytes to read.
func sparseZip(t *testing.T, path, name string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hw := &holeWriter{f: f}
	zw := zip.NewWriter(hw)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: name, Method: zip.Store, CompressedSize64: uint64(n), UncompressedSize64: uint64(n)})
	if err != nil {
		t.Fatal(err)
	}
	if err := zw.Flush(); err != nil { // the header, before the hole
		t.Fatal(err)
	}
	hw.hole = true
	buf := make([]byte, 64<<20)
	for left := n; left > 0; {
		k := min(left, int64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			t.Fatal(err)
		}
		left -= k
	}
	if err := zw.Flush(); err != nil {
		t.Fatal(err)
	}
	hw.hole = false
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestExportReadsOutWithinBounds: OUT came back from the other side of
// the gap with, in place of the archive the export writes, a sparse file
// of terabytes, and a stray zip beside it whose one entry is as large (a
// few KiB of the disk each): the export replaces the first, without
// reading it, by the cached archive, and leaves the stray zip out of the
// mirror's index, unread, as the signed manifest leaves it out, and ends
// at once. It read both whole (the file's sha256, the zip's h1:), hours
// of reading for no byte of what it exports.
func TestExportReadsOutWithinBounds(t *testing.T) {
	const huge = 8 << 40
	engine, _ := cachedNetAndTarball(t)
	out := filepath.Join(t.TempDir(), "out")
	dir := filepath.Join(out, netProvider.Hostname.ForDisplay(), netProvider.Namespace, netProvider.Type)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "terraform-provider-net_1.0.0_linux_amd64.zip")
	if err := os.WriteFile(archive, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(archive, huge); err != nil {
		t.Skip(err) // a file system without files this large
	}
	stray := filepath.Join(dir, "terraform-provider-net_9.9.9_linux_amd64.zip")
	sparseZip(t, stray, "terraform-provider-net", huge)

	type result struct {
		sum     ExportSummary
		err     error
		reports []string
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.sum, r.err = Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, newKey(t, "exporter"), func(s string) { r.reports = append(r.reports, s) })
		done <- r
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the export still reads OUT's files a minute on")
	}
	if r.err != nil || r.sum.Written != 1 {
		t.Fatalf("export: %+v %v %q; want the archive written", r.sum, r.err, r.reports)
	}
	if info, err := os.Stat(archive); err != nil || info.Size() >= huge {
		t.Errorf("the archive in OUT: %v %v; want the cached one in place of the sparse file", info, err)
	}
	if !strings.Contains(strings.Join(r.reports, "\n"), stray+": left out of the mirror's index") {
		t.Errorf("reports %q do not leave the stray zip out of the index", r.reports)
	}
	index, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil || strings.Contains(string(index), "9.9.9") || !strings.Contains(string(index), "1.0.0") {
		t.Errorf("index.json: %s %v; want 1.0.0 alone", index, err)
	}
}

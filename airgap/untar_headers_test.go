package airgap

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/safetree"
)

// paxHeaders is n PAX extended headers one after the other ('x' entries
// of one record each), with no entry they belong to: archive/tar reads
// them all within one call of Next.
func paxHeaders(t *testing.T, n int) []byte {
	t.Helper()
	var one bytes.Buffer
	tw := tar.NewWriter(&one)
	if err := tw.WriteHeader(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o644, Format: tar.FormatPAX,
		PAXRecords: map[string]string{"comment": "padding"}}); err != nil {
		t.Fatal(err)
	}
	tw.Flush()                       //nolint:errcheck // memory
	x := one.Bytes()[:one.Len()-512] // the extended header and its record, without the file's header
	return bytes.Repeat(x, n)
}

// A tar file of extended headers alone (64 MiB of them, compressed to
// a few hundred KiB: every header alike) is a hostile bundle, which
// archive/tar would read to its end within one call of Next, checking
// nothing: it is refused once one entry's headers pass maxHeaderBytes,
// having read no more of it. A name as long as safetree takes, in a PAX
// header of its own, is well within the bound.
func TestUntarBoundsAnEntrysHeaders(t *testing.T) {
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	run := paxHeaders(t, 1<<10) // 1 MiB
	for range 64 {
		zw.Write(run) //nolint:errcheck // memory
	}
	zw.Close() //nolint:errcheck // memory
	path := filepath.Join(t.TempDir(), "headers.tar.gz")
	if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	err := untar(context.Background(), path, t.TempDir(), limits())
	if !errors.Is(err, errHeadersTooLong) || !strings.Contains(err.Error(), "headers run on for more than 65536 bytes") {
		t.Fatalf("untar of %d MiB of extended headers: %v, want them refused past %d bytes", 64, err, maxHeaderBytes)
	}

	// 20 directories of 199 bytes and a file: 4001 bytes, 21 deep.
	long := strings.Repeat(strings.Repeat("d", 199)+"/", 20) + "f"
	if len(long) > safetree.MaxNameBytes {
		t.Fatalf("a name of %d bytes is longer than safetree takes", len(long))
	}
	dir := t.TempDir()
	if err := untar(context.Background(), writeTar(t, reg(long, "kept")), dir, limits()); err != nil {
		t.Fatalf("a file named by %d bytes, in a PAX header: %v", len(long), err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, long)); err != nil || string(b) != "kept" {
		t.Fatalf("the file named by %d bytes reads %q, %v", len(long), b, err)
	}
}

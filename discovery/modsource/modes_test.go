//go:build unix

package modsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"syscall"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestPackageModesAreTheSources: which files of a package are executable
// is what its source says, not what the mirror's disk kept of it: a
// package and its zip are the same bytes on every replica, whatever the
// file system of its data directory keeps of modes (an SMB mount makes
// every file 0777; a umask takes bits away, here 0111, which keeps no
// execute bit). Before, they were read back from the disk, and a replica
// that kept other modes made other bytes, which the first record of the
// version then refused as changed at its source.
func TestPackageModesAreTheSources(t *testing.T) {
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.AddTarball("modes.tar.gz", fakeorigin.TarGzEntries([]fakeorigin.TarEntry{
		{Name: "main.tf", Body: "# module\n"},
		{Name: "scripts/run.sh", Body: "#!/bin/sh\n", Mode: 0o755},
		{Name: "run", Type: tar.TypeSymlink, Target: "scripts/run.sh"},
	}))
	a, err := Parse(o.TarballURL("modes.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	make := func() (pkg, zip []byte) {
		var p, z bytes.Buffer
		if _, err := newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, &p); err != nil {
			t.Fatal(err)
		}
		if _, err := WriteZip(context.Background(), bytes.NewReader(p.Bytes()), &z, t.TempDir(), defaultLimits); err != nil {
			t.Fatal(err)
		}
		return p.Bytes(), z.Bytes()
	}
	pkg, zip := make()
	old := syscall.Umask(0o111)
	pkg2, zip2 := make()
	syscall.Umask(old)
	if !bytes.Equal(pkg, pkg2) {
		t.Errorf("the package made where the disk keeps no execute bit differs")
	}
	if !bytes.Equal(zip, zip2) {
		t.Errorf("the zip made where the disk keeps no execute bit differs")
	}
	for _, p := range [][]byte{pkg, pkg2} {
		gz, err := gzip.NewReader(bytes.NewReader(p))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]int64{"main.tf": 0o644, "scripts/run.sh": 0o755}[h.Name]; want != 0 && h.Mode != want {
				t.Errorf("%s has mode %o, want %o", h.Name, h.Mode, want)
			}
		}
	}
	got := zipListing(t, zip2)
	t.Logf("zip: %q", got)
}

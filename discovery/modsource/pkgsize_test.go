package modsource

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestPackagesFetchedAreReadBack: a package is as large as its files
// (gzip finds nothing to share between files far apart), which may be
// more than the bytes its source sent: a Git pack holds a file's bytes
// once however many files hold them. Such a package, fetched within the
// limits, is read back within the same limits: unpacked (for sync, an
// import, a cache check) and made a zip (for OCI clients). Before, those
// held it to the download limit, and refused what the registry door
// served.
func TestPackagesFetchedAreReadBack(t *testing.T) {
	needGit(t)
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	noise := make([]byte, 600<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	if _, err := o.AddGitTree("copies", fakeorigin.GitTree{Files: map[string][]byte{
		"main.tf": []byte("# module\n"), "a/asset.bin": noise, "b/asset.bin": noise, "c/asset.bin": noise,
	}}, "v1"); err != nil {
		t.Fatal(err)
	}
	limits := Limits{MaxDownloadBytes: 1 << 20, MaxTreeBytes: 4 << 20, MaxEntries: 100, MaxSubmoduleDepth: 1}
	a, _ := Parse("git::" + o.GitURL("copies") + "?ref=v1")
	var pkg bytes.Buffer
	if _, err := newFetcher(t, o, limits).Fetch(context.Background(), a, &pkg); err != nil {
		t.Fatal(err)
	}
	if int64(pkg.Len()) <= limits.MaxDownloadBytes {
		t.Fatalf("the package is %d bytes: the test needs one larger than the download limit", pkg.Len())
	}
	if err := Unpack(context.Background(), bytes.NewReader(pkg.Bytes()), t.TempDir(), limits); err != nil {
		t.Errorf("Unpack: %v", err)
	}
	if err := CheckPackageLinks(context.Background(), bytes.NewReader(pkg.Bytes()), limits); err != nil {
		t.Errorf("CheckPackageLinks: %v", err)
	}
	if _, err := WriteZip(context.Background(), bytes.NewReader(pkg.Bytes()), io.Discard, t.TempDir(), limits); err != nil {
		t.Errorf("WriteZip: %v", err)
	}
	if MaxPackageBytes(limits) < int64(pkg.Len()) {
		t.Errorf("MaxPackageBytes = %d, less than the package's %d bytes", MaxPackageBytes(limits), pkg.Len())
	}
}

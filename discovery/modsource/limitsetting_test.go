package modsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestLimitErrorsNameTheirSetting: a package refused for going over a
// limit says which setting sets that limit (the operator reads the
// error in the log, or in a client's 502, and must know what to raise),
// and says of a fixed bound that no setting raises it.
func TestLimitErrorsNameTheirSetting(t *testing.T) {
	needGit(t)
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	noise := make([]byte, 64<<10)
	rand.Read(noise)
	o.AddTarball("big.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": nil, "noise.bin": noise}))
	o.AddTarball("many.tar.gz", fakeorigin.TarGz(map[string][]byte{"a.tf": nil, "b.tf": nil, "c.tf": nil, "d.tf": nil}))
	o.AddTarball("many.zip", fakeorigin.Zip(map[string][]byte{"a.tf": nil, "b.tf": nil, "c.tf": nil, "d.tf": nil}))
	o.AddTarball("zeros.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": nil, "zeros.bin": make([]byte, 4<<20)}))
	if _, err := o.AddGitRepo("zeros", map[string][]byte{"main.tf": []byte("#\n"), "zeros.bin": make([]byte, 4<<20)}, "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.AddGitRepo("noise", map[string][]byte{"main.tf": []byte("#\n"), "noise.bin": noise}, "v1"); err != nil {
		t.Fatal(err)
	}
	leaf, err := o.AddGitTree("leaf", fakeorigin.GitTree{Files: map[string][]byte{"main.tf": []byte("# leaf\n")}}, "v1")
	if err != nil {
		t.Fatal(err)
	}
	mid, err := o.AddGitTree("mid", fakeorigin.GitTree{
		Files:      map[string][]byte{"main.tf": []byte("# mid\n"), ".gitmodules": []byte("[submodule \"leaf\"]\n\tpath = leaf\n\turl = ../leaf.git\n")},
		Submodules: map[string]string{"leaf": leaf},
	}, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.AddGitTree("top", fakeorigin.GitTree{
		Files:      map[string][]byte{"main.tf": []byte("# top\n"), ".gitmodules": []byte("[submodule \"mid\"]\n\tpath = mid\n\turl = ../mid.git\n")},
		Submodules: map[string]string{"mid": mid},
	}, "v1"); err != nil {
		t.Fatal(err)
	}

	limits := func(change func(*Limits)) Limits {
		l := Limits{MaxDownloadBytes: 1 << 20, MaxTreeBytes: 1 << 20, MaxEntries: 100, MaxSubmoduleDepth: 2}
		change(&l)
		return l
	}
	for _, c := range []struct {
		name, location string
		limits         Limits
		want           string
	}{
		{"archive larger than the download", o.TarballURL("big.tar.gz"), limits(func(l *Limits) { l.MaxDownloadBytes = 16 << 10 }), "(--module-max-bytes)"},
		{"Git pack larger than the download", "git::" + o.GitURL("noise") + "?ref=v1", limits(func(l *Limits) { l.MaxDownloadBytes = 16 << 10 }), "(--module-max-bytes)"},
		{"tarball of too many files", o.TarballURL("many.tar.gz"), limits(func(l *Limits) { l.MaxEntries = 2 }), "(--module-max-files)"},
		{"zip of too many entries", o.TarballURL("many.zip"), limits(func(l *Limits) { l.MaxEntries = 2 }), "(--module-max-files)"},
		{"tarball's files too large", o.TarballURL("big.tar.gz"), limits(func(l *Limits) { l.MaxTreeBytes = 16 << 10 }), "(--module-max-tree-bytes)"},
		{"tarball inflating too much", o.TarballURL("zeros.tar.gz"), limits(func(l *Limits) { l.MaxTreeBytes = 16 << 10 }), "(--module-max-tree-bytes)"},
		{"Git blob too large", "git::" + o.GitURL("zeros") + "?ref=v1", limits(func(l *Limits) { l.MaxTreeBytes = 16 << 10 }), "(--module-max-tree-bytes)"},
		{"Git pack of too many objects", "git::" + o.GitURL("noise") + "?ref=v1", limits(func(l *Limits) { l.MaxEntries = 1; l.MaxDownloadBytes = 1 << 20 }), "(--module-max-files)"},
		{"submodules nested too deep", "git::" + o.GitURL("top") + "?ref=v1", limits(func(l *Limits) { l.MaxSubmoduleDepth = 1 }), "(a fixed bound: no setting raises it)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := Parse(c.location)
			if err != nil {
				t.Fatal(err)
			}
			_, err = newFetcher(t, o, c.limits).Fetch(context.Background(), a, io.Discard)
			var le *LimitError
			if !errors.As(err, &le) || !strings.HasSuffix(err.Error(), c.want) {
				t.Errorf("Fetch: %v, want a LimitError ending %q", err, c.want)
			}
		})
	}

	// A package read back (an import, a check) is held to the download's
	// and the files' limits together.
	// Its files within the files' limit, the package (gzip that does not
	// compress, so the files' bytes with tar's headers and end, 2 KiB)
	// over both together, whatever the random bytes are.
	pkg := storedTarGz(t, map[string][]byte{"a.bin": noise[:32<<10], "b.bin": noise[32<<10:]})
	small := Limits{MaxDownloadBytes: 256, MaxTreeBytes: 64 << 10, MaxEntries: 100}
	if int64(len(pkg)) <= small.MaxDownloadBytes+small.MaxTreeBytes {
		t.Fatalf("the package is %d bytes, within both limits together: the case tests nothing", len(pkg))
	}
	for name, err := range map[string]error{
		"Unpack":            Unpack(context.Background(), bytes.NewReader(pkg), t.TempDir(), small),
		"CheckPackageLinks": CheckPackageLinks(context.Background(), bytes.NewReader(pkg), small),
	} {
		if want := "(--module-max-bytes plus --module-max-tree-bytes)"; err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s: %v, want an error ending %q", name, err, want)
		}
	}
	if err := PackageLimitError("the package is 9 bytes"); !strings.HasSuffix(err.Error(), "(--module-max-bytes plus --module-max-tree-bytes)") {
		t.Errorf("PackageLimitError: %v", err)
	}
}

// storedTarGz is a tar.gz of files whose gzip stores them as they are
// (no compression): its size is at least the tar archive's, whatever
// the files hold.
func storedTarGz(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.NoCompression)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(gz)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(files[name]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

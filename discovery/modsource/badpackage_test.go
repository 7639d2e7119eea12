package modsource

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestFetchMarksWhatTheSourceSent: a fetch that fails on what its source
// host sent (an archive that is not one, cut short, with an entry of a
// type modules cannot have; a Git repository without the ref asked for,
// or whose tree Git refuses; a package without the location's //SUBDIR)
// fails with ErrBadPackage, its message as it was, so that the front
// doors answer it as the origin's failure and say why. A failure of the
// system the fetch runs on, of its context, or over a limit is not.
func TestFetchMarksWhatTheSourceSent(t *testing.T) {
	needGit(t)
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	good := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte(strings.Repeat("# a module\n", 500))})
	o.AddTarball("good.tar.gz", good)
	o.AddTarball("notgzip.tar.gz", []byte("<html>not an archive</html>"))
	o.AddTarball("cutshort.tar.gz", good[:len(good)/2])
	var hardlink bytes.Buffer
	gz := gzip.NewWriter(&hardlink)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	gz.Close()
	o.AddTarball("hardlink.tar.gz", hardlink.Bytes())
	var linkZip bytes.Buffer
	zw := zip.NewWriter(&linkZip)
	h := &zip.FileHeader{Name: "l", CreatorVersion: 3 << 8, ExternalAttrs: 0o120777 << 16}
	if w, err := zw.CreateHeader(h); err != nil {
		t.Fatal(err)
	} else {
		w.Write([]byte("main.tf")) //nolint:errcheck // memory
	}
	zw.Close()
	o.AddTarball("link.zip", linkZip.Bytes())
	o.AddTarball("notzip.zip", []byte("PK not a zip"))
	if _, err := o.AddGitTree("dotgit", fakeorigin.GitTree{Files: map[string][]byte{"main.tf": []byte("# x\n"), ".GIT/config": []byte("[core]\n")}}, "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.AddGitRepo("plain", map[string][]byte{"main.tf": []byte("# x\n")}, "v1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, location, says string }{
		{"not gzip", o.TarballURL("notgzip.tar.gz"), "not a gzip archive"},
		{"cut short", o.TarballURL("cutshort.tar.gz"), "unexpected EOF"},
		{"hard link", o.TarballURL("hardlink.tar.gz"), "of a type modules cannot have"},
		{"link in a zip", o.TarballURL("link.zip"), "is a link"},
		{"not zip", o.TarballURL("notzip.zip"), "not a zip archive"},
		{"no such subdir", o.TarballURL("good.tar.gz") + "//modules/vpc", `no directory "modules/vpc"`},
		{"git tree Git refuses", "git::" + o.GitURL("dotgit") + "?ref=v1", "invalid path"},
		{"git ref the repository lacks", "git::" + o.GitURL("plain") + "?ref=v9", `no tag, branch or commit "v9"`},
		{"abbreviated commit id no commit has", "git::" + o.GitURL("plain") + "?ref=34269ab300", `no tag, branch or commit "34269ab300" (no commit or annotated tag of the branches' and tags' history has an id beginning so)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Parse(tc.location)
			if err != nil {
				t.Fatal(err)
			}
			_, err = newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, io.Discard)
			if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Fetch = %v, want ErrBadPackage saying %q", err, tc.says)
			}
			if err != nil && strings.Contains(err.Error(), ErrBadPackage.Error()) {
				t.Errorf("the error's message changed: %v", err)
			}
		})
	}
	a, err := Parse(o.TarballURL("good.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the disk's failure", func(t *testing.T) {
		f := newFetcher(t, o, defaultLimits)
		f.TempDir = filepath.Join(t.TempDir(), "missing")
		if _, err := f.Fetch(context.Background(), a, io.Discard); err == nil || errors.Is(err, ErrBadPackage) {
			t.Errorf("Fetch = %v, want the disk's error, not ErrBadPackage", err)
		}
	})
	t.Run("over a limit", func(t *testing.T) {
		few := defaultLimits
		few.MaxTreeBytes = 100
		var le *LimitError
		if _, err := newFetcher(t, o, few).Fetch(context.Background(), a, io.Discard); !errors.As(err, &le) || errors.Is(err, ErrBadPackage) {
			t.Errorf("Fetch = %v, want a LimitError, not ErrBadPackage", err)
		}
	})
	t.Run("context ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := newFetcher(t, o, defaultLimits).Fetch(ctx, a, io.Discard); err == nil || errors.Is(err, ErrBadPackage) {
			t.Errorf("Fetch = %v, want the context's error, not ErrBadPackage", err)
		}
	})
}

package modsource

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// dotGitSpellings are names that a client's file system takes for .git:
// in another case (macOS and Windows compare names without case), with
// the dots and spaces Windows drops from a name's end, with an NTFS
// stream, as its NTFS short name, and with code points HFS+ ignores.
// Each holds a Git configuration whose core.fsmonitor is a command:
// where it is taken for .git, any git command run in the module runs it.
var dotGitSpellings = []string{
	".GIT", ".Git", "sub/.gIt", ".git.", ".git ", ".git. .", ".git::$INDEX_ALLOCATION", "GIT~1", "git~1",
	".g\u200cit", "\ufeff.git",
}

// TestFetchLeavesOutEverySpellingOfDotGit: a tarball or a local module
// directory holding a directory that a client's file system takes for
// .git gives a package without it, as it gives one without .git (a Git
// tree holding one is refused whole by go-git); a package as a bundle or
// the cache could hold it, with such an entry, is refused.
func TestFetchLeavesOutEverySpellingOfDotGit(t *testing.T) {
	needGit(t)
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	const config = "[core]\n\tfsmonitor = touch /tmp/pwned\n"
	tree := fakeorigin.GitTree{Files: map[string][]byte{"main.tf": []byte("# module\n")}}
	var entries []fakeorigin.TarEntry
	for _, g := range dotGitSpellings {
		tree.Files[g+"/config"] = []byte(config)
		entries = append(entries, fakeorigin.TarEntry{Name: g + "/config", Body: config})
	}
	entries = append(entries, fakeorigin.TarEntry{Name: "main.tf", Body: "# module\n"})
	if _, err := o.AddGitTree("dotgit", tree, "v1"); err != nil {
		t.Fatal(err)
	}
	o.AddTarball("dotgit.tar.gz", fakeorigin.TarGzEntries(entries))
	for _, tc := range []struct{ name, location string }{
		{"git tree", "git::" + o.GitURL("dotgit") + "?ref=v1"},
		{"tarball", o.TarballURL("dotgit.tar.gz")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Parse(tc.location)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, err = newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, &buf)
			if err != nil {
				// go-git's tree walker refuses such a tree whole, as Git
				// refuses to check it out.
				if !strings.Contains(err.Error(), "invalid path") {
					t.Errorf("refused for another reason: %v", err)
				}
				return
			}
			files := readTarGz(t, buf.Bytes())
			for name := range files {
				if name != "main.tf" && name != "sub/" {
					t.Errorf("the package holds %q", name)
				}
			}
		})
	}
	for _, g := range dotGitSpellings {
		t.Run("whole package with "+g, func(t *testing.T) {
			pkg := fakeorigin.TarGzEntries([]fakeorigin.TarEntry{
				{Name: "main.tf", Body: "# module\n"},
				{Name: g + "/config", Body: config},
			})
			dir := t.TempDir()
			err := Unpack(context.Background(), bytes.NewReader(pkg), dir, defaultLimits)
			if !errors.Is(err, safetree.ErrUnsafe) || !strings.Contains(err.Error(), ".git") {
				t.Errorf("Unpack = %v, want a refusal of the entry under .git", err)
			}
			if err := CheckPackageLinks(context.Background(), bytes.NewReader(pkg), defaultLimits); !errors.Is(err, safetree.ErrUnsafe) {
				t.Errorf("CheckPackageLinks = %v, want a refusal", err)
			}
		})
	}
	t.Run("local directory", func(t *testing.T) {
		dir := t.TempDir()
		for _, g := range append(dotGitSpellings, ".git") {
			p := filepath.Join(dir, filepath.FromSlash(g), "config")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(config), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte("# module\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := PackDir(context.Background(), dir, t.TempDir(), &buf, defaultLimits); err != nil {
			t.Fatal(err)
		}
		for name := range readTarGz(t, buf.Bytes()) {
			if name != "main.tf" && name != "sub/" {
				t.Errorf("the package holds %q", name)
			}
		}
	})
}

// TestIsDotGit: the spellings of .git, and names that only look like it
// and are kept (.github, .gitignore, .gitmodules, a repository's name).
func TestIsDotGit(t *testing.T) {
	for _, g := range append(dotGitSpellings, ".git", ".GIT::$DATA", "Git~1.", "\u200e.\u202aG\u206ai\ufefft\u200f") {
		g = g[strings.LastIndex(g, "/")+1:]
		if !isDotGit(g) {
			t.Errorf("isDotGit(%q) = false", g)
		}
	}
	for _, n := range []string{".github", ".gitignore", ".gitmodules", ".gitattributes", "git", "gitx", "a.git", ".git~1", "git~2", ".g1t", "..git"} {
		if isDotGit(n) {
			t.Errorf("isDotGit(%q) = true", n)
		}
	}
}

// A package kept before names with control characters were refused is
// refused by CheckPackageLinks as by Unpack: it is the check a stored
// package passes before it is served.
func TestCheckPackageLinksRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"a\x1b]0;x\x07.tf", "dir\x7f/main.tf", "\u009bname"} {
		pkg := fakeorigin.TarGzEntries([]fakeorigin.TarEntry{{Name: "main.tf", Body: "#\n"}, {Name: name, Body: "#\n"}})
		if err := CheckPackageLinks(context.Background(), bytes.NewReader(pkg), defaultLimits); !errors.Is(err, safetree.ErrUnsafe) {
			t.Errorf("%q: CheckPackageLinks = %v, want a refusal", name, err)
		}
		if err := Unpack(context.Background(), bytes.NewReader(pkg), t.TempDir(), defaultLimits); !errors.Is(err, safetree.ErrUnsafe) {
			t.Errorf("%q: Unpack = %v, want a refusal", name, err)
		}
	}
	ok := fakeorigin.TarGzEntries([]fakeorigin.TarEntry{{Name: "main.tf", Body: "#\n"}, {Name: "modules/vpc/main.tf", Body: "#\n"}})
	if err := CheckPackageLinks(context.Background(), bytes.NewReader(ok), defaultLimits); err != nil {
		t.Errorf("a clean package: %v", err)
	}
}

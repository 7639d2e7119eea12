package modsource

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestSubmoduleSamePathLastSectionWins: where two .gitmodules sections
// name one path, the submodule is fetched from the URL of the last one,
// as `git submodule update --init` (go-getter's) takes it, every time.
// The URL was taken from either section, as go-git's map of them gave
// it: the package a client got depended on the fetch, and differed from
// a direct install's half of the time.
func TestSubmoduleSamePathLastSectionWins(t *testing.T) {
	o, leaf := originWithLeaf(t)
	if _, err := o.AddGitTree("elsewhere", fakeorigin.GitTree{Files: map[string][]byte{"main.tf": []byte("# elsewhere\n")}}, "v1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		repo, first, last string
		ok                bool
	}{
		{"leaflast", "../elsewhere.git", "../leaf.git", true},
		{"leaffirst", "../leaf.git", "../elsewhere.git", false},
	} {
		gm := "[submodule \"a\"]\n\tpath = sub\n\turl = " + tc.first + "\n[submodule \"b\"]\n\tpath = sub\n\turl = " + tc.last + "\n"
		if _, err := o.AddGitTree(tc.repo, fakeorigin.GitTree{
			Files:      map[string][]byte{"main.tf": []byte("# module\n"), ".gitmodules": []byte(gm)},
			Submodules: map[string]string{"sub": leaf},
		}, "v1"); err != nil {
			t.Fatal(err)
		}
		a, _ := Parse("git::" + o.GitURL(tc.repo) + "?ref=v1")
		f := newFetcher(t, o, defaultLimits)
		for i := range 12 {
			var buf bytes.Buffer
			_, err := f.Fetch(context.Background(), a, &buf)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("%s, fetch %d: %v, want the submodule of the last section (the leaf)", tc.repo, i, err)
			case tc.ok && readTarGz(t, buf.Bytes())["sub/main.tf"] != "# leaf\n":
				t.Fatalf("%s, fetch %d: package = %v, want the leaf's main.tf in sub", tc.repo, i, readTarGz(t, buf.Bytes()))
			case !tc.ok && err == nil:
				t.Fatalf("%s, fetch %d: fetched the submodule from the first section's URL; want it asked of the last one's, which lacks the commit", tc.repo, i)
			}
		}
	}
}

// TestSubmodulePathMatchedAsWritten: a .gitmodules section's path names
// the tree's submodule as Git matches them, exactly as written: "./sub"
// and "sub/" name no submodule sub, and `git submodule update --init`
// (go-getter's) fails ("No url found for submodule path 'sub' in
// .gitmodules"), so the fetch fails too; where one section says "sub"
// and a later one "./sub", the submodule is the first one's. The mirror
// matched the path cleaned: it served a package where a direct install
// failed, or a submodule from the other section's URL.
func TestSubmodulePathMatchedAsWritten(t *testing.T) {
	o, leaf := originWithLeaf(t)
	if _, err := o.AddGitTree("elsewhere", fakeorigin.GitTree{Files: map[string][]byte{"main.tf": []byte("# elsewhere\n")}}, "v1"); err != nil {
		t.Fatal(err)
	}
	section := func(name, path, url string) string {
		return "[submodule \"" + name + "\"]\n\tpath = " + path + "\n\turl = " + url + "\n"
	}
	for _, tc := range []struct {
		repo, gitmodules string
		ok               bool
	}{
		{"dotslash", section("a", "./sub", "../leaf.git"), false},
		{"trailing", section("a", "sub/", "../leaf.git"), false},
		{"aswrittenfirst", section("a", "sub", "../leaf.git") + section("b", "./sub", "../elsewhere.git"), true},
	} {
		t.Run(tc.repo, func(t *testing.T) {
			if _, err := o.AddGitTree(tc.repo, fakeorigin.GitTree{
				Files:      map[string][]byte{"main.tf": []byte("# module\n"), ".gitmodules": []byte(tc.gitmodules)},
				Submodules: map[string]string{"sub": leaf},
			}, "v1"); err != nil {
				t.Fatal(err)
			}
			a, _ := Parse("git::" + o.GitURL(tc.repo) + "?ref=v1")
			var buf bytes.Buffer
			_, err := newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, &buf)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("Fetch: %v, want the submodule of the section naming sub as written (the leaf)", err)
			case tc.ok && readTarGz(t, buf.Bytes())["sub/main.tf"] != "# leaf\n":
				t.Fatalf("package = %v, want the leaf's main.tf in sub", readTarGz(t, buf.Bytes()))
			case !tc.ok && (!errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), `submodule "sub" is not in .gitmodules`)):
				t.Fatalf("Fetch: %v, want the package refused: no section names sub as written", err)
			}
		})
	}
}

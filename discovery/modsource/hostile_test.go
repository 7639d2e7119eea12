package modsource

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// victimBytes is what the victim file beside the scratch directory holds.
const victimBytes = "operator's key\n"

// hostileScene is a fetch's scratch directory (Fetcher.TempDir) with,
// beside it, an empty victim directory and a victim file (0600).
type hostileScene struct{ base, scratch string }

func newHostileScene(t *testing.T) hostileScene {
	t.Helper()
	base := t.TempDir()
	s := hostileScene{base: base, scratch: filepath.Join(base, "scratch")}
	for _, d := range []string{s.scratch, filepath.Join(base, "victim")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "victim.txt"), []byte(victimBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// untouched fails t unless nothing beside the scratch directory changed.
func (s hostileScene) untouched(t *testing.T) {
	t.Helper()
	if ents, err := os.ReadDir(filepath.Join(s.base, "victim")); err != nil || len(ents) > 0 {
		t.Errorf("the victim directory beside the scratch directory holds %v (%v)", ents, err)
	}
	p := filepath.Join(s.base, "victim.txt")
	b, err := os.ReadFile(p)
	fi, serr := os.Lstat(p)
	if err != nil || serr != nil || string(b) != victimBytes || fi.Mode() != 0o600 {
		t.Errorf("the victim file beside the scratch directory changed: %q (%v %v)", b, err, serr)
	}
	if ents, _ := os.ReadDir(s.base); len(ents) != 3 {
		t.Errorf("beside the scratch directory: %v, want only scratch, victim and victim.txt", ents)
	}
}

// chainDepth is how deep the hostile trees' directory is: deep enough
// that their links, checked against their names only, seem to stay in.
const chainDepth = 4

// chainLinks are the links of the hostile trees, for a package whose top
// is climb levels below the directory holding the victims: up, a link
// from a deep directory back to the top; esc, made through up, to the
// victim directory; keys, made through up, to the victims' directory.
// Checked against their names alone, each stays inside.
func chainLinks(sep string, climb int) (deep string, links [][2]string, files [][2]string) {
	deep = strings.Repeat("d/", chainDepth-1) + "d"
	up := deep + "/up"
	links = [][2]string{
		{up, strings.TrimSuffix(strings.Repeat("../", chainDepth), "/")},
		{up + sep + "esc", strings.Repeat("../", climb) + "victim"},
		{up + sep + "keys", strings.TrimSuffix(strings.Repeat("../", climb), "/")},
	}
	files = [][2]string{
		{up + sep + "esc" + sep + "pwned", "pwned\n"},
		{up + sep + "keys" + sep + "victim.txt", "replaced\n"},
	}
	return deep, links, files
}

// hostileTarGz is a tarball of the link chain (chainLinks).
func hostileTarGz(climb int) []byte {
	deep, links, files := chainLinks("/", climb)
	entries := []fakeorigin.TarEntry{{Name: "main.tf", Body: "# clean\n"}, {Name: deep + "/", Type: tar.TypeDir}}
	for _, l := range links {
		entries = append(entries, fakeorigin.TarEntry{Name: l[0], Type: tar.TypeSymlink, Target: l[1]})
	}
	for _, f := range files {
		entries = append(entries, fakeorigin.TarEntry{Name: f[0], Body: f[1]})
	}
	return fakeorigin.TarGzEntries(entries)
}

// hostileGitTree is a Git tree of the link chain: names hold backslashes
// where the tarball has slashes (Git's trees cannot put an entry under a
// link, and a backslash is a separator to the tree writer).
func hostileGitTree(climb int) fakeorigin.GitTree {
	_, links, files := chainLinks(`\`, climb)
	tree := fakeorigin.GitTree{Files: map[string][]byte{"main.tf": []byte("# clean\n")}, Links: map[string]string{}}
	for _, l := range links {
		tree.Links[l[0]] = l[1]
	}
	for _, f := range files {
		tree.Files[f[0]] = []byte(f[1])
	}
	return tree
}

// noLinkOut fails t unless every link of the package pkg resolves inside
// it.
func noLinkOut(t *testing.T, pkg []byte) {
	t.Helper()
	if len(pkg) == 0 {
		return
	}
	if err := CheckPackageLinks(context.Background(), bytes.NewReader(pkg), defaultLimits); err != nil {
		t.Errorf("the package holds a link out of it: %v", err)
	}
}

// TestFetchRefusesHostileTrees is the table of module sources that try
// to write outside the scratch directory: a tarball, a Git tree, and a
// Git submodule of a clean repository, each with the link chain. Each
// fetch is refused or yields a package with no link out; nothing beside
// the scratch directory changes.
func TestFetchRefusesHostileTrees(t *testing.T) {
	needGit(t)
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	// The package's top is scratch/tfmirror-module-*/tree: 3 levels
	// below the victims' directory.
	const climb = 3
	o.AddTarball("chain.tar.gz", hostileTarGz(climb))
	if _, err := o.AddGitTree("chain", hostileGitTree(climb), "v1"); err != nil {
		t.Fatal(err)
	}
	// The submodule's top is the parent's top/sub: one level more.
	subCommit, err := o.AddGitTree("subchain", hostileGitTree(climb+1), "v1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.AddGitTree("clean", fakeorigin.GitTree{
		Files:      map[string][]byte{"main.tf": []byte("# clean\n"), ".gitmodules": []byte("[submodule \"sub\"]\n\tpath = sub\n\turl = ../subchain.git\n")},
		Submodules: map[string]string{"sub": subCommit},
	}, "v1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, location string }{
		{"tarball", o.TarballURL("chain.tar.gz")},
		{"git tree", "git::" + o.GitURL("chain") + "?ref=v1"},
		{"git submodule of a clean repository", "git::" + o.GitURL("clean") + "?ref=v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHostileScene(t)
			f := newFetcher(t, o, defaultLimits)
			f.TempDir = s.scratch
			a, err := Parse(tc.location)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, err = f.Fetch(context.Background(), a, &buf)
			s.untouched(t)
			if err == nil {
				noLinkOut(t, buf.Bytes())
			} else if !errors.Is(err, safetree.ErrUnsafe) {
				t.Errorf("refused for another reason than its links: %v", err)
			} else {
				t.Logf("refused: %v", err)
			}
			if ents, _ := os.ReadDir(s.scratch); len(ents) > 0 {
				t.Errorf("the fetch left %v in the scratch directory", ents)
			}
		})
	}
}

// TestUnpackRefusesHostilePackages: a package (as a bundle or the cache
// could hold) with the link chain unpacks nothing outside dir, and is
// refused.
func TestUnpackRefusesHostilePackages(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkg  []byte
	}{
		// dir is base/scratch/pkg: the victims are 2 levels up.
		{"link chain", hostileTarGz(2)},
		{"link out", fakeorigin.TarGzEntries([]fakeorigin.TarEntry{{Name: "l", Type: tar.TypeSymlink, Target: "../../victim.txt"}})},
		{"chain of links out", fakeorigin.TarGzEntries([]fakeorigin.TarEntry{
			{Name: "a", Type: tar.TypeSymlink, Target: "b/c"},
			{Name: "b/c", Type: tar.TypeSymlink, Target: "../../.."},
		})},
		{"absolute link", fakeorigin.TarGzEntries([]fakeorigin.TarEntry{{Name: "l", Type: tar.TypeSymlink, Target: "/etc"}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHostileScene(t)
			dir := filepath.Join(s.scratch, "pkg")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			err := Unpack(context.Background(), bytes.NewReader(tc.pkg), dir, defaultLimits)
			if err == nil {
				t.Errorf("unpacked")
			}
			s.untouched(t)
			links, lerr := safetree.Links(os.DirFS(dir), 0)
			if lerr != nil || len(links) > 0 {
				t.Errorf("links left in dir: %v (%v)", links, lerr)
			}
			if err := CheckPackageLinks(context.Background(), bytes.NewReader(tc.pkg), defaultLimits); err == nil {
				t.Errorf("CheckPackageLinks accepts it")
			}
		})
	}
}

// TestWriteTarGzRefusesLinksOut: the normalized package never holds a
// link that resolves outside it, whatever the tree it packs holds.
func TestWriteTarGzRefusesLinksOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links map[string]string
	}{
		{"link out", map[string]string{"l": "../x"}},
		{"chain out", map[string]string{"a": "b", "b": "d/../.."}},
		{"absolute", map[string]string{"l": "/etc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, target := range tc.links {
				p := filepath.Join(root, name)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := writeTarGz(root, func(string) bool { return false }, io.Discard); err == nil || !strings.Contains(err.Error(), "link") {
				t.Errorf("writeTarGz = %v, want a refusal of the link", err)
			}
		})
	}
}

// TestFetchRefusesDeepTrees: a module archive from a source host (and a
// package as a bundle brings it) with an entry nested past
// safetree.MaxDepth is refused at once; and the directories its entries
// imply, which no entry names, count against Limits.MaxEntries as the
// directories named do: 10 entries 20 directories deep make 200.
func TestFetchRefusesDeepTrees(t *testing.T) {
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	deep := fakeorigin.TarGzEntries([]fakeorigin.TarEntry{{Name: strings.Repeat("a/", 300_000) + "main.tf", Body: "# deep\n"}})
	var wide []fakeorigin.TarEntry
	for i := range 10 {
		wide = append(wide, fakeorigin.TarEntry{Name: fmt.Sprintf("d%d/", i) + strings.Repeat("a/", 19) + "main.tf", Body: "# x\n"})
	}
	implied := fakeorigin.TarGzEntries(wide)
	o.AddTarball("deep.tar.gz", deep)
	o.AddTarball("implied.tar.gz", implied)
	for _, tc := range []struct {
		name string
		pkg  []byte
		want func(error) bool
	}{
		{"deep", deep, func(err error) bool { return errors.Is(err, safetree.ErrUnsafe) }},
		{"implied", implied, func(err error) bool { var le *LimitError; return errors.As(err, &le) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Parse(o.TarballURL(tc.name + ".tar.gz"))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, io.Discard)
			if !tc.want(err) {
				t.Errorf("Fetch: %v", err)
			}
			if err := Unpack(context.Background(), bytes.NewReader(tc.pkg), t.TempDir(), defaultLimits); !tc.want(err) {
				t.Errorf("Unpack: %v", err)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %v to refuse", d)
			}
		})
	}
}

// countingTransport counts the requests sent through it.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// TestFetchGitBoundsSubmodules: a repository naming many submodules
// (each a fetch, two requests or more, to a host the repository names)
// is refused before any of them is fetched once it names more than
// maxSubmodules in all: before, a package of a few kilobytes made the
// mirror send two requests per entry allowed (--module-max-files,
// 20,000), to hosts of its choosing, for one client's request.
func TestFetchGitBoundsSubmodules(t *testing.T) {
	needGit(t)
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	leaf, err := o.AddGitTree("leaf", fakeorigin.GitTree{Files: map[string][]byte{"main.tf": []byte("# leaf\n")}}, "v1")
	if err != nil {
		t.Fatal(err)
	}
	tree := fakeorigin.GitTree{Files: map[string][]byte{"main.tf": []byte("# many\n")}, Submodules: map[string]string{}}
	var gm strings.Builder
	for i := range maxSubmodules + 1 {
		p := fmt.Sprintf("s%03d", i)
		tree.Submodules[p] = leaf
		fmt.Fprintf(&gm, "[submodule %q]\n\tpath = %s\n\turl = ../leaf.git\n", p, p)
	}
	tree.Files[".gitmodules"] = []byte(gm.String())
	if _, err := o.AddGitTree("many", tree, "v1"); err != nil {
		t.Fatal(err)
	}
	limits := defaultLimits
	limits.MaxEntries = 1000
	f := newFetcher(t, o, limits)
	ct := &countingTransport{next: f.HTTP.Transport}
	f.HTTP.Transport = ct
	a, _ := Parse("git::" + o.GitURL("many") + "?ref=v1")
	var le *LimitError
	if _, err := f.Fetch(context.Background(), a, io.Discard); !errors.As(err, &le) || !strings.Contains(err.Error(), "submodules") {
		t.Errorf("Fetch: %v, want a LimitError about its submodules", err)
	}
	if n := ct.n.Load(); n > 4 {
		t.Errorf("%d requests sent, want those of the repository itself", n)
	}
}

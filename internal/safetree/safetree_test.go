package safetree

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// op is one entry given to a Writer.
type op struct {
	kind         byte // 'd' Dir, 'f' File, 'l' Symlink
	name, target string
}

// scene is a tree's directory with, beside it, an empty victim directory
// and a victim file: from the tree, "../victim" and "../victim.txt".
type scene struct {
	base, root string
}

const victimBytes = "keep me\n"

func newScene(t *testing.T) scene {
	t.Helper()
	base := t.TempDir()
	s := scene{base: base, root: filepath.Join(base, "root")}
	for _, d := range []string{s.root, filepath.Join(base, "victim")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "victim.txt"), []byte(victimBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// untouched fails t unless the victim directory is empty and the victim
// file keeps its bytes and mode.
func (s scene) untouched(t *testing.T) {
	t.Helper()
	if ents, err := os.ReadDir(filepath.Join(s.base, "victim")); err != nil || len(ents) > 0 {
		t.Errorf("the victim directory beside the tree holds %v (%v)", ents, err)
	}
	p := filepath.Join(s.base, "victim.txt")
	b, err := os.ReadFile(p)
	fi, serr := os.Lstat(p)
	if err != nil || serr != nil || string(b) != victimBytes || fi.Mode() != 0o600 {
		t.Errorf("the victim file beside the tree changed: %q %v (%v %v)", b, fi.Mode(), err, serr)
	}
	if ents, _ := os.ReadDir(s.base); len(ents) != 3 {
		t.Errorf("beside the tree: %v, want only root, victim and victim.txt", ents)
	}
}

// linksInside fails t unless every link under the tree resolves inside
// it, by the system's own resolution too.
func (s scene) linksInside(t *testing.T) {
	t.Helper()
	links, err := Links(os.DirFS(s.root), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckLinks(links); err != nil {
		t.Errorf("the tree holds a link out: %v", err)
	}
	rootReal, _ := filepath.EvalSymlinks(s.root)
	for name := range links {
		real, err := filepath.EvalSymlinks(filepath.Join(s.root, name))
		if err != nil {
			continue // dangling: it leads nowhere
		}
		if real != rootReal && !strings.HasPrefix(real, rootReal+string(filepath.Separator)) {
			t.Errorf("the link %s resolves to %s, outside the tree", name, real)
		}
	}
}

// run gives ops to a Writer on s.root, then Finish, and returns the
// first error.
func (s scene) run(t *testing.T, opts Options, ops []op) error {
	t.Helper()
	w, err := Open(s.root, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, o := range ops {
		switch o.kind {
		case 'd':
			err = w.Dir(o.name)
		case 'f':
			err = w.File(o.name, 0o644, int64(len(o.target)), strings.NewReader(o.target))
		case 'l':
			err = w.Symlink(o.name, o.target)
		}
		if err != nil {
			return err
		}
	}
	return w.Finish()
}

// TestWriterRefusesHostileTrees is the table of hostile trees: each is
// refused, writes nothing beside the tree, and leaves no link out of it.
func TestWriterRefusesHostileTrees(t *testing.T) {
	for _, tc := range []struct {
		name string
		// onDisk are links already in the tree's directory (name -> target).
		onDisk map[string]string
		ops    []op
		opts   Options
	}{
		{name: "link chain escape: a link back to the top, a link out created through it, a file through both", ops: []op{
			{'d', "a/b/c/", ""},
			{'l', "a/b/c/up", "../../.."},
			{'l', "a/b/c/up/esc", "../../../victim"},
			{'f', "a/b/c/up/esc/pwned", "x"},
		}},
		{name: "link chain escape with backslashes", ops: []op{
			{'l', "up", "."},
			{'l', `up\esc`, "../victim"},
			{'f', `up\esc\pwned`, "x"},
		}},
		{name: "link back to the top then out, checked where it really is", ops: []op{
			{'l', "d/x/up", "../.."},
			{'l', "d/out", "x/up/../victim"},
		}},
		{name: "link to a link out", ops: []op{
			{'l', "a", "b"},
			{'l', "b", "../victim"},
		}},
		{name: "link to a link to a link out", ops: []op{
			{'l', "a", "d/b"},
			{'l', "d/b", "../c"},
			{'l', "c", "../victim.txt"},
			{'f', "z", "after"},
		}},
		{name: "link out then a file of another name", ops: []op{
			{'l', "v", "../victim.txt"},
			{'f', "other", "x"},
		}},
		{name: "parent is a link already on disk", onDisk: map[string]string{"up": "../victim"}, ops: []op{
			{'f', "up/pwned", "x"},
		}},
		{name: "parent is a link given before", ops: []op{
			{'l', "l", "."},
			{'f', "l/pwned", "x"},
		}},
		{name: "directory under a link", ops: []op{
			{'l', "l", "."},
			{'d', "l/sub/", ""},
		}},
		{name: "absolute link", ops: []op{{'l', "abs", "/etc/passwd"}}},
		{name: "absolute link, Windows drive", ops: []op{{'l', "abs", `C:\Windows`}}},
		{name: "absolute link, backslash", ops: []op{{'l', "abs", `\etc\passwd`}}},
		{name: "link climbing out", ops: []op{{'l', "a/b/l", "../../../victim"}}},
		{name: "link climbing out with backslashes", ops: []op{{'l', "l", `..\victim`}}},
		{name: "link loop", ops: []op{{'l', "a", "b"}, {'l', "b", "a"}}},
		{name: "empty link", ops: []op{{'l', "e", ""}}},
		{name: "dot-dot file name", ops: []op{{'f', "../victim/pwned", "x"}}},
		{name: "dot-dot inside a file name", ops: []op{{'f', "a/../../victim.txt", "x"}}},
		{name: "dot-dot directory name", ops: []op{{'d', "../victim/d/", ""}}},
		{name: "dot-dot link name", ops: []op{{'l', "../victim/l", "."}}},
		{name: "absolute file name", ops: []op{{'f', "/victim.txt", "x"}}},
		// A name that is not UTF-8 could not be walked again (io/fs).
		{name: "file under a directory whose name is not UTF-8", ops: []op{{'f', "\xff/0", "x"}}},
		{name: "link whose name is not UTF-8", ops: []op{{'l', "\xfe", "."}}},
		// A control character in a name reaches terminals (a file name in
		// an error) as a command to them, and Windows cannot make it.
		{name: "file named with an escape sequence", ops: []op{{'f', "title\x1b]0;pwned\x07.tf", "x"}}},
		{name: "directory named with a newline", ops: []op{{'d', "a\nb/", ""}}},
		{name: "link named with a C1 control character", ops: []op{{'l', "a\u009bb", "."}}},
		{name: "file named with DEL", ops: []op{{'f', "a\x7f", "x"}}},
		{name: "dir then link of the same name", ops: []op{
			{'d', "d/", ""},
			{'f', "d/x", "x"},
			{'l', "d", "../victim"},
		}},
		{name: "dir then link of the same name, the link inside", ops: []op{
			{'d', "d/", ""},
			{'l', "d", "."},
		}},
		{name: "link then dir of the same name", ops: []op{
			{'l', "d", "."},
			{'d', "d/", ""},
		}},
		{name: "file then dir of the same name", ops: []op{
			{'f', "f", "x"},
			{'d', "f/", ""},
		}},
		{name: "entry under a file", ops: []op{
			{'f', "f", "x"},
			{'f', "f/g", "x"},
		}},
		{name: "file at a directory's name", ops: []op{
			{'d', "d/", ""},
			{'f', "d", "x"},
		}},
		{name: "second file of one name when replacing is refused", opts: Options{NoReplace: true}, ops: []op{
			{'f', "f", "1"},
			{'f', "f", "2"},
		}},
		{name: "existing victim link on disk kept out by a later link out", onDisk: map[string]string{"v": "../victim.txt"}, ops: []op{
			{'f', "ok", "x"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScene(t)
			for name, target := range tc.onDisk {
				if err := os.Symlink(target, filepath.Join(s.root, name)); err != nil {
					t.Fatal(err)
				}
			}
			err := s.run(t, tc.opts, tc.ops)
			if err == nil {
				t.Errorf("accepted")
			}
			s.untouched(t)
			if tc.onDisk == nil {
				s.linksInside(t)
			}
		})
	}
}

// TestWriterReplacesTheNameItself: a later file replaces a file or a link
// of its name, never what the link points to.
func TestWriterReplacesTheNameItself(t *testing.T) {
	for _, tc := range []struct {
		name   string
		onDisk map[string]string
		ops    []op
	}{
		{name: "file over a link on disk to the victim file", onDisk: map[string]string{"f": "../victim.txt"}, ops: []op{{'f', "f", "new"}}},
		{name: "file over a link given before", ops: []op{{'l', "f", "../victim.txt"}, {'f', "f", "new"}}},
		{name: "file over a file", ops: []op{{'f', "f", "old"}, {'f', "f", "new"}}},
		{name: "link over a file, then a file again", ops: []op{{'f', "f", "old"}, {'l', "f", "."}, {'f', "f", "new"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScene(t)
			for name, target := range tc.onDisk {
				if err := os.Symlink(target, filepath.Join(s.root, name)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.run(t, Options{}, tc.ops); err != nil {
				t.Fatal(err)
			}
			s.untouched(t)
			s.linksInside(t)
			fi, err := os.Lstat(filepath.Join(s.root, "f"))
			b, _ := os.ReadFile(filepath.Join(s.root, "f"))
			if err != nil || !fi.Mode().IsRegular() || string(b) != "new" {
				t.Errorf("f: %v %q (%v), want the later file", fi, b, err)
			}
		})
	}
}

// TestWriterWritesATree: what a good tree gives, links inside (chains
// included) created last, modes normalized.
func TestWriterWritesATree(t *testing.T) {
	s := newScene(t)
	err := s.run(t, Options{}, []op{
		{'l', "modules/current", "v2"},
		{'l', "latest", "modules/current/main.tf"},
		{'f', "modules/v2/main.tf", "# v2"},
		{'l', "modules/v2/self", "../../modules/v2"},
		{'d', "./", ""},
		{'d', "empty/", ""},
		{'l', "dangling", "missing/file"},
		{'f', `win\style.tf`, "# w"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.untouched(t)
	s.linksInside(t)
	for name, want := range map[string]string{"latest": "# v2", "modules/current/self/main.tf": "# v2", "win/style.tf": "# w"} {
		if b, err := os.ReadFile(filepath.Join(s.root, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(s.root, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty/: %v", err)
	}

	// Modes: 0755 for any execute bit, else 0644.
	w, err := Open(s.root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for name, perm := range map[string]fs.FileMode{"x.sh": 0o4711, "r.txt": 0o600} {
		if err := w.File(name, perm, 0, strings.NewReader("")); err != nil {
			t.Fatal(err)
		}
	}
	mask := umask()
	for name, want := range map[string]fs.FileMode{"x.sh": 0o755, "r.txt": 0o644} {
		if fi, err := os.Lstat(filepath.Join(s.root, name)); err != nil || fi.Mode() != want&^mask {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), want)
		}
	}
	if err := w.File("short", 0, 10, strings.NewReader("abc")); err == nil {
		t.Errorf("a file shorter than its size was accepted")
	}
}

// TestCheckLinks is the table of link sets, resolved as the system would.
func TestCheckLinks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links map[string]string
		ok    bool
	}{
		{"none", nil, true},
		{"sibling", map[string]string{"a/l": "../b"}, true},
		{"top", map[string]string{"a/b/l": "../.."}, true},
		{"chain inside", map[string]string{"a": "b", "b": "c/d", "c/d": ".."}, true},
		{"through a link to a deeper dir and back up", map[string]string{"l": "x/y", "m": "l/../.."}, true},
		{"through a link to the top and down again", map[string]string{"a/l": "..", "a/m": "l/a/l/a"}, true},
		{"through a link to the top and up", map[string]string{"a/l": "..", "a/m": "l/.."}, false},
		{"one level out", map[string]string{"l": ".."}, false},
		{"out from a subdir", map[string]string{"a/l": "../../x"}, false},
		{"names under a link: the real parent counts", map[string]string{"a/b/up": "../..", "a/b/up/esc": "../victim"}, false},
		{"chain ending outside", map[string]string{"a": "b", "b": "c", "c": "../x"}, false},
		{"up the link's real parent", map[string]string{"l": "d/e", "m": "l/../../.."}, false},
		{"loop", map[string]string{"a": "b/c", "b": "a"}, false},
		{"self", map[string]string{"a": "a"}, false},
		{"absolute", map[string]string{"a": "/"}, false},
		{"backslash out", map[string]string{"a": `..\..`}, false},
		{"name out", map[string]string{"../a": "."}, false},
		// macOS and Windows tell no case apart: there d/X is the link d/x,
		// and the target climbs out of the tree.
		{"out where case is not told apart", map[string]string{"d/x": "..", "d/l": "X/../.."}, false},
		{"out through a directory named in another case", map[string]string{"a/b/c/d/x": "../../../..", "a/b/c/d/l": "X/../../../../.."}, false},
		{"two links one name but for case", map[string]string{"A": "b", "a": "c/d"}, false},
		// macOS compares names in one Unicode normalization, and leaves
		// out some code points; its case folding is Unicode's.
		{"out where normalization is not told apart", map[string]string{"d/é": "..", "d/l": "é/../.."}, false},
		{"out through a code point HFS+ ignores", map[string]string{"d/x": "..", "d/l": "x‌/../.."}, false},
		{"out through the Kelvin sign", map[string]string{"d/k": "..", "d/l": "K/../.."}, false},
		{"names in other cases inside", map[string]string{"Docs": "guide", "docs2/Up": "..", "README": "DOCS2/../readme.md"}, true},
		// Where case is not told apart docs/up is made through the link
		// Docs, as guide/up, which still leads inside.
		{"a link and a directory one name but for case", map[string]string{"Docs": "guide", "docs/up": ".."}, true},
		{"a link and a directory one name but for case, out", map[string]string{"Docs": "a/b", "docs/up": "../../.."}, false},
		{"two links one name but for case, one target", map[string]string{"L": "sub", "l": "SUB"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckLinks(tc.links)
			if (err == nil) != tc.ok {
				t.Errorf("CheckLinks(%v) = %v, want ok %v", tc.links, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrUnsafe) {
				t.Errorf("error %v does not match ErrUnsafe", err)
			}
		})
	}
}

// TestWriterRefusesDeepNames: a name nested deeper than MaxDepth, longer
// than MaxNameBytes, or holding a directory or file name longer than
// MaxComponentBytes, is refused before anything of it is made
// (os.Root walks a name one directory at a time, so making a name of d
// directories costs in the order of d² system calls: a tar entry named
// "a/" 4,000 times took minutes), and a name at the bound is written.
func TestWriterRefusesDeepNames(t *testing.T) {
	for _, name := range []string{
		strings.Repeat("a/", MaxDepth) + "f",
		strings.Repeat("a/", 4000) + "f",
		strings.Repeat("a/", 500_000) + "f",
		strings.Repeat("x", MaxNameBytes-2) + "/f/g",
		// A directory or file name the system refuses to make
		// (ENAMETOOLONG): refused as the tree's, not failed as the disk's.
		strings.Repeat("x", MaxComponentBytes+1),
		"d/" + strings.Repeat("x", MaxComponentBytes+1) + "/f",
	} {
		s := newScene(t)
		w, err := Open(s.root, Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = w.File(name, 0o644, 1, strings.NewReader("x"))
		if !errors.Is(err, ErrUnsafe) {
			t.Errorf("a name of %d bytes: %v, want ErrUnsafe", len(name), err)
		}
		if err := w.Dir(name); !errors.Is(err, ErrUnsafe) {
			t.Errorf("a directory of %d bytes: %v, want ErrUnsafe", len(name), err)
		}
		w.Close()
		if ents, _ := os.ReadDir(s.root); len(ents) > 0 {
			t.Errorf("a name of %d bytes refused left %v", len(name), ents)
		}
	}
	s := newScene(t)
	w, err := Open(s.root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.File(strings.Repeat("a/", MaxDepth-1)+"f", 0o644, 1, strings.NewReader("x")); err != nil {
		t.Errorf("a name %d deep: %v", MaxDepth, err)
	}
	if err := w.File("d/"+strings.Repeat("x", MaxComponentBytes), 0o644, 1, strings.NewReader("x")); err != nil {
		t.Errorf("a file name of %d bytes: %v", MaxComponentBytes, err)
	}
}

// TestWriterRefusesLinkTargetsTooLong: a link whose target is longer than
// the system makes one (Linux: 4,095 bytes) is refused as the tree's, not
// failed by the system at Finish; one at the bound is made.
func TestWriterRefusesLinkTargetsTooLong(t *testing.T) {
	target := func(n int) string { return strings.Repeat("./", (n-1)/2) + strings.Repeat("f", 2-n%2) }
	for _, n := range []int{maxTarget + 1, MaxNameBytes + 1} {
		s := newScene(t)
		w, err := Open(s.root, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(target(n)) != n {
			t.Fatalf("target of %d bytes, want %d", len(target(n)), n)
		}
		err = w.Symlink("l", target(n))
		if err == nil {
			err = w.Finish()
		}
		if !errors.Is(err, ErrUnsafe) {
			t.Errorf("a link target of %d bytes: %v, want ErrUnsafe", n, err)
		}
		w.Close()
	}
	s := newScene(t)
	w, err := Open(s.root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Symlink("l", target(maxTarget)); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Errorf("a link target of %d bytes: %v", maxTarget, err)
	}
}

// TestWriterAsksBeforeImpliedDirectories: a directory that no entry
// names, made because an entry lies under it, is made only once
// Options.ImpliedDir allows it, so that callers count it as an entry
// (and its room on disk): else one entry of a tar file could make
// MaxDepth directories, charged as one.
func TestWriterAsksBeforeImpliedDirectories(t *testing.T) {
	s := newScene(t)
	var asked []string
	budget := 4
	w, err := Open(s.root, Options{ImpliedDir: func(name string) error {
		asked = append(asked, name)
		if budget--; budget < 0 {
			return errors.New("too many")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Dir("top"); err != nil {
		t.Fatal(err)
	}
	if err := w.File("top/a/b/f", 0o644, 1, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.File("top/a/b/g", 0o644, 1, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"top/a", "top/a/b"}; strings.Join(asked, ",") != strings.Join(want, ",") {
		t.Errorf("asked about %v, want %v (a directory named by an entry, or made already, is not asked about)", asked, want)
	}
	if err := w.File("c/d/e/f", 0o644, 1, strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "too many") {
		t.Errorf("past the budget: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(s.root, "c/d/e")); err == nil {
		t.Errorf("a directory refused was made")
	}
}

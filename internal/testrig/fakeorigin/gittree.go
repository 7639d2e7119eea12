package fakeorigin

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// GitTree is a Git tree for AddGitTree.
type GitTree struct {
	// Files are path -> content.
	Files map[string][]byte
	// Links are path -> target: symbolic links.
	Links map[string]string
	// Submodules are path -> commit id of another repository (name it in
	// a .gitmodules of Files).
	Submodules map[string]string
}

// AddGitTree commits tree as the whole tree of Git repository repo,
// creating it on first use, on branch main, and tags the commit with
// tags. It writes the objects with Git's plumbing (hash-object, mktree,
// commit-tree), which checks no names, as a hostile repository's would
// be: a name's component may hold a backslash, and a path may be a link
// in one tree entry and lie under it in another. A repository made by
// AddGitTree is not given to AddGitRepo. It returns the commit id. It
// needs the git command.
func (o *Origin) AddGitTree(repo string, tree GitTree, tags ...string) (string, error) {
	m, err := o.gitState()
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bare := filepath.Join(m.gitRoot, repo+".git")
	if _, err := os.Stat(bare); os.IsNotExist(err) {
		if err := runGit("", "init", "-q", "--bare", "--initial-branch=main", bare); err != nil {
			return "", err
		}
		if err := runGit(bare, "config", "uploadpack.allowAnySHA1InWant", "true"); err != nil {
			return "", err
		}
	}
	// dirs: directory path ("" the top) -> its entries' mktree lines.
	dirs := map[string][]string{"": nil}
	add := func(p, line string) {
		dir, name := path.Split(p)
		dir = strings.TrimSuffix(dir, "/")
		dirs[dir] = append(dirs[dir], line+"\t"+name)
		for d := dir; d != ""; {
			if _, ok := dirs[d]; !ok {
				dirs[d] = nil
			}
			d = strings.TrimSuffix(path.Dir(d), ".")
		}
	}
	for p, content := range tree.Files {
		id, err := gitOut(bare, content, "hash-object", "-w", "--stdin")
		if err != nil {
			return "", err
		}
		add(p, "100644 blob "+id)
	}
	for p, target := range tree.Links {
		id, err := gitOut(bare, []byte(target), "hash-object", "-w", "--stdin")
		if err != nil {
			return "", err
		}
		add(p, "120000 blob "+id)
	}
	for p, commit := range tree.Submodules {
		add(p, "160000 commit "+commit)
	}
	// Deepest first, so that a directory's trees are made before it.
	order := slices.SortedFunc(mapKeys(dirs), func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/") + boolInt(a == "") - boolInt(b == "")
	})
	var top string
	for _, d := range order {
		id, err := gitOut(bare, []byte(strings.Join(dirs[d], "\n")+"\n"), "mktree", "--missing")
		if err != nil {
			return "", err
		}
		if d == "" {
			top = id
			continue
		}
		add(d, "040000 tree "+id)
	}
	commit, err := gitOut(bare, nil, "commit-tree", top, "-m", "fakeorigin tree")
	if err != nil {
		return "", err
	}
	if err := runGit(bare, "update-ref", "refs/heads/main", commit); err != nil {
		return "", err
	}
	for _, tag := range tags {
		if err := runGit(bare, "tag", "-f", tag, commit); err != nil {
			return "", err
		}
	}
	return commit, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gitOut runs git in dir with stdin and returns its output, trimmed.
func gitOut(dir string, stdin []byte, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("fakeorigin: git %s: %v: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}

// TarEntry is one entry of a tar file made by Tar.
type TarEntry struct {
	Name string
	// Type is tar.TypeReg (the default), tar.TypeDir or tar.TypeSymlink.
	Type byte
	// Body is a file's content; Target a link's.
	Body, Target string
	Mode         int64 // default 0644 (0755 for directories)
}

// TarGzEntries returns a gzipped tar of entries in the order given (unlike
// TarGz, whose entries are files and directories in sorted order), with
// fixed times: for trees with links, and with entries in an order that
// matters.
func TarGzEntries(entries []TarEntry) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, ModTime: fixedTime()}
		switch e.Type {
		case tar.TypeDir:
			if h.Mode == 0 {
				h.Mode = 0o755
			}
		case tar.TypeSymlink:
			h.Linkname, h.Mode = e.Target, 0o777
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Body))
			if h.Mode == 0 {
				h.Mode = 0o644
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			panic(err) // writing to memory cannot fail
		}
		tw.Write([]byte(e.Body)) //nolint:errcheck // memory
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// LinkChain is a hostile module tree that writes outside the directory it
// is unpacked in when links on disk are followed: a link up from a deep
// directory back to the tree's top, then, made through up, for each n in
// climbs, a link kN to the directory n levels above the top and a link eN
// to "victim" there, and files written through them: kN/victim.txt,
// kN/url-signing.key, kN/export-key.asc and eN/pwned. Checked against
// its name alone, each link seems to stay inside. sep separates the names
// under up: "/" for a tarball; `\` for a Git tree, whose entries cannot
// lie under a link (and Windows separates with it).
func LinkChain(sep string, climbs ...int) (links map[string]string, files map[string][]byte) {
	depth := slices.Max(climbs) + 1
	deep := strings.TrimSuffix(strings.Repeat("d/", depth), "/")
	up := deep + "/up"
	links = map[string]string{up: strings.TrimSuffix(strings.Repeat("../", depth), "/")}
	files = map[string][]byte{"main.tf": []byte("# a module\n")}
	for _, n := range climbs {
		k, e := fmt.Sprintf("%s%sk%d", up, sep, n), fmt.Sprintf("%s%se%d", up, sep, n)
		links[k] = strings.TrimSuffix(strings.Repeat("../", n), "/")
		links[e] = strings.Repeat("../", n) + "victim"
		for _, name := range []string{"victim.txt", "url-signing.key", "export-key.asc"} {
			files[k+sep+name] = []byte("replaced through a link\n")
		}
		files[e+sep+"pwned"] = []byte("written through a link\n")
	}
	return links, files
}

// LinkChainTarGz is LinkChain as a tarball, each link before the entries
// made through it.
func LinkChainTarGz(climbs ...int) []byte {
	links, files := LinkChain("/", climbs...)
	var entries []TarEntry
	for _, name := range slices.SortedFunc(mapKeys(links), func(a, b string) int { return len(a) - len(b) }) {
		entries = append(entries, TarEntry{Name: name, Type: tar.TypeSymlink, Target: links[name]})
	}
	for _, name := range slices.Sorted(mapKeys(files)) {
		entries = append(entries, TarEntry{Name: name, Body: string(files[name])})
	}
	return TarGzEntries(entries)
}

// LinkChainGitTree is LinkChain as a Git tree for AddGitTree.
func LinkChainGitTree(climbs ...int) GitTree {
	links, files := LinkChain(`\`, climbs...)
	return GitTree{Files: files, Links: links}
}

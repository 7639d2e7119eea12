package modsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// gitPack is the pack `git pack-objects` makes of every object of the
// repository in work, with args.
func gitPack(t *testing.T, work string, args ...string) (ids []string, pack string) {
	t.Helper()
	list := runGitT(t, work, "rev-list", "--objects", "--all")
	var in strings.Builder
	for line := range strings.Lines(list) {
		id, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		ids = append(ids, id)
		in.WriteString(id + "\n")
	}
	cmd := exec.Command("git", append([]string{"pack-objects", "--stdout", "-q"}, args...)...)
	cmd.Dir, cmd.Stdin = work, strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git pack-objects: %v", err)
	}
	pack = filepath.Join(t.TempDir(), "pack")
	if err := os.WriteFile(pack, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return ids, pack
}

// indexPack writes every object of a pack Git made, deltas as chains of
// offset or reference deltas (whose bases are deltas too), where go-git
// reads each back whole, its content hashing to its id.
func TestIndexPack(t *testing.T) {
	_, work := newWorkRepo(t)
	var stream strings.Builder
	lines := make([]string, 400)
	for i := range lines {
		lines[i] = fmt.Sprintf("variable %q { default = %d }\n", fmt.Sprint("v", i), i)
	}
	for i := range 60 {
		lines[(i*37)%len(lines)] = fmt.Sprintf("# change %d\n", i)
		data := strings.Join(lines, "")
		fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter t <t@t> %d +0000\ndata 0\nM 100644 inline main.tf\ndata %d\n%s\nM 100644 inline empty\ndata 0\n\n", 1700000000+i, len(data), data)
	}
	fastImport(t, work, stream.String())
	for _, args := range [][]string{{"--delta-base-offset"}, nil, {"--no-reuse-delta", "--depth=4095", "--window=100"}} {
		t.Run(strings.Join(append([]string{"pack"}, args...), " "), func(t *testing.T) {
			ids, packPath := gitPack(t, work, args...)
			spool, err := os.Open(packPath)
			if err != nil {
				t.Fatal(err)
			}
			defer spool.Close()
			dir := t.TempDir()
			if err := indexPack(context.Background(), spool, osfs.New(dir)); err != nil {
				t.Fatal(err)
			}
			storage := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRU(objectCacheBytes))
			for _, id := range ids {
				o, err := storage.EncodedObject(plumbing.AnyObject, plumbing.NewHash(id))
				if err != nil {
					t.Fatalf("object %s: %v", id, err)
				}
				r, err := o.Reader()
				if err != nil {
					t.Fatal(err)
				}
				content, err := io.ReadAll(r)
				r.Close()
				if err != nil {
					t.Fatal(err)
				}
				if got := plumbing.ComputeHash(o.Type(), content).String(); got != id {
					t.Fatalf("object %s reads back as %s", id, got)
				}
			}
		})
	}
}

// A pack holding a reference delta whose base it does not hold (a thin
// pack) is refused.
func TestIndexPackThin(t *testing.T) {
	_, work := newWorkRepo(t)
	big := strings.Repeat("resource \"null_resource\" \"x\" {}\n", 200)
	commitMainTF(t, work, big)
	commitMainTF(t, work, big+"# two\n")
	cmd := exec.Command("git", "pack-objects", "--stdout", "-q", "--thin", "--revs")
	cmd.Dir, cmd.Stdin = work, strings.NewReader("HEAD\n^HEAD^\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git pack-objects: %v", err)
	}
	packPath := filepath.Join(t.TempDir(), "pack")
	if err := os.WriteFile(packPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
	spool, err := os.Open(packPath)
	if err != nil {
		t.Fatal(err)
	}
	defer spool.Close()
	if err := indexPack(context.Background(), spool, osfs.New(t.TempDir())); !errors.Is(err, errPackDelta) {
		t.Errorf("indexPack of a thin pack: %v, want errPackDelta", err)
	}
}

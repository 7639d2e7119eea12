package inputfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWalkIn: every entry under the root is visited once, by its slash
// path, a directory before what it holds; a directory visit declines is
// not read; a link to a directory is an entry, never followed; a visit's
// error ends the walk within the directory being read, and so does the
// context.
func TestWalkIn(t *testing.T) {
	top := t.TempDir()
	for _, d := range []string{"a/b", "skip/inner"} {
		if err := os.MkdirAll(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range WalkBatch + 10 {
		if err := os.WriteFile(filepath.Join(top, "a", fmt.Sprintf("f%03d", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(top, "a/b/deep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(top, "link")); err != nil {
		t.Skip(err)
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	var names []string
	err = WalkIn(context.Background(), root, func(name string, d fs.DirEntry) (bool, error) {
		names = append(names, name)
		return d.IsDir() && name != "skip", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := 4 + WalkBatch + 10 + 1; len(names) != want {
		t.Errorf("%d entries visited, want %d", len(names), want)
	}
	for _, n := range []string{"a", "a/b", "a/b/deep", "link", "skip", "a/f000"} {
		if !slices.Contains(names, n) {
			t.Errorf("%s not visited", n)
		}
	}
	if slices.Contains(names, "skip/inner") || slices.Contains(names, "link/b") {
		t.Errorf("visited beneath a declined directory or a link: %q", names)
	}
	if slices.Index(names, "a/b") > slices.Index(names, "a/b/deep") {
		t.Error("a/b/deep visited before its directory")
	}

	stop := errors.New("stop")
	seen := 0
	err = WalkIn(context.Background(), root, func(name string, d fs.DirEntry) (bool, error) {
		if seen++; seen == 20 {
			return false, stop
		}
		return d.IsDir(), nil
	})
	if !errors.Is(err, stop) || seen != 20 {
		t.Errorf("walk after a visit's error: %v, %d visits; want the error, at the 20th", err, seen)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WalkIn(ctx, root, func(string, fs.DirEntry) (bool, error) { return true, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("walk with its context ended: %v", err)
	}
}

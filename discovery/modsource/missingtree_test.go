package modsource

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestFetchGitRefusesATreeItCannotRead: a Git server whose pack lacks a
// directory's tree (a broken or hostile host's) gives no package, where
// go-git's tree walker took the tree it could not read for the end of
// the walk, and the package was written, cached and pinned without that
// directory and every entry after it. Git refuses such a checkout.
func TestFetchGitRefusesATreeItCannotRead(t *testing.T) {
	mainTF := gitObject{3, []byte("# main\n")}
	last := gitObject{3, []byte("# last\n")}
	missing := gitObject{2, fmt.Appendf(nil, "100644 vpc.tf\x00%s", mainTF.id())}
	var tree bytes.Buffer
	fmt.Fprintf(&tree, "100644 main.tf\x00%s", mainTF.id())
	fmt.Fprintf(&tree, "40000 modules\x00%s", missing.id())
	fmt.Fprintf(&tree, "100644 z.tf\x00%s", last.id())
	root := gitObject{2, tree.Bytes()}
	commit := gitObject{1, fmt.Appendf(nil, "tree %x\nauthor A <a@example.com> 0 +0000\ncommitter A <a@example.com> 0 +0000\n\nm\n", root.id())}
	err := fetchGitFrom(t, oneTagGit(hex.EncodeToString(commit.id()), wholePack(commit, root, mainTF, last)))
	if err == nil {
		t.Fatal("Fetch of a tree whose directory the pack lacks: no error, a package without it")
	}
	if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), "/repo.git") {
		t.Errorf("Fetch: %v, want the package refused as the source's, naming the repository", err)
	}
}

package modsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestFetchGitBoundsGitmodules: a repository whose .gitmodules names
// hundreds of thousands of submodules (8 MiB of text, a pack of some
// hundred KiB) is refused before its .gitmodules is parsed. go-git's
// configuration parser looks each section up among those it has read,
// so such a file took it hours of CPU, which the fetch's deadline could
// not stop: one client's request held a core for as long.
func TestFetchGitBoundsGitmodules(t *testing.T) {
	o, leaf := originWithLeaf(t)
	var gm bytes.Buffer
	fmt.Fprintf(&gm, "[submodule \"sub\"]\n\tpath = sub\n\turl = ../leaf.git\n")
	for i := 0; gm.Len() < 8<<20; i++ {
		fmt.Fprintf(&gm, "[submodule \"s%d\"]\n\tpath = s%d\n\turl = ../leaf.git\n", i, i)
	}
	if _, err := o.AddGitTree("gitmodules", fakeorigin.GitTree{
		Files:      map[string][]byte{"main.tf": []byte("# module\n"), ".gitmodules": gm.Bytes()},
		Submodules: map[string]string{"sub": leaf},
	}, "v1"); err != nil {
		t.Fatal(err)
	}
	limits := Limits{MaxDownloadBytes: 64 << 20, MaxTreeBytes: 64 << 20, MaxEntries: 100, MaxSubmoduleDepth: 2}
	a, _ := Parse("git::" + o.GitURL("gitmodules") + "?ref=v1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := newFetcher(t, o, limits).Fetch(ctx, a, io.Discard)
		done <- err
	}()
	select {
	case err := <-done:
		var le *LimitError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), ".gitmodules") {
			t.Errorf("Fetch: %v, want a LimitError about .gitmodules", err)
		}
	case <-time.After(40 * time.Second):
		// The parser does not stop with ctx: it runs on after the test.
		t.Fatal("Fetch still parsing .gitmodules 20 s after its deadline")
	}
	// A .gitmodules of its submodules' size is read as before.
	if _, err := o.AddGitTree("few", fakeorigin.GitTree{
		Files:      map[string][]byte{"main.tf": []byte("# module\n"), ".gitmodules": []byte("[submodule \"sub\"]\n\tpath = sub\n\turl = ../leaf.git\n")},
		Submodules: map[string]string{"sub": leaf},
	}, "v1"); err != nil {
		t.Fatal(err)
	}
	a, _ = Parse("git::" + o.GitURL("few") + "?ref=v1")
	var buf bytes.Buffer
	if _, err := newFetcher(t, o, limits).Fetch(context.Background(), a, &buf); err != nil {
		t.Fatal(err)
	}
	if files := readTarGz(t, buf.Bytes()); files["sub/main.tf"] != "# leaf\n" {
		t.Errorf("package = %v", files)
	}
}

// TestSubmoduleURLWithCredentialsRefused: a .gitmodules URL carrying a
// password (https://user:pass@host/...) is refused before any request
// for it, and the error (logged, and in the client's 502) names the
// submodule's location without userinfo; so does the refusal of one
// that is not https. A user name alone is dropped: the submodule is
// fetched, the name never sent (TestSubmoduleURLUserNameDropped).
func TestSubmoduleURLWithCredentialsRefused(t *testing.T) {
	o, leaf := originWithLeaf(t)
	const secret = "s3cret-pass"
	withCreds := strings.Replace(o.GitURL("leaf"), "https://", "https://bot:"+secret+"@", 1)
	for name, url := range map[string]string{
		"https": withCreds,
		"http":  strings.Replace(withCreds, "https://", "http://", 1),
		"token": strings.Replace(o.GitURL("leaf"), "https://", "https://x-token:"+secret+"@", 1),
	} {
		t.Run(name, func(t *testing.T) {
			repo := "creds-" + name
			addParent(t, o, repo, url, leaf)
			a, _ := Parse("git::" + o.GitURL(repo) + "?ref=v1")
			o.ResetHits()
			_, err := newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, io.Discard)
			if !errors.Is(err, ErrUnsupported) || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "bot") || strings.Contains(err.Error(), "x-token") {
				t.Fatalf("Fetch: %v, want a refusal that does not name the credentials", err)
			}
			if !strings.Contains(err.Error(), "/git/leaf.git") {
				t.Errorf("Fetch: %v, want the submodule's location named", err)
			}
			if name != "http" && !strings.Contains(err.Error(), "carries a password") {
				t.Errorf("Fetch: %v, want it to say the URL carries credentials", err)
			}
			// The parent's advertisement and pack; nothing of the submodule.
			if n := o.Hits(fakeorigin.Git); n != 2 {
				t.Errorf("%d Git requests, want the parent's 2 only", n)
			}
		})
	}
}

// TestSubmoduleURLUserNameDropped: a .gitmodules URL with a user name
// and no password (a hosting service's clone URL, which Git fetches a
// public repository with) is fetched as it is without one: the
// submodule is in the package, and no request carries the name.
func TestSubmoduleURLUserNameDropped(t *testing.T) {
	o, leaf := originWithLeaf(t)
	url := strings.Replace(o.GitURL("leaf"), "https://", "https://jdoe@", 1)
	addParent(t, o, "named", url, leaf)
	a, _ := Parse("git::" + o.GitURL("named") + "?ref=v1")
	o.ResetHits()
	var buf bytes.Buffer
	if _, err := newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, &buf); err != nil {
		t.Fatalf("Fetch: %v, want the submodule fetched without its user name", err)
	}
	if files := readTarGz(t, buf.Bytes()); files["sub/main.tf"] != "# leaf\n" {
		t.Errorf("package = %v, want the submodule's main.tf", files)
	}
	if n := o.Hits(fakeorigin.Git); n != 4 {
		t.Errorf("%d Git requests, want the parent's 2 and the submodule's 2", n)
	}
	if h := o.LastAuthHeaders(fakeorigin.Git); len(h) != 0 {
		t.Errorf("the submodule's request carried Authorization %q, want none", h)
	}
}

// originWithLeaf is a fake origin (closed when the test ends) serving
// the Git repository leaf, whose tag v1 has one main.tf, and the commit
// of that tag.
func originWithLeaf(t *testing.T) (*fakeorigin.Origin, string) {
	t.Helper()
	needGit(t)
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	leaf, err := o.AddGitTree("leaf", fakeorigin.GitTree{Files: map[string][]byte{"main.tf": []byte("# leaf\n")}}, "v1")
	if err != nil {
		t.Fatal(err)
	}
	return o, leaf
}

// addParent adds to o the Git repository repo, whose tag v1 has a
// main.tf and the submodule sub, at commit leaf, that its .gitmodules
// names by url.
func addParent(t *testing.T, o *fakeorigin.Origin, repo, url, leaf string) {
	t.Helper()
	if _, err := o.AddGitTree(repo, fakeorigin.GitTree{
		Files:      map[string][]byte{"main.tf": []byte("# module\n"), ".gitmodules": []byte("[submodule \"sub\"]\n\tpath = sub\n\turl = " + url + "\n")},
		Submodules: map[string]string{"sub": leaf},
	}, "v1"); err != nil {
		t.Fatal(err)
	}
}

// TestSubmoduleUpdateNoneLeftOut: a submodule whose .gitmodules entry
// says update = none is not fetched, its directory left empty, as `git
// submodule update --init --recursive` leaves it (go-getter's, so
// terraform init's): the mirror fetched it, failing the package when its
// URL could not be reached (a 502 where a direct install succeeded) and
// adding files a direct install lacks when it could. The others are
// fetched as before.
func TestSubmoduleUpdateNoneLeftOut(t *testing.T) {
	o, leaf := originWithLeaf(t)
	gm := "[submodule \"docs\"]\n\tpath = docs\n\turl = https://127.0.0.1:1/nowhere/docs.git\n\tupdate = none\n" +
		"[submodule \"sub\"]\n\tpath = sub\n\turl = ../leaf.git\n"
	if _, err := o.AddGitTree("parent", fakeorigin.GitTree{
		Files:      map[string][]byte{"main.tf": []byte("# module\n"), ".gitmodules": []byte(gm)},
		Submodules: map[string]string{"docs": leaf, "sub": leaf},
	}, "v1"); err != nil {
		t.Fatal(err)
	}
	a, _ := Parse("git::" + o.GitURL("parent") + "?ref=v1")
	var buf bytes.Buffer
	if _, err := newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, &buf); err != nil {
		t.Fatalf("Fetch: %v, want the package without the submodule marked update = none", err)
	}
	files := readTarGz(t, buf.Bytes())
	if files["sub/main.tf"] != "# leaf\n" {
		t.Errorf("package = %v, want the other submodule's main.tf", files)
	}
	for name := range files {
		if strings.HasPrefix(name, "docs/") && name != "docs/" {
			t.Errorf("package holds %s, of the submodule marked update = none", name)
		}
	}
}

// TestSubmodulesOfALinkedGitmodulesRefused: a tree whose .gitmodules is
// a symbolic link, whose target (a link's blob) is written as a
// .gitmodules would be, is refused, as Git refuses to check such a tree
// out ("invalid path '.gitmodules'"): the mirror does not fetch the
// submodules a link names, nor serve a package Git would not give.
func TestSubmodulesOfALinkedGitmodulesRefused(t *testing.T) {
	o, leaf := originWithLeaf(t)
	for _, name := range []string{".gitmodules", ".GitModules"} {
		repo := "linked" + strings.ToLower(strings.TrimPrefix(name, "."))
		if _, err := o.AddGitTree(repo, fakeorigin.GitTree{
			Files:      map[string][]byte{"main.tf": []byte("# module\n")},
			Links:      map[string]string{name: "[submodule \"sub\"]\n\tpath = sub\n\turl = ../leaf.git\n"},
			Submodules: map[string]string{"sub": leaf},
		}, "v1"); err != nil {
			t.Fatal(err)
		}
		a, _ := Parse("git::" + o.GitURL(repo) + "?ref=v1")
		_, err := newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, io.Discard)
		if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s a link: Fetch = %v, want the package refused naming it", name, err)
		}
	}
}

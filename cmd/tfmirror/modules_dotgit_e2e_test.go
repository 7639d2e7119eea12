package main

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestTerraformModuleWithoutDotGitSpellings: terraform installs, through
// the mirror, a module whose tarball holds Git configurations under names
// that macOS and Windows take for .git (.GIT, .Git, .git., git~1): what
// it installs holds none of them, and the module's own files all. Before,
// a client on macOS installed a .GIT/config whose core.fsmonitor every
// git command run inside the module would run.
func TestTerraformModuleWithoutDotGitSpellings(t *testing.T) {
	e := newE2E(t, fakeorigin.Options{})
	const config = "[core]\n\tfsmonitor = touch /tmp/pwned\n"
	var entries []fakeorigin.TarEntry
	for _, g := range []string{".GIT", ".Git", "sub/.gIt", ".git.", "GIT~1"} {
		entries = append(entries, fakeorigin.TarEntry{Name: g + "/config", Body: config})
	}
	entries = append(entries,
		fakeorigin.TarEntry{Name: "main.tf", Body: "output \"from\" {\n  value = \"tarball\"\n}\n"},
		fakeorigin.TarEntry{Name: "sub/main.tf", Body: "# sub\n"},
		fakeorigin.TarEntry{Name: ".github/workflows/ci.yml", Body: "on: push\n"})
	e.origin.AddTarball("dotgit-1.0.0.tar.gz", fakeorigin.TarGzEntries(entries))
	e.origin.AddModule("acme", "dotgit", "aws", "1.0.0", e.origin.TarballURL("dotgit-1.0.0.tar.gz"))
	r := mirrorModules(t, e)

	dir := t.TempDir()
	root := "module \"m\" {\n  source  = \"acme/dotgit/aws\"\n  version = \"1.0.0\"\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.tf, "init", "-no-color")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TF_CLI_CONFIG_FILE=" + r.conf,
		"SSL_CERT_FILE=" + r.caFile, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0"}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("terraform init failed: %v\n%s", err, b)
	}
	installed := map[string]bool{}
	modDir := filepath.Join(dir, ".terraform", "modules", "m")
	err := filepath.WalkDir(modDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(modDir, p)
		installed[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"main.tf", "sub/main.tf", ".github/workflows/ci.yml"} {
		if !installed[want] {
			t.Errorf("%s not installed", want)
		}
	}
	for name := range installed {
		for part := range strings.SplitSeq(name, "/") {
			if strings.EqualFold(strings.TrimRight(part, ". "), ".git") || strings.EqualFold(part, "git~1") {
				t.Errorf("terraform installed %s", name)
			}
		}
	}
}

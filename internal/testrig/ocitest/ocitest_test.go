package ocitest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistryTakesAPushAndServesIt pushes a file with oras into the
// registry and pulls it back: the rig the export tests copy into works.
func TestRegistryTakesAPushAndServesIt(t *testing.T) {
	oras := Oras.Binary(t)
	reg := StartRegistry(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "SSL_CERT_FILE="+reg.CA, "DOCKER_CONFIG="+t.TempDir())
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(oras, args...)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("oras %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	ref := reg.Host() + "/rig/hello:v1"
	run(dir, "push", ref, "hello.txt")
	if tags := run(dir, "repo", "tags", reg.Host()+"/rig/hello"); strings.TrimSpace(tags) != "v1" {
		t.Errorf("tags = %q, want v1", tags)
	}
	out := t.TempDir()
	run(out, "pull", ref)
	got, err := os.ReadFile(filepath.Join(out, "hello.txt"))
	if err != nil || string(got) != "hello\n" {
		t.Errorf("pulled %q, %v; want hello", got, err)
	}
}

// TestToolsAreFound: each tool is found, or the test says how to
// install it (and fails in CI).
func TestToolsAreFound(t *testing.T) {
	for _, tool := range []Tool{Oras, Registry, Conformance} {
		t.Run(tool.Name, func(t *testing.T) {
			bin := tool.Binary(t)
			if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("%s: %v, not an executable", bin, err)
			}
		})
	}
}

package airgap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeOras is a directory holding an oras that notes each call (its
// working directory and arguments) in the file calls beside it and then
// fails as the real one does on a reference it does not take: echoing
// the reference on standard error.
func fakeOras(t *testing.T) (bin, calls string) {
	t.Helper()
	bin = t.TempDir()
	calls = filepath.Join(bin, "calls")
	write(t, filepath.Join(bin, "oras"), "#!/bin/sh\necho \"$(pwd) $*\" >>'"+calls+"'\necho \"Error: \\\"$4\\\": invalid reference\" >&2\nexit 1\n")
	if err := os.Chmod(filepath.Join(bin, "oras"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, calls
}

// pushScriptWithTag writes a push.sh with one tag line into dir.
func pushScriptWithTag(t *testing.T, dir string) string {
	t.Helper()
	script := filepath.Join(dir, PushScriptName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(pushScriptHead+"push 'providers/example.com/acme/net' '1.0.0'\n"+pushScriptTail), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// push.sh takes REGISTRY[/PREFIX]. A URL given instead, with a scheme
// (https://, oci://) or with a user and password in it, is refused before
// any tag is pushed, saying how to give credentials (oras login), and
// without repeating what it was given: oras would fail every tag with it
// and print each time the reference it was given, the password with it,
// into the terminal or the CI log.
func TestPushScriptRefusesATargetURL(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip(err)
	}
	for _, target := range []string{
		"https://tofu:s3cret@registry.example/tofu",
		"tofu:s3cret@registry.example/tofu",
		"tofu@registry.example",
		"https://registry.example/tofu",
		"oci://registry.example",
	} {
		t.Run(target, func(t *testing.T) {
			bin, calls := fakeOras(t)
			script := pushScriptWithTag(t, t.TempDir())
			cmd := exec.Command("sh", script, target)
			cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Errorf("push.sh %s succeeded:\n%s", target, out)
			}
			if strings.Contains(string(out), "s3cret") {
				t.Errorf("push.sh %s printed the password:\n%s", target, out)
			}
			if _, err := os.Stat(calls); err == nil {
				b, _ := os.ReadFile(calls)
				t.Errorf("push.sh %s ran oras: %s", target, b)
			}
			if !strings.Contains(string(out), "oras login") {
				t.Errorf("push.sh %s did not say how to give credentials:\n%s", target, out)
			}
		})
	}
}

// push.sh goes to its own directory, the layouts beside it, whatever the
// CDPATH of the shell that runs it: run as sh layout/push.sh (a relative
// path) with CDPATH naming a directory that holds a layout/ too, cd went
// there, and oras pushed the layouts of that other directory.
func TestPushScriptIgnoresCDPATH(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip(err)
	}
	bin, calls := fakeOras(t)
	work, decoy := t.TempDir(), t.TempDir()
	pushScriptWithTag(t, filepath.Join(work, "layout"))
	if err := os.MkdirAll(filepath.Join(decoy, "layout"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", filepath.Join("layout", PushScriptName), "registry.example/tofu")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin", "CDPATH="+decoy)
	out, _ := cmd.CombinedOutput()
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatalf("oras was not run: %v\n%s", err, out)
	}
	want := filepath.Join(work, "layout") + " cp --from-oci-layout"
	if !strings.HasPrefix(string(b), want) {
		t.Errorf("oras ran as %q, want it in %s", b, filepath.Join(work, "layout"))
	}
	if strings.Contains(string(out), decoy) {
		t.Errorf("push.sh printed CDPATH's directory:\n%s", out)
	}
}

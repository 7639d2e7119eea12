package airgap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// push.sh needs oras for a tag to push, and only then: a layout with no
// tags (every version left out) pushes nothing and ends with status 0
// on a machine without oras; one with a tag stops, saying oras is
// missing, with status 1.
func TestPushScriptWithoutOras(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	path := "/usr/bin:/bin" // the system's commands, without oras
	for _, d := range filepath.SplitList(path) {
		if _, err := os.Stat(filepath.Join(d, "oras")); err == nil {
			t.Skipf("oras is installed in %s", d)
		}
	}
	for name, lines := range map[string]string{"no tags": "", "a tag": "push registry.test/acme/net 1.0.0\n"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, PushScriptName)
			if err := os.WriteFile(script, []byte(pushScriptHead+lines+pushScriptTail), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(sh, script, "registry.example:5000")
			cmd.Env = []string{"PATH=" + path, "HOME=" + dir}
			out, err := cmd.CombinedOutput()
			switch {
			case lines == "" && err != nil:
				t.Fatalf("push.sh of a layout with no tags, without oras: %v\n%s", err, out)
			case lines != "" && err == nil:
				t.Fatalf("push.sh with a tag to push, without oras, succeeded:\n%s", out)
			case lines != "" && !strings.Contains(string(out), "oras not found"):
				t.Fatalf("push.sh without oras did not say so:\n%s", out)
			}
		})
	}
}

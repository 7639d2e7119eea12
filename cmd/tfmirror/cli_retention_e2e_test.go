package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestCLIPrunePinnedThenSealed: tenv lists and installs two Terraform
// versions through the door; with the mirror stopped, a pins file's cli block pins
// the older one, and `tfmirror cache prune` with a rule that both break
// (unused for a second) lists, then removes, the newer one only. A sealed
// mirror on that data directory then lists and installs the pinned
// version (its status page listing the pin), and answers 404 for the other (its version document and its
// archive), without any origin request. Only a prune naming it then
// removes the pinned version, saying it cannot be fetched again.
func TestCLIPrunePinnedThenSealed(t *testing.T) {
	tenv := tenvTool.Binary(t)
	c := newCLIOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	c.start(t, dataDir)
	home := t.TempDir()
	if out := c.run(t, home, tenv, c.tenvTerraformEnv(home), "tf", "list-remote"); !strings.Contains(out, "1.6.0") {
		t.Fatalf("list-remote:\n%s", out)
	}
	for _, v := range []string{"1.5.7", "1.6.0"} {
		c.run(t, home, tenv, c.tenvTerraformEnv(home), "tf", "install", v)
		c.checkInstalled(t, filepath.Join(home, ".tenv", "Terraform", v, "terraform"), "hashicorp", "terraform", v, "Terraform v"+v)
	}
	waitIdle(c.mirror.engine)
	c.stop() // writes the last uses
	used := time.Now()

	pins := t.TempDir()
	if err := os.WriteFile(filepath.Join(pins, "clis.hcl"), []byte("cli \"terraform\" {\n  versions = [\"1.5.7\"]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Both versions are unused for a second once it has passed.
	time.Sleep(time.Until(used.Add(1100 * time.Millisecond)))
	rules := []string{"--evict-unused-after", "1s", "--pins-dir", pins}
	const addr = "releases.hashicorp.com/hashicorp/terraform"
	dry, _, code := pruneInProcess(t, dataDir, append([]string{"--dry-run"}, rules...)...)
	if code != 0 || !strings.Contains(dry, "would remove the packages of 1 versions") || !lineWith(dry, "unused", "cli", addr, "1.6.0", "1 archives") {
		t.Fatalf("dry run: exit %d\n%s", code, dry)
	}
	// Without the pin, both would go.
	if out, _, code := pruneInProcess(t, dataDir, "--dry-run", "--evict-unused-after", "1s"); code != 0 || !lineWith(out, "cli", addr, "1.5.7") || !lineWith(out, "cli", addr, "1.6.0") {
		t.Fatalf("dry run without pins: exit %d\n%s", code, out)
	}
	real, _, code := pruneInProcess(t, dataDir, rules...)
	if code != 0 || strings.ReplaceAll(real, "removed", "would remove") != dry {
		t.Fatalf("prune: exit %d\n%s\nthe dry run listed:\n%s", code, real, dry)
	}
	before := c.origin.TotalHits()

	c.start(t, dataDir, "--offline", "--pins-dir", pins)
	client := trustingClient(t, c.caFile)
	client.Timeout = 30 * time.Second
	// The status page lists the pin, once retention has read the pins
	// and the cache, which it does in the background after start.
	var st struct {
		Retention struct {
			Pinned []struct{ Kind, Address, Version, Where string }
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		resp, err := client.Get(c.url + "/?format=json")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("status JSON: %v", err)
		}
		if len(st.Retention.Pinned) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(st.Retention.Pinned) != 1 || st.Retention.Pinned[0].Kind != "cli" || st.Retention.Pinned[0].Address != addr ||
		st.Retention.Pinned[0].Version != "1.5.7" || st.Retention.Pinned[0].Where != filepath.Join(pins, "clis.hcl")+":2" {
		t.Errorf("status page's pinned versions: %+v; want cli %s 1.5.7 pinned by clis.hcl:2", st.Retention.Pinned, addr)
	}
	home = t.TempDir()
	if out := c.run(t, home, tenv, c.tenvTerraformEnv(home), "tf", "list-remote"); !strings.Contains(out, "1.5.7") || strings.Contains(out, "1.6.0") {
		t.Fatalf("the sealed mirror lists:\n%s", out)
	}
	c.run(t, home, tenv, c.tenvTerraformEnv(home), "tf", "install", "1.5.7")
	c.checkInstalled(t, filepath.Join(home, ".tenv", "Terraform", "1.5.7", "terraform"), "hashicorp", "terraform", "1.5.7", "Terraform v1.5.7")
	cmd := exec.Command(tenv, "tf", "install", "1.6.0")
	cmd.Dir, cmd.Env = home, append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "SSL_CERT_FILE=" + c.caFile}, c.tenvTerraformEnv(home)...)
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("tenv installed the pruned version from the sealed mirror:\n%s", out)
	}
	for _, path := range []string{"/releases/hashicorp/terraform/1.6.0/index.json",
		"/releases/hashicorp/terraform/1.6.0/" + fakeorigin.ArchiveName("terraform", "1.6.0", platform)} {
		resp, err := client.Get(c.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s from the sealed mirror: %d, want 404", path, resp.StatusCode)
		}
	}
	if n := c.origin.TotalHits() - before; n != 0 {
		t.Errorf("the sealed mirror made %d origin requests", n)
	}
	c.stop()

	// Sealed, only a prune naming it removes the pinned version, and says
	// that it cannot be fetched again (unlisted).
	out, _, code := pruneInProcess(t, dataDir, "--offline", "--cli", "terraform", "1.5.7")
	if code != 0 || !lineWith(out, "named", "cli", addr, "1.5.7", "1 archives", "unlisted") {
		t.Fatalf("named prune, sealed: exit %d\n%s", code, out)
	}
	if _, stderr, code := pruneInProcess(t, dataDir, "--offline", "--cli", "terraform", "1.5.7"); code != 1 || !strings.Contains(stderr, "no version 1.5.7") {
		t.Errorf("naming it again: exit %d, %q", code, stderr)
	}
}

// lineWith says whether a line of out holds every field.
func lineWith(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		got := strings.Fields(line)
		ok := true
		for _, f := range fields {
			if !strings.Contains(" "+strings.Join(got, " ")+" ", " "+f+" ") {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// writePolicyConfig writes a configuration file holding policy as its
// policy block's body.
func writePolicyConfig(t *testing.T, policy string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mirror.hcl")
	if err := os.WriteFile(path, []byte("policy {\n"+policy+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serveConfig puts the configuration file conf in force on m, as serve
// --config conf does at start; m.m.reload reads it again.
func serveConfig(t *testing.T, m *testMirror, conf string) {
	t.Helper()
	load := func() (*settings.Effective, error) {
		return parseServeConfig([]string{"--config", conf}, func(string) (string, bool) { return "", false }, io.Discard)
	}
	e, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.m.useConfig(e, load, new(slog.LevelVar)); err != nil {
		t.Fatal(err)
	}
}

// filePolicy is the policy of the configuration file conf.
func filePolicy(t *testing.T, conf string) *policy.Policy {
	t.Helper()
	e, err := parseServeConfig([]string{"--config", conf}, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := readPolicy(e.File)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// denyRandom360 is a policy block's body that denies hashicorp/random
// 3.6.0, with a reason.
const denyRandom360 = `
  deny_version "registry.terraform.io/hashicorp/random" {
    versions = "3.6.0"
    reason   = "CVE-2026-1234: use 3.5.0"
  }
`

// runPolicyExplain runs `tfmirror policy explain` in this process.
func runPolicyExplain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runPolicy(append([]string{"explain"}, args...), func(string) (string, bool) { return "", false }, &stdout, &stderr)
	t.Logf("tfmirror policy explain %v: exit %d\nstdout:\n%sstderr:\n%s", args, code, stdout.String(), stderr.String())
	return code, stdout.String(), stderr.String()
}

// Sync skips what the policy refuses and says why, and is not failed by
// it: a provider outside the allow list, a denied version (the
// constraint takes the newest allowed one instead) and a version signed
// an hour ago under a 72 h minimum release age, with when it becomes
// available. Nothing of them is fetched.
func TestSyncHonoursPolicy(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	origin.AddProvider("hashicorp", "null", []string{"3.1.0", "3.2.0"}, syncPlatforms)
	signed := time.Now().Add(-time.Hour).Truncate(time.Second)
	origin.SetSignedAt("hashicorp", "null", "3.2.0", signed)
	origin.SetSignedAt("hashicorp", "null", "3.1.0", signed.Add(-365*24*time.Hour))
	conf := writePolicyConfig(t, `
  allow = ["registry.terraform.io/hashicorp/*"]
  deny_version "registry.terraform.io/hashicorp/random" {
    versions = "3.6.0"
    reason   = "CVE-2026-1234: use 3.5.0"
  }
  release_age "registry.terraform.io/hashicorp/null" {
    minimum = "72h"
  }
`)
	manifest := syncManifest(t, tfRegistry, "provider \"registry.terraform.io/hashicorp/null\" {\n  versions = [\"~> 3.0\"]\n}\n")
	dataDir := filepath.Join(t.TempDir(), "data")
	stdout, _, code := syncInProcess(t, origin, dataDir, "--config", conf, manifest)
	if code != 0 {
		t.Errorf("exit status %d, want 0: what the policy refuses is skipped, not failed", code)
	}
	for _, want := range []string{
		"skipped: registry.terraform.io/acme/widget: held back by the package policy (allow_list): not in the mirror's allow list\n",
		"skipped: registry.terraform.io/hashicorp/random 3.6.0: held back by the package policy (deny_version): CVE-2026-1234: use 3.5.0\n",
		"skipped: registry.terraform.io/hashicorp/null 3.2.0: held back by the package policy (min_release_age): held back by the mirror's minimum release age of 72h; available at " +
			signed.Add(72*time.Hour).UTC().Format(time.RFC3339) + "\n",
		"sync summary: 6 provider packages fetched",
		", 3 held back by the package policy",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, pv := range [][3]string{{"hashicorp", "random", "3.5.0"}, {"hashicorp", "null", "3.1.0"}} {
		if n := origin.ArchiveHits(pv[0], pv[1], pv[2], "linux_amd64"); n != 1 {
			t.Errorf("%s %s fetched %d times, want 1", pv[1], pv[2], n)
		}
	}
	for _, pv := range [][3]string{{"hashicorp", "random", "3.6.0"}, {"hashicorp", "null", "3.2.0"}, {"acme", "widget", "0.2.0"}} {
		if n := origin.ArchiveHits(pv[0], pv[1], pv[2], "linux_amd64"); n != 0 {
			t.Errorf("%s %s, held back, was fetched %d times", pv[1], pv[2], n)
		}
	}
}

// policy explain names the deciding rule for an allowed, a denied and a
// held version, with the release time the cache knows, and exits 1 for
// a refusal; it fetches nothing.
func TestPolicyExplain(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	now := time.Now()
	young := now.Add(-time.Hour).Truncate(time.Second)
	old := now.Add(-365 * 24 * time.Hour).Truncate(time.Second)
	origin.SetSignedAt("hashicorp", "random", "3.6.0", young)
	origin.SetSignedAt("hashicorp", "random", "3.5.0", old)
	dataDir := filepath.Join(t.TempDir(), "data")
	if _, _, code := syncInProcess(t, origin, dataDir, syncManifest(t, tfRegistry, "")); code != 0 {
		t.Fatalf("sync: exit %d", code)
	}
	conf := writePolicyConfig(t, `
  minimum_release_age = "72h"
  deny_version "registry.terraform.io/hashicorp/random" {
    versions = "3.4.0"
    reason   = "CVE-2026-1234: use 3.5.0"
  }
`)
	before := origin.TotalHits()
	for _, c := range []struct {
		name, version string
		code          int
		want          []string
	}{
		{"allowed", "3.5.0", 0, []string{
			"provider registry.terraform.io/hashicorp/random 3.5.0: allowed\n",
			"  decided by: minimum_release_age = \"72h\" (" + conf + ":3)\n",
			"  released:   " + old.UTC().Format(time.RFC3339) + " (the cache of " + dataDir + ")\n",
		}},
		{"denied", "3.4.0", 1, []string{
			"provider registry.terraform.io/hashicorp/random 3.4.0: refused (deny_version)\n",
			"  decided by: deny_version \"registry.terraform.io/hashicorp/random\" { versions = \"3.4.0\" } (" + conf + ":4)\n",
			"  reason:     CVE-2026-1234: use 3.5.0\n",
		}},
		{"held", "3.6.0", 1, []string{
			"provider registry.terraform.io/hashicorp/random 3.6.0: held back (min_release_age) until " + young.Add(72*time.Hour).UTC().Format(time.RFC3339) + "\n",
			"  reason:     held back by the mirror's minimum release age of 72h\n",
			"  released:   " + young.UTC().Format(time.RFC3339) + " (the cache of " + dataDir + ")\n",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, _ := runPolicyExplain(t, "--config", conf, "--data-dir", dataDir, "hashicorp/random", c.version)
			if code != c.code {
				t.Errorf("exit status %d, want %d", code, c.code)
			}
			for _, w := range c.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q", w)
				}
			}
		})
	}
	if n := origin.TotalHits() - before; n != 0 {
		t.Errorf("policy explain made %d origin requests, want none", n)
	}
	// The address alone, a module, and mistakes.
	if code, stdout, _ := runPolicyExplain(t, "--config", conf, "--data-dir", dataDir, "terraform-aws-modules/vpc/aws"); code != 0 ||
		!strings.HasPrefix(stdout, "module registry.terraform.io/terraform-aws-modules/vpc/aws: allowed\n") {
		t.Errorf("a module address: exit %d\n%s", code, stdout)
	}
	// Three parts with a dotless first: a module, said on stderr, or a
	// provider of that host with --kind provider.
	code, stdout, stderr := runPolicyExplain(t, "--config", conf, "--data-dir", dataDir, "vm/hashicorp/null")
	if code != 0 || !strings.HasPrefix(stdout, "module registry.terraform.io/vm/hashicorp/null: allowed\n") ||
		!strings.Contains(stderr, "--kind provider reads it as a provider of the host \"vm\"") {
		t.Errorf("a dotless three-part address: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runPolicyExplain(t, "--config", conf, "--data-dir", dataDir, "--kind", "provider", "vm/hashicorp/null")
	if code != 0 || !strings.HasPrefix(stdout, "provider vm/hashicorp/null: allowed\n") || strings.Contains(stderr, "read as a module") {
		t.Errorf("--kind provider: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := runPolicyExplain(t, "--config", conf, "--kind", "module", "hashicorp/random"); code != 2 || !strings.Contains(stderr, `module address "hashicorp/random": want [HOST/]NAMESPACE/NAME/SYSTEM`) {
		t.Errorf("--kind module of a provider address: exit %d, want 2\n%s", code, stderr)
	}
	if code, _, stderr := runPolicyExplain(t, "--config", conf, "--kind", "modul", "hashicorp/random"); code != 2 || !strings.Contains(stderr, `kind "modul"`) {
		t.Errorf("--kind modul: exit %d, want 2\n%s", code, stderr)
	}
	bad := writePolicyConfig(t, "\n  allow = [\"hashicorp/aws\"]\n")
	if code, _, stderr := runPolicyExplain(t, "--config", bad, "hashicorp/random"); code != 2 || !strings.Contains(stderr, bad+":3") {
		t.Errorf("a bad policy: exit %d, want 2 and its file:line\n%s", code, stderr)
	}
	for _, args := range [][]string{{}, {"a/b", "1.0.0", "extra"}, {"not an address"}, {"hashicorp/random", "not-a-version"}} {
		if code, _, _ := runPolicyExplain(t, append([]string{"--config", conf}, args...)...); code != 2 {
			t.Errorf("explain %q: exit %d, want 2", args, code)
		}
	}
}

// Export leaves out what the policy refuses and says so; the export is
// not failed by it.
func TestExportHonoursPolicy(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	if _, _, code := syncInProcess(t, origin, dataDir, syncManifest(t, tfRegistry, "")); code != 0 {
		t.Fatalf("sync: exit %d", code)
	}
	conf := writePolicyConfig(t, denyRandom360)
	out := filepath.Join(t.TempDir(), "export")
	var stdout, stderr bytes.Buffer
	code := runExport([]string{"--config", conf, "--data-dir", dataDir, out}, &stdout, &stderr)
	t.Logf("export: exit %d\n%s%s", code, stdout.String(), stderr.String())
	if code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if want := "registry.terraform.io/hashicorp/random 3.6.0: left out, held back by the package policy (deny_version: "; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q", want)
	}
	if want := "exported 6 packages"; !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), "left out 1 versions the package policy holds back") {
		t.Errorf("summary lacks %q and the count left out", want)
	}
	dir := filepath.Join(out, tfRegistry, "hashicorp", "random")
	if _, err := os.Stat(filepath.Join(dir, "terraform-provider-random_3.5.0_linux_amd64.zip")); err != nil {
		t.Errorf("the allowed version is not exported: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "terraform-provider-random_3.6.0_linux_amd64.zip")); !os.IsNotExist(err) {
		t.Errorf("the denied version is exported: %v", err)
	}
	index, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	if strings.Contains(string(index), "3.6.0") {
		t.Errorf("index.json lists the denied version: %s", index)
	}
}

// Import stores what is signed whatever the policy says: the mirror
// then refuses the denied version at its front door, with the reason,
// until the policy lets it through, and serves it at once after that.
func TestImportStoresDeniedVersion(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	if _, _, code := syncInProcess(t, origin, dataDir, syncManifest(t, tfRegistry, "")); code != 0 {
		t.Fatalf("sync: exit %d", code)
	}
	export := filepath.Join(t.TempDir(), "export")
	if code, stdout, stderr := runCommand("export", "--data-dir", dataDir, export); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, stderr)
	}
	conf := writePolicyConfig(t, denyRandom360)
	fresh := filepath.Join(t.TempDir(), "fresh")
	code, stdout, stderr := runCommand("import", "--config", conf, "--data-dir", fresh, "--trusted-export-keys", exporterKey(t, dataDir), export)
	if code != 0 || !strings.Contains(stdout, "imported 9 packages") {
		t.Fatalf("import: exit %d, want 0 and all 9 packages stored\n%s%s", code, stdout, stderr)
	}
	origin.Close() // what follows is served from the import alone
	m := startMirror(t, origin, fresh, io.Discard, "--offline")
	m.m.engine.SetPolicy(filePolicy(t, conf))
	resp, body, err := m.get(archiveURL("random", "3.6.0", "linux_amd64"))
	if err != nil || resp.StatusCode == 200 || !strings.Contains(string(body), "CVE-2026-1234: use 3.5.0") {
		t.Errorf("the denied, imported version: %v %v %s; want a refusal with the reason", resp, err, body)
	}
	if resp, _, err := m.get(archiveURL("random", "3.5.0", "linux_amd64")); err != nil || resp.StatusCode != 200 {
		t.Errorf("an allowed imported version: %v %v", resp, err)
	}
	m.m.engine.SetPolicy(nil)
	if resp, _, err := m.get(archiveURL("random", "3.6.0", "linux_amd64")); err != nil || resp.StatusCode != 200 {
		t.Errorf("the imported version once the policy allows it: %v %v", resp, err)
	}
}

// The policy block is put in force at start and on each reload; a file
// whose policy does not validate is refused whole and the policy in
// force stays; config check reports the policy's errors with file:line.
func TestPolicyReload(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	m := startMirror(t, origin, filepath.Join(t.TempDir(), "data"), io.Discard)
	conf := writePolicyConfig(t, "\n  deny = [\"registry.terraform.io/acme/*\"]\n")
	serveConfig(t, m, conf)
	denied := func(addr string) bool {
		return !m.m.engine.Inventory().Policy().Address(policy.Provider, addr).Allowed
	}
	if !denied("registry.terraform.io/acme/widget") {
		t.Fatal("the policy of the file is not in force after start")
	}
	if err := os.WriteFile(conf, []byte("policy {\n  deny = [\"registry.terraform.io/hashicorp\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := m.m.conf.Load().Reload()
	if err == nil || !strings.Contains(err.Error(), conf+":2") {
		t.Errorf("a broken policy block: %v, want a refusal naming %s:2", err, conf)
	}
	if !denied("registry.terraform.io/acme/widget") || denied("registry.terraform.io/hashicorp/random") {
		t.Error("a refused file changed the policy in force")
	}
	var stdout, stderr bytes.Buffer
	if code := runConfig([]string{"check", conf}, func(string) (string, bool) { return "", false }, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), conf+":2") {
		t.Errorf("config check of a broken policy: exit %d, want 1 and %s:2\n%s", code, conf, stderr.String())
	}
	if err := os.WriteFile(conf, []byte("policy {\n  deny = [\"registry.terraform.io/hashicorp/*\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := m.m.conf.Load().Reload(); err != nil {
		t.Fatal(err)
	}
	if denied("registry.terraform.io/acme/widget") || !denied("registry.terraform.io/hashicorp/random") {
		t.Error("the reloaded policy is not in force")
	}
	resp, body, err := m.get(tfRegistry + "/hashicorp/random/index.json")
	if err != nil || resp.StatusCode == 200 {
		t.Errorf("index.json of a provider the reloaded policy denies: %v %v %s", resp, err, body)
	}
}

// A reload that changes only a rule's reason changes the policy in
// force, and says so: the rule with the old reason removed, the one with
// the new added, as `tfmirror reload` prints them; a rule that only moved
// to another line, reason and all, is still no change.
func TestPolicyReloadReasonChanged(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	m := startMirror(t, origin, filepath.Join(t.TempDir(), "data"), io.Discard)
	rule := func(lead, reason string) string {
		return fmt.Sprintf("%s  deny_version \"registry.terraform.io/hashicorp/null\" {\n    versions = \"= 3.2.2\"\n    reason = %q\n  }\n", lead, reason)
	}
	conf := writePolicyConfig(t, rule("", "broken release, use 3.2.1"))
	serveConfig(t, m, conf)
	reload := func(body string) string {
		t.Helper()
		if err := os.WriteFile(conf, []byte("policy {\n"+body+"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := m.m.reload()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		printReloaded(&out, res)
		return out.String()
	}
	out := reload(rule("", "broken release, use 3.2.0"))
	for _, want := range []string{
		"policy: 1 rule added, 1 rule removed",
		fmt.Sprintf("    - deny_version \"registry.terraform.io/hashicorp/null\" { versions = \"= 3.2.2\" } (%s:2): broken release, use 3.2.1\n", conf),
		fmt.Sprintf("    + deny_version \"registry.terraform.io/hashicorp/null\" { versions = \"= 3.2.2\" } (%s:2): broken release, use 3.2.0\n", conf),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("a changed reason: the reload's output lacks %q:\n%s", want, out)
		}
	}
	if v := m.m.engine.Policy().Version(policy.Provider, "registry.terraform.io/hashicorp/null", "3.2.2", policy.Release{}, time.Now()); !strings.Contains(v.Reason, "use 3.2.0") {
		t.Errorf("the reason in force after the reload: %q", v.Reason)
	}
	if out := reload(rule("\n", "broken release, use 3.2.0")); !strings.Contains(out, "nothing changed in force") {
		t.Errorf("a rule that only moved: the reload's output:\n%s", out)
	}
}

// Sync, export and import that open the data directory themselves
// without a configuration file apply no package policy, and say so on
// stderr (what the serve's policy refuses would otherwise cross the air
// gap unsaid); with a file whose policy block they apply, they do not.
// Import stores what the file's policy denies all the same.
func TestNoPolicyNote(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	_, stderr, code := syncInProcess(t, origin, dataDir, syncManifest(t, tfRegistry, ""))
	if code != 0 || !strings.Contains(stderr, noPolicyNote) {
		t.Errorf("sync without --config: exit %d, want 0 and %q on stderr", code, noPolicyNote)
	}
	export := filepath.Join(t.TempDir(), "export")
	code, stdout, stderr := runCommand("export", "--data-dir", dataDir, export)
	if code != 0 || !strings.Contains(stderr, noPolicyNote) {
		t.Errorf("export without --config: exit %d, want 0 and the note\n%s%s", code, stdout, stderr)
	}
	conf := writePolicyConfig(t, denyRandom360)
	again := filepath.Join(t.TempDir(), "export")
	if code, stdout, stderr := runCommand("export", "--config", conf, "--data-dir", dataDir, again); code != 0 || strings.Contains(stderr, noPolicyNote) {
		t.Errorf("export with --config: exit %d, want 0 and no note\n%s%s", code, stdout, stderr)
	}
	key := exporterKey(t, dataDir)
	code, stdout, stderr = runCommand("import", "--data-dir", filepath.Join(t.TempDir(), "fresh"), "--trusted-export-keys", key, export)
	if code != 0 || !strings.Contains(stderr, noPolicyNote) {
		t.Errorf("import without --config: exit %d, want 0 and the note\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCommand("import", "--config", conf, "--data-dir", filepath.Join(t.TempDir(), "fresh"), "--trusted-export-keys", key, export)
	if code != 0 || strings.Contains(stderr, noPolicyNote) || !strings.Contains(stdout, "imported 9 packages") {
		t.Errorf("import with --config: exit %d, want 0, 9 packages stored (3.6.0 too) and no note\n%s%s", code, stdout, stderr)
	}
}

// Sync, export and import given a configuration file with a policy block
// while a tfmirror serves the data directory work through that serve,
// which judges by the policy in force there: they say that the file's
// policy is not used, rather than let an operator believe that what it
// refuses was left out.
func TestFilePolicyThroughServeSaid(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	startMirror(t, origin, dataDir, io.Discard)
	conf := writePolicyConfig(t, denyRandom360)
	_, stderr, code := syncInProcess(t, origin, dataDir, "--config", conf, syncManifest(t, tfRegistry, ""))
	if code != 0 || !strings.Contains(stderr, "working through the running tfmirror's admin socket") || !strings.Contains(stderr, filePolicyUnused) {
		t.Errorf("sync --config through a serve: exit %d, want 0 and %q on stderr\n%s", code, filePolicyUnused, stderr)
	}
	code, stdout, stderr := runCommand("export", "--config", conf, "--data-dir", dataDir, filepath.Join(t.TempDir(), "export"))
	if code != 0 || !strings.Contains(stderr, filePolicyUnused) {
		t.Errorf("export --config through a serve: exit %d, want 0 and the note\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCommand("export", "--data-dir", dataDir, filepath.Join(t.TempDir(), "export"))
	if code != 0 || strings.Contains(stderr, filePolicyUnused) {
		t.Errorf("export without --config through a serve: exit %d, want 0 and no note\n%s%s", code, stdout, stderr)
	}
}

// Without a configuration file, policy explain asks the tfmirror serving
// the data directory, through its admin socket, and answers by the policy
// in force there: a version it refuses is refused (exit 1), with the
// rule and its reason, not allowed by default; with --config, the file's
// policy is explained as before.
func TestPolicyExplainAsksServe(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	m := startMirror(t, origin, dataDir, io.Discard)
	conf := writePolicyConfig(t, `  deny_version "registry.terraform.io/hashicorp/random" {
    versions = "= 3.6.0"
    reason   = "broken release, use 3.5.0"
  }
`)
	pol := filePolicy(t, conf)
	code, stdout, stderr := runPolicyExplain(t, "--data-dir", dataDir, "hashicorp/random", "3.6.0")
	if code != 0 || !strings.Contains(stderr, "asked through its admin socket: none, everything is allowed") {
		t.Errorf("a serve without policy: exit %d, want 0 and its policy named\n%s%s", code, stdout, stderr)
	}
	m.m.engine.SetPolicy(pol)
	code, stdout, stderr = runPolicyExplain(t, "--data-dir", dataDir, "hashicorp/random", "3.6.0")
	if code != 1 || !strings.Contains(stdout, "provider registry.terraform.io/hashicorp/random 3.6.0: refused (deny_version)") ||
		!strings.Contains(stdout, "reason:     broken release, use 3.5.0") || !strings.Contains(stderr, "the package policy of the tfmirror serving "+dataDir+", asked through its admin socket (1 rule)") ||
		strings.Contains(stderr, noPolicyNote) {
		t.Errorf("a serve that denies the version: exit %d, want 1 with the serve's rule\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ = runPolicyExplain(t, "--data-dir", dataDir, "hashicorp/random", "3.5.0"); code != 0 || !strings.Contains(stdout, "3.5.0: allowed") {
		t.Errorf("a version the serve allows: exit %d\n%s", code, stdout)
	}
	allowAll := writePolicyConfig(t, "")
	if code, stdout, _ = runPolicyExplain(t, "--config", allowAll, "--data-dir", dataDir, "hashicorp/random", "3.6.0"); code != 0 {
		t.Errorf("--config names a file without rules: exit %d, want 0 (the file's policy, not the serve's)\n%s", code, stdout)
	}
}

// A reload through the admin socket (tfmirror reload) that refuses the
// file says so once, naming the file once, with every error under it;
// serve logs the refusal with its reason once, and the admin request's
// audit line names the caller without the reason again.
func TestReloadRefusedSaidOnce(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	var log logbuf.Buffer
	m := startMirror(t, origin, dataDir, &log)
	conf := writePolicyConfig(t, "\n  deny = [\"registry.terraform.io/acme/*\"]\n")
	serveConfig(t, m, conf)
	if err := os.WriteFile(conf, []byte("policy {\n  deny = [\"not a pattern at all\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runReload([]string{"--data-dir", dataDir}, func(string) (string, bool) { return "", false }, &stdout, &stderr)
	msg := stderr.String()
	if code != 1 || strings.Count(msg, conf) != 2 || strings.Count(msg, "refused") != 1 ||
		!strings.HasPrefix(msg, "tfmirror reload: configuration file "+conf+" refused; the configuration in force stays:\n  "+conf+":2,") {
		t.Errorf("tfmirror reload of a broken file: exit %d, want 1, the file named once and its error under it:\n%s", code, msg)
	}
	if n := strings.Count(log.String(), "not a pattern at all"); n != 1 {
		t.Errorf("the refusal's reason is logged %d times, want once:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), `"msg":"admin request failed","path":"/v1/reload"`) {
		t.Errorf("no audit line of the reload asked:\n%s", log.String())
	}
}

// TestPolicyExplainOfNoDataDirectory: without a configuration file,
// policy explain answers by the policy of the tfmirror serving the data
// directory; one that does not exist (a mistyped --data-dir, the default
// ./tfmirror-data of another working directory) is an error, exit 1 with
// no answer, not "allowed by default" (exit 0) of a policy that is
// nobody's, while the serve meant refuses. With --config the file's
// policy answers what needs no release time as before.
func TestPolicyExplainOfNoDataDirectory(t *testing.T) {
	t.Parallel()
	typo := filepath.Join(t.TempDir(), "tfmirror-dta")
	for _, args := range [][]string{{"hashicorp/random"}, {"hashicorp/random", "3.6.0"}} {
		code, stdout, stderr := runPolicyExplain(t, append([]string{"--data-dir", typo}, args...)...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, "data directory "+typo+" does not exist") {
			t.Errorf("explain %q without a file on a data directory not there: exit %d, stdout %q; want 1, no answer, and why", args, code, stdout)
		}
	}
	if _, err := os.Stat(typo); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("policy explain made %s (%v)", typo, err)
	}
	conf := writePolicyConfig(t, `  deny = ["registry.terraform.io/hashicorp/random"]
`)
	if code, stdout, _ := runPolicyExplain(t, "--config", conf, "--data-dir", typo, "hashicorp/random", "3.6.0"); code != 1 || !strings.Contains(stdout, "refused (deny)") {
		t.Errorf("--config, no release time needed: exit %d, want 1 and the file's answer\n%s", code, stdout)
	}
}

// `policy explain` gives a verdict no release time changes (a deny, a
// deny_version) without reading the data directory's cache, under a
// minimum release age too: it failed for want of the data directory,
// though the docs say a missing one is an error only when the release
// time is needed, which it still is for a version the age may hold.
func TestPolicyExplainOfAFinalVerdictReadsNoCache(t *testing.T) {
	t.Parallel()
	conf := writePolicyConfig(t, denyRandom360+"  deny = [\"registry.terraform.io/acme/gadget\"]\n  minimum_release_age = \"72h\"\n")
	missing := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct{ address, version, want string }{
		{"hashicorp/random", "3.6.0", "registry.terraform.io/hashicorp/random 3.6.0: refused (deny_version)\n"},
		{"acme/gadget", "1.0.0", "registry.terraform.io/acme/gadget 1.0.0: refused (deny)\n"},
	} {
		code, stdout, stderr := runPolicyExplain(t, "--config", conf, "--data-dir", missing, tc.address, tc.version)
		if code != 1 || !strings.Contains(stdout, tc.want) || strings.Contains(stderr, "does not exist") {
			t.Errorf("explain %s %s without a data directory: exit %d, stdout %q, stderr %q; want 1 and %q", tc.address, tc.version, code, stdout, stderr, tc.want)
		}
	}
	if code, _, stderr := runPolicyExplain(t, "--config", conf, "--data-dir", missing, "hashicorp/random", "3.5.0"); code != 1 || !strings.Contains(stderr, "does not exist") {
		t.Errorf("explain of a version the age may hold, without a data directory: exit %d, stderr %q; want 1 saying the data directory does not exist", code, stderr)
	}
}

// TestPolicyExplainMakesNoCache: a --data-dir that exists but holds no
// cache (a mistyped parent directory, /var/lib for /var/lib/tfmirror) is
// no data directory either: when the release time is needed, policy
// explain refuses it, exit 1 with no answer, and leaves it as it was,
// since the command reads a cache and never makes one.
func TestPolicyExplainMakesNoCache(t *testing.T) {
	t.Parallel()
	conf := writePolicyConfig(t, "  minimum_release_age = \"72h\"\n")
	dir := t.TempDir()
	code, stdout, stderr := runPolicyExplain(t, "--config", conf, "--data-dir", dir, "hashicorp/random", "3.5.0")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "holds no cache") {
		t.Errorf("explain on a directory without a cache: exit %d, stdout %q, stderr %q; want 1, no answer, and why", code, stdout, stderr)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("policy explain wrote into %s: %v (%v)", dir, entries, err)
	}
}

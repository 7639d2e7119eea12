package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestConfigCheckOnePassProcess runs config check on a file with a
// mistake of each kind: a value its setting refuses, a value the checks
// of all values refuse (the log level), a block that is not one
// (policies), a rule of the policy outside it (deny), and mistakes
// inside the policy block. One run reports every one, each with its line
// and, where it helps, the name meant. Whole days are a duration for
// every duration setting and the policy alike.
func TestConfigCheckOnePassProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	env := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	dir := t.TempDir()
	bad := filepath.Join(dir, "tfmirror.hcl")
	writeFile(t, bad, []byte(`cache_max_bytes = "lots"
log_level = "loud"
versions_ttl = "1d"
policies {}
deny = ["registry.terraform.io/hashicorp/null"]
policy {
  allow = ["hashicorp/aws"]
  min_release_age = "3d"
}
`))
	stdout, stderr, code := runProcessEnv(t, bin, "", env, "config", "check", bad)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{
		bad + ":1,19-25: Invalid value for cache_max_bytes",
		bad + `:2,13-19: Invalid settings: --log-level "loud": want debug, info, warn or error`,
		bad + `:4,1-9: Unsupported block type: Blocks of type "policies" are not expected here. Did you mean "policy"?`,
		bad + `:5,1-5: Unsupported argument: An argument named "deny" is not expected here. deny is a rule of the package policy: it belongs inside policy { }`,
		bad + ":7,",
		bad + `:8,3-18: Unsupported argument: An argument named "min_release_age" is not expected here. Did you mean "minimum_release_age"?`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("config check does not report %q", want)
		}
	}
	if strings.Contains(stderr, "versions_ttl") || stdout != "" {
		t.Errorf("versions_ttl = \"1d\" refused, or output on stdout:\n%s%s", stdout, stderr)
	}

	good := filepath.Join(dir, "good.hcl")
	writeFile(t, good, []byte(`versions_ttl = "1d"
discovery_ttl = "2d"
evict_unused_after = "30d"
policy {
  minimum_release_age = "3d"
}
`))
	stdout, _, code = runProcessEnv(t, bin, "", env, "config", "check", good)
	if code != 0 || !settingShown(stdout, "versions_ttl", "24h0m0s") || !settingShown(stdout, "discovery_ttl", "48h0m0s") ||
		!settingShown(stdout, "evict_unused_after", "30d") {
		t.Errorf("whole days: exit %d\n%s", code, stdout)
	}
}

// settingShown says whether config check's output shows the setting
// attr with value, from the file.
func settingShown(out, attr, value string) bool {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(attr) + `\s+` + regexp.QuoteMeta(value) + `\s+file$`).MatchString(out)
}

// TestPolicyExplainProcess runs policy explain on a synced data directory
// as an operator would: the answer on stdout, and on stderr only that it
// was answered from the cache (no log lines of the engine it opened);
// with a data directory that does not exist it fails and makes none.
func TestPolicyExplainProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := syncOrigin(t)
	origin.SetSignedAt("hashicorp", "random", "3.5.0", time.Now().Add(-365*24*time.Hour))
	dataDir := filepath.Join(t.TempDir(), "data")
	if _, _, code := syncInProcess(t, origin, dataDir, syncManifest(t, tfRegistry, "")); code != 0 {
		t.Fatalf("sync: exit %d", code)
	}
	conf := writePolicyConfig(t, "  minimum_release_age = \"3d\"\n")
	env := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	before := origin.TotalHits()
	stdout, stderr, code := runProcessEnv(t, bin, "", env, "policy", "explain", "--config", conf, "--data-dir", dataDir, "hashicorp/random", "3.5.0")
	if code != 0 || !strings.HasPrefix(stdout, "provider registry.terraform.io/hashicorp/random 3.5.0: allowed\n") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	if stderr != "tfmirror policy explain: answered from the cache; nothing is fetched\n" {
		t.Errorf("stderr holds more than the note that nothing is fetched:\n%s", stderr)
	}
	if n := origin.TotalHits() - before; n != 0 {
		t.Errorf("%d origin requests", n)
	}

	missing := filepath.Join(t.TempDir(), "no-such-data")
	_, stderr, code = runProcessEnv(t, bin, "", env, "policy", "explain", "--config", conf, "--data-dir", missing, "hashicorp/random", "3.5.0")
	if code != 1 || !strings.Contains(stderr, "data directory "+missing+" does not exist") {
		t.Errorf("a data directory that does not exist: exit %d, want 1 and the directory named\n%s", code, stderr)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("policy explain made the data directory: %v", err)
	}
}

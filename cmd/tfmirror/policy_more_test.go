package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// policyOf is the policy of the configuration file conf, as serve reads it.
func policyOf(t *testing.T, conf string) *policy.Policy {
	t.Helper()
	e, err := parseServeConfig([]string{"--config", conf}, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p, err := readPolicy(e.File)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// In-house builds (imported without signature under a host of
// --allow-unsigned-hosts) are the operator's own: a minimum release age
// does not hold them back, though nothing dates them, while a version of
// the origin signed an hour ago is held on the same mirror; and `tfmirror
// policy explain`, through the running serve's admin socket, reads the
// release times there: the held version with its signature's time and
// when it becomes available, the in-house build as such.
func TestInHouseBuildsPassTheAgeGate(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	now := time.Now()
	young := now.Add(-time.Hour).Truncate(time.Second)
	origin.SetSignedAt("hashicorp", "random", "3.6.0", young)
	origin.SetSignedAt("hashicorp", "random", "3.5.0", now.Add(-365*24*time.Hour))
	data := filepath.Join(t.TempDir(), "data")
	if _, _, code := syncInProcess(t, origin, data, syncManifest(t, tfRegistry, "")); code != 0 {
		t.Fatalf("sync: exit %d", code)
	}
	in := writeInHouse(t, t.TempDir(), tfRegistry, "acme", "alpha", "1.0.0")
	if code, stdout, stderr := runCommand("import", "--data-dir", data, "--allow-unsigned", "--allow-unsigned-hosts", tfRegistry, in); code != 0 {
		t.Fatalf("import of the in-house build: exit %d\n%s%s", code, stdout, stderr)
	}
	conf := writePolicyConfig(t, "  minimum_release_age = \"72h\"\n")

	m, _ := startSealed(t, data, "--allow-unsigned-hosts", tfRegistry)
	m.m.engine.SetPolicy(policyOf(t, conf))
	const inHouse = tfRegistry + "/acme/alpha/"
	if resp, body, err := m.get(inHouse + "index.json"); err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), `"1.0.0"`) {
		t.Errorf("index.json of the in-house provider: %v %v %s; want 1.0.0 listed", resp, err, body)
	}
	for _, path := range []string{inHouse + "1.0.0.json", inHouse + "terraform-provider-alpha_1.0.0_linux_amd64.zip"} {
		if resp, body, err := m.get(path); err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %v %v %.200s; want it served", path, resp, err, body)
		}
	}
	// The gate is on: the origin's young version is held on this mirror.
	if _, body, err := m.get(tfRegistry + "/hashicorp/random/index.json"); err != nil || strings.Contains(string(body), `"3.6.0"`) || !strings.Contains(string(body), `"3.5.0"`) {
		t.Errorf("index.json of hashicorp/random: %v %s; want 3.5.0 and not 3.6.0, signed an hour ago", err, body)
	}
	if resp, body, err := m.get(archiveURL("random", "3.6.0", "linux_amd64")); err != nil || resp.StatusCode != 451 {
		t.Errorf("archive of the held version: %v %v %s; want 451", resp, err, body)
	}

	through := "(the cache of " + data + ", through the running tfmirror)"
	for _, c := range []struct {
		name, addr, version string
		code                int
		want                []string
	}{
		{"held", "hashicorp/random", "3.6.0", 1, []string{
			"provider registry.terraform.io/hashicorp/random 3.6.0: held back (min_release_age) until " + young.Add(72*time.Hour).UTC().Format(time.RFC3339) + "\n",
			"  decided by: minimum_release_age = \"72h\" (" + conf + ":2)\n",
			"  released:   " + young.UTC().Format(time.RFC3339) + " " + through + "\n",
		}},
		{"in-house", "acme/alpha", "1.0.0", 0, []string{
			"provider registry.terraform.io/acme/alpha 1.0.0: allowed\n",
			"  decided by: in-house build (imported unsigned under a host that is no allowed origin, or one of --allow-unsigned-hosts): no minimum release age applies\n",
			"  released:   in-house build " + through + "\n",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, _ := runPolicyExplain(t, "--config", conf, "--data-dir", data, c.addr, c.version)
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
}

// Sync of a module whose newest version the policy holds back takes the
// newest allowed one and says why it skipped the other: a denied version
// with its reason, then a version first listed after the mirror's last
// listing, held by the minimum release age with when it becomes
// available (through a running serve). What is held is not fetched; the
// sync does not fail.
func TestSyncModuleHeldBack(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	addVPC := func(v string) {
		file := "vpc-" + v + ".tar.gz"
		origin.AddTarball(file, fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("output \"v\" {\n  value = \"" + v + "\"\n}\n")}))
		origin.AddModule("acme", "vpc", "aws", v, origin.TarballURL(file))
	}
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		addVPC(v)
	}
	manifest := filepath.Join(t.TempDir(), "mirror.hcl")
	if err := os.WriteFile(manifest, []byte("module \""+tfRegistry+"/acme/vpc/aws\" {\n  versions = [\"~> 1.0\"]\n  latest   = 1\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const cve = "CVE-2026-1234: use 1.1.0"
	conf := writePolicyConfig(t, `
  minimum_release_age = "72h"
  deny_version "registry.terraform.io/acme/vpc/aws" {
    versions = "1.2.0"
    reason   = "`+cve+`"
  }
`)
	data := filepath.Join(t.TempDir(), "data")
	stdout, _, code := syncInProcess(t, origin, data, "--config", conf, manifest)
	if code != 0 {
		t.Errorf("exit status %d, want 0: what the policy holds back is skipped, not failed", code)
	}
	for _, want := range []string{
		"skipped: module registry.terraform.io/acme/vpc/aws 1.2.0: held back by the package policy (deny_version): " + cve + "\n",
		"modules: 1 packages fetched",
		// The summary counts the module beside the providers, and the
		// version held back among what the policy held back.
		"provider packages fetched (", "and 0 already cached, 1 module package fetched and 0 already cached; 0 failed, 1 held back by the package policy\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := origin.Hits(fakeorigin.Tarball); n != 1 {
		t.Errorf("%d tarballs fetched, want 1: 1.1.0 alone", n)
	}

	// 1.3.0 appears after that listing, spelled "v1.3.0" by the origin:
	// it is younger than the window, though the module registry gives no
	// date, whatever the spelling. The second sync works through a serve
	// on the data directory (whose policy then applies), which lists the
	// module again.
	listed := time.Now()
	addVPC("v1.3.0")
	m := startMirror(t, origin, data, io.Discard, "--versions-ttl", "1ms")
	m.m.engine.SetPolicy(policyOf(t, conf))
	stdout, _, code = syncInProcess(t, origin, data, manifest)
	if code != 0 {
		t.Errorf("second sync: exit status %d, want 0", code)
	}
	want := "skipped: module registry.terraform.io/acme/vpc/aws 1.3.0: held back by the package policy (min_release_age): held back by the mirror's minimum release age of 72h; available at "
	i := strings.Index(stdout, want)
	if i < 0 {
		t.Fatalf("second sync's output lacks %q", want)
	}
	at, err := time.Parse(time.RFC3339, strings.TrimSpace(strings.SplitN(stdout[i+len(want):], "\n", 2)[0]))
	if err != nil || at.Before(listed.Add(-2*time.Second).Add(72*time.Hour)) || at.After(time.Now().Add(72*time.Hour)) {
		t.Errorf("available at %v (%v), want 72 h after the first sync's listing (%v)", at, err, listed)
	}
	if n := origin.Hits(fakeorigin.Tarball); n != 1 {
		t.Errorf("%d tarballs fetched in all, want 1: nothing held is fetched", n)
	}
}

package main

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// The package policy's address rules answer before the not-found memory
// is asked, and never fill it: a denied provider and module are refused
// (404, naming the policy) without an origin request, and nothing is remembered of them;
// a provider whose 404 is remembered, denied by a reload, is refused by
// the deny, not answered with the 404.
func TestNotFoundDenyAnsweredFirst(t *testing.T) {
	t.Parallel()
	origin := newOrigin(t, fakeorigin.Options{})
	m := startMirror(t, origin, filepath.Join(t.TempDir(), "data"), io.Discard)
	conf := filepath.Join(t.TempDir(), "tfmirror.hcl")
	write := func(deny ...string) {
		t.Helper()
		body := "policy {\n  deny = [\"" + strings.Join(deny, "\", \"") + "\"]\n}\n"
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	load := func() (*settings.Effective, error) {
		return parseServeConfig([]string{"--config", conf}, func(string) (string, bool) { return "", false }, io.Discard)
	}
	write(tfRegistry+"/hashicorp/denied", tfRegistry+"/acme/denied/aws")
	e, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.m.useConfig(e, load, new(slog.LevelVar)); err != nil {
		t.Fatal(err)
	}
	// refused says path is answered 404 with the policy's refusal (an
	// address refused is neither listed nor served), not the origin's.
	refused := func(path string) bool {
		t.Helper()
		resp, body, err := m.get(path)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode == http.StatusNotFound && strings.Contains(string(body), "denied by the mirror's policy")
	}
	provider := func(name string) string { return tfRegistry + "/hashicorp/" + name + "/index.json" }
	module := func(name string) string {
		return "registry/" + tfRegistry + "/v1/modules/acme/" + name + "/aws/versions"
	}
	host := svchost.Hostname(tfRegistry)

	if resp, body, err := m.get(provider("late")); err != nil || resp.StatusCode != http.StatusNotFound || refused(provider("late")) {
		t.Fatalf("a provider the origin lacks: %v %s, want the origin's 404", err, body)
	}
	for range 3 {
		if !refused(provider("denied")) {
			t.Fatal("a denied provider is not refused by the policy")
		}
		if !refused(module("denied")) {
			t.Fatal("a denied module is not refused by the policy")
		}
	}
	if v, mv := origin.Hits(fakeorigin.Versions), origin.Hits(fakeorigin.ModuleVersions); v != 1 || mv != 0 {
		t.Fatalf("the origin was asked for %d provider and %d module version lists, want 1 (the provider not denied) and 0", v, mv)
	}
	if n := m.m.engine.NotFound().Entries(host); n != 1 {
		t.Fatalf("%d answers remembered, want 1: a refusal is not remembered", n)
	}

	write(tfRegistry+"/hashicorp/denied", tfRegistry+"/acme/denied/aws", tfRegistry+"/hashicorp/late")
	if _, err := m.m.conf.Load().Reload(); err != nil {
		t.Fatal(err)
	}
	if !refused(provider("late")) {
		t.Fatal("a provider denied after its 404 was remembered: not refused by the policy (the deny decides first)")
	}
	if n := origin.Hits(fakeorigin.Versions); n != 1 {
		t.Fatalf("the origin was asked %d times, want 1", n)
	}
}

// tfmirror sync through a running mirror asks the origin for a provider
// and a module whose 404 the mirror remembers (the admin API forgets it
// before asking): both, published since, are synced at once, and clients
// find them from then on, within the period of the 404 remembered.
func TestSyncAsksOriginPastNotFound(t *testing.T) {
	t.Parallel()
	origin := newOrigin(t, fakeorigin.Options{})
	dataDir := filepath.Join(t.TempDir(), "data")
	m := startMirror(t, origin, dataDir, io.Discard, "--not-found-ttl", "1h")
	status := func(path string) int {
		t.Helper()
		resp, _, err := m.get(path)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	providerPath := tfRegistry + "/hashicorp/late/index.json"
	modulePath := "registry/" + tfRegistry + "/v1/modules/acme/late/aws/versions"
	for range 2 {
		if code := status(providerPath); code != http.StatusNotFound {
			t.Fatalf("provider before it is published: %d, want 404", code)
		}
		if code := status(modulePath); code != http.StatusNotFound {
			t.Fatalf("module before it is published: %d, want 404", code)
		}
	}
	origin.AddProvider("hashicorp", "late", []string{"1.0.0"}, []string{"linux_amd64"})
	origin.AddTarball("late-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# late\n")}))
	origin.AddModule("acme", "late", "aws", "1.0.0", origin.TarballURL("late-1.0.0.tar.gz"))
	if code := status(providerPath); code != http.StatusNotFound {
		t.Fatalf("provider within the period: %d, want the 404 remembered", code)
	}
	if v, mv := origin.Hits(fakeorigin.Versions), origin.Hits(fakeorigin.ModuleVersions); v != 1 || mv != 1 {
		t.Fatalf("before the sync the origin was asked %d and %d times, want 1 and 1", v, mv)
	}

	manifestPath := filepath.Join(t.TempDir(), "mirror.hcl")
	manifest := `platforms = ["linux_amd64"]

provider "` + tfRegistry + `/hashicorp/late" {
  versions = ["1.0.0"]
}

module "` + tfRegistry + `/acme/late/aws" {
  versions = ["1.0.0"]
}
`
	if err := os.WriteFile(manifestPath, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := syncInProcess(t, origin, dataDir, manifestPath)
	if code != 0 {
		t.Fatalf("sync exited %d", code)
	}
	if !strings.Contains(stderr, "working through the running tfmirror's admin socket") {
		t.Fatal("sync did not work through the running mirror")
	}
	if !strings.Contains(stdout, "sync summary: 1 provider package fetched") {
		t.Errorf("sync did not fetch the provider's package:\n%s", stdout)
	}
	if n := origin.ArchiveHits("hashicorp", "late", "1.0.0", "linux_amd64"); n != 1 {
		t.Errorf("the provider's archive was fetched %d times, want 1", n)
	}
	if n := origin.Hits(fakeorigin.Tarball); n < 1 {
		t.Error("the module's package was not fetched")
	}
	if code := status(providerPath); code != http.StatusOK {
		t.Errorf("provider after the sync: %d, want 200", code)
	}
	if code := status(modulePath); code != http.StatusOK {
		t.Errorf("module after the sync: %d, want 200", code)
	}
}

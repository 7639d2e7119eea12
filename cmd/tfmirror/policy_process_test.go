package main

// The package policy as a layer, through real processes: a `tfmirror
// serve` whose configuration file changes, SIGHUP, the oras CLI, HTTP
// clients on each front door, and `tfmirror export --format oci-layout`.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// oras runs the oras CLI against p, trusting its CA, with HOME in dir.
func (p *proc) oras(dir, caFile string, args ...string) (string, error) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, orasBinary(p.t), append(args, "--ca-file", caFile)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if err != nil {
		err = errors.New(err.Error() + ": " + stderr.String())
	}
	return out.String(), err
}

// TestPolicyLayerProcess: a running tfmirror serves a module and a
// provider to oras; its configuration file then gains a deny_version of
// each and a minimum release age for two modules, and a SIGHUP applies
// it. oras is refused the denied versions by tag, by digest and by blob
// (what it pulled before included), the registry doors answer 451; a
// module version first listed seconds ago is held whether asked for as
// 1.1.0 or v1.1.0, and however the origin spells it; an address denied
// whole answers 404 with no origin request; and `tfmirror export
// --format oci-layout` leaves the denied versions out.
func TestPolicyLayerProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	orasBinary(t)
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	caFile := originCAFile(t, origin)
	host := origin.Addr
	origin.AddProvider("acme", "widget", []string{"1.0.0", "1.1.0"}, []string{"linux_amd64"})
	origin.AddProvider("acme", "evil", []string{"1.0.0"}, []string{"linux_amd64"})
	for _, v := range []string{"1.0.0", "1.1.0"} {
		origin.AddTarball("vpc-"+v+".tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc " + v + "\n")}))
	}
	origin.AddModule("acme", "vpc", "aws", "1.0.0", origin.TarballURL("vpc-1.0.0.tar.gz"))
	origin.AddModule("acme", "vpc", "aws", "1.1.0", origin.TarballURL("vpc-1.1.0.tar.gz"))
	// Two modules whose 1.1.0 comes later, spelled by the origin each way.
	for _, name := range []string{"net", "edge"} {
		origin.AddModule("acme", name, "aws", "1.0.0", origin.TarballURL("vpc-1.0.0.tar.gz"))
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	config := filepath.Join(t.TempDir(), "tfmirror.hcl")
	if err := os.WriteFile(config, []byte("log_level = \"info\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startProcess(t, bin, dataDir, origin, caFile, "--config", config, "--versions-ttl", "1s")
	mirrorCA := filepath.Join(dataDir, "tls", "ca.pem")
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := addrs.ParseProvider(host + "/acme/widget")
	vpc, _ := addrs.ParseModule(host + "/acme/vpc/aws")
	providerRepo := m.addr + "/" + names.Provider(p)
	moduleRepo := m.addr + "/" + names.Module(vpc)
	dir := t.TempDir()
	ctx := context.Background()

	// Pulled whole before the policy: the digests of what will be denied.
	if _, err := m.oras(dir, mirrorCA, "pull", "--platform", "linux/amd64", "-o", filepath.Join(dir, "p"), providerRepo+":1.1.0"); err != nil {
		t.Fatalf("oras pull of the provider: %v", err)
	}
	if _, err := m.oras(dir, mirrorCA, "pull", "-o", filepath.Join(dir, "m"), moduleRepo+":1.0.0"); err != nil {
		t.Fatalf("oras pull of the module: %v", err)
	}
	if _, err := m.oras(dir, mirrorCA, "pull", "-o", filepath.Join(dir, "m"), moduleRepo+":1.1.0"); err != nil {
		t.Fatalf("oras pull of the module: %v", err)
	}
	digests := func(ref string, platform ...string) (manifest string, layers []string) {
		t.Helper()
		out, err := m.oras(dir, mirrorCA, append(append([]string{"manifest", "fetch"}, platform...), "--descriptor", ref)...)
		if err != nil {
			t.Fatalf("descriptor of %s: %v", ref, err)
		}
		var desc ocispec.Descriptor
		if err := json.Unmarshal([]byte(out), &desc); err != nil {
			t.Fatal(err)
		}
		out, err = m.oras(dir, mirrorCA, "manifest", "fetch", ref[:strings.LastIndexByte(ref, ':')]+"@"+desc.Digest.String())
		if err != nil {
			t.Fatalf("manifest of %s: %v", ref, err)
		}
		var man ocispec.Manifest
		if err := json.Unmarshal([]byte(out), &man); err != nil {
			t.Fatal(err)
		}
		for _, l := range man.Layers {
			layers = append(layers, l.Digest.String())
		}
		return desc.Digest.String(), layers
	}
	pManifest, pLayers := digests(providerRepo+":1.1.0", "--platform", "linux/amd64")
	mManifest, mLayers := digests(moduleRepo + ":1.0.0")
	pIndex, err := m.oras(dir, mirrorCA, "resolve", providerRepo+":1.1.0")
	if err != nil {
		t.Fatalf("oras resolve: %v", err)
	}
	pIndex = strings.TrimSpace(pIndex)

	// The first listings of net and edge, then their 1.1.0 appears.
	modules := "/" + proxy.ModulesPath(host)
	for _, name := range []string{"net", "edge"} {
		if _, _, err := m.get(ctx, modules+"acme/"+name+"/aws/versions"); err != nil {
			t.Fatal(err)
		}
	}
	origin.AddModule("acme", "net", "aws", "v1.1.0", origin.TarballURL("vpc-1.1.0.tar.gz"))
	origin.AddModule("acme", "edge", "aws", "1.1.0", origin.TarballURL("vpc-1.1.0.tar.gz"))
	time.Sleep(1100 * time.Millisecond) // the lists' TTL
	for _, name := range []string{"net", "edge"} {
		if body, _, err := m.get(ctx, modules+"acme/"+name+"/aws/versions"); err != nil || !strings.Contains(string(body), "1.1.0") {
			t.Fatalf("%s versions after 1.1.0 appeared: %s, %v", name, body, err)
		}
	}

	policy := `log_level = "info"
policy {
  deny = [{ pattern = "` + host + `/acme/evil", reason = "compromised: use acme/widget" }]
  deny_version "` + host + `/acme/widget" {
    versions = "= 1.1.0"
    reason   = "CVE-2026-7777: use 1.0.0"
  }
  deny_version "` + host + `/acme/vpc/aws" {
    versions = "= 1.0.0"
    reason   = "CVE-2026-7777: use 1.1.0"
  }
  release_age "` + host + `/acme/net/aws" { minimum = "72h" }
  release_age "` + host + `/acme/edge/aws" { minimum = "72h" }
}
`
	if err := os.WriteFile(config, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	m.cmd.Process.Signal(syscall.SIGHUP)
	m.waitLog("configuration file reloaded", 10*time.Second)

	refusedByOras := func(what string, args ...string) {
		t.Helper()
		out, err := m.oras(dir, mirrorCA, args...)
		if err == nil {
			t.Errorf("%s after the deny: served %.200q", what, out)
		} else if !strings.Contains(err.Error(), "CVE-2026-7777") && !strings.Contains(err.Error(), "451") {
			t.Errorf("%s after the deny: %v, want the policy's refusal", what, err)
		}
	}
	refusedByOras("provider pull", "pull", "--platform", "linux/amd64", "-o", filepath.Join(dir, "p2"), providerRepo+":1.1.0")
	refusedByOras("provider manifest by tag", "manifest", "fetch", providerRepo+":1.1.0")
	refusedByOras("provider index by digest", "manifest", "fetch", providerRepo+"@"+pIndex)
	refusedByOras("provider manifest by digest", "manifest", "fetch", providerRepo+"@"+pManifest)
	refusedByOras("provider blob", "blob", "fetch", "-o", filepath.Join(dir, "pblob"), providerRepo+"@"+pLayers[0])
	refusedByOras("module pull", "pull", "-o", filepath.Join(dir, "m2"), moduleRepo+":1.0.0")
	refusedByOras("module manifest by tag", "manifest", "fetch", moduleRepo+":1.0.0")
	refusedByOras("module manifest by digest", "manifest", "fetch", moduleRepo+"@"+mManifest)
	refusedByOras("module blob", "blob", "fetch", "-o", filepath.Join(dir, "mblob"), moduleRepo+"@"+mLayers[0])
	if _, err := m.oras(dir, mirrorCA, "pull", "-o", filepath.Join(dir, "m3"), moduleRepo+":1.1.0"); err != nil {
		t.Errorf("oras pull of the allowed module version: %v", err)
	}

	status := func(path string) (int, string) {
		t.Helper()
		_, resp, err := m.get(ctx, path)
		if resp == nil {
			t.Fatalf("%s: %v", path, err)
		}
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		return resp.StatusCode, msg
	}
	for _, path := range []string{
		"/" + proxy.RegistryPath(host) + "acme/widget/1.1.0/download/linux/amd64",
		modules + "acme/vpc/aws/1.0.0/download",
		"/" + host + "/acme/widget/1.1.0.json",
	} {
		if code, msg := status(path); code != http.StatusUnavailableForLegalReasons || !strings.Contains(msg, "CVE-2026-7777") {
			t.Errorf("%s: %d %s, want 451 with the reason", path, code, msg)
		}
	}
	// Under the age gate, 1.1.0 first listed a second ago is held
	// however it is spelled, by the client or by the origin.
	for _, name := range []string{"net", "edge"} {
		for _, v := range []string{"1.1.0", "v1.1.0"} {
			path := modules + "acme/" + name + "/aws/" + v + "/download"
			if code, msg := status(path); code != http.StatusUnavailableForLegalReasons || !strings.Contains(msg, "minimum release age") {
				t.Errorf("%s: %d %s, want 451 held by the minimum release age", path, code, msg)
			}
		}
		if code, msg := status(modules + "acme/" + name + "/aws/1.0.0/download"); code != http.StatusNoContent && code != http.StatusOK {
			t.Errorf("%s 1.0.0 download: %d %s", name, code, msg)
		}
	}
	// Denied whole: 404 at once, the origin not asked.
	origin.ResetHits()
	for _, path := range []string{
		"/" + host + "/acme/evil/index.json",
		"/" + proxy.RegistryPath(host) + "acme/evil/versions",
		"/v2/" + names.Provider(addrs.Provider{Hostname: p.Hostname, Namespace: "acme", Type: "evil"}) + "/tags/list",
	} {
		if code, msg := status(path); code != http.StatusNotFound || !strings.Contains(msg, "compromised: use acme/widget") {
			t.Errorf("%s: %d %s, want 404 with the deny's reason", path, code, msg)
		}
	}
	if n := origin.TotalHits(); n != 0 {
		t.Errorf("%d origin requests for a denied address", n)
	}

	// The OCI layout export leaves the denied versions out.
	layout := filepath.Join(t.TempDir(), "layout")
	ectx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ectx, bin, "export", "--data-dir", dataDir, "--format", "oci-layout", layout).CombinedOutput()
	if err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	tags := func(repo string) []string {
		var idx ocispec.Index
		b, err := os.ReadFile(filepath.Join(layout, filepath.FromSlash(repo), "index.json"))
		if err != nil {
			return nil
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range idx.Manifests {
			out = append(out, d.Annotations[ocispec.AnnotationRefName])
		}
		return out
	}
	if got := tags(names.Module(vpc)); strings.Join(got, ",") != "1.1.0" {
		t.Errorf("the module's tags in the layout: %v, want 1.1.0 alone (1.0.0 denied)\n%s", got, out)
	}
	if got := tags(names.Provider(p)); len(got) != 0 {
		t.Errorf("the provider's tags in the layout: %v, want none (1.1.0 denied)\n%s", got, out)
	}
	if !strings.Contains(string(out), "CVE-2026-7777") {
		t.Errorf("the export does not report what it left out:\n%s", out)
	}
}

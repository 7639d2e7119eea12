package main

// End-to-end tests of the package policy: the real terraform binary
// installs through a mirror whose configuration file holds a policy
// block, changed by SIGHUP while it serves.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// logLines collects a JSON log and wakes whoever waits for a line.
type logLines struct {
	mu      sync.Mutex
	lines   []map[string]any
	changed chan struct{}
}

// newPolicyE2E is the rig of the policy's end-to-end tests: terraform, a
// fake origin serving the e2e hosts, a configuration file to write, and
// the mirror's log lines.
func newPolicyE2E(t *testing.T) (*e2e, *logLines) {
	t.Helper()
	logs := newLogLines()
	e := &e2e{t: t, tf: terraformBinary(t), logTo: logs, config: filepath.Join(t.TempDir(), "tfmirror.hcl")}
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: e2eOrigins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	e.origin = origin
	return e, logs
}

func newLogLines() *logLines { return &logLines{changed: make(chan struct{})} }

func (l *logLines) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(p))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	l.mu.Lock()
	defer l.mu.Unlock()
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			l.lines = append(l.lines, line)
		}
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

// count returns how many lines have message msg, and the changes channel
// to wait on for more.
func (l *logLines) count(msg string) (int, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if line["msg"] == msg {
			n++
		}
	}
	return n, l.changed
}

// waitFor waits until n lines have message msg.
func (l *logLines) waitFor(t *testing.T, msg string, n int) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		got, changed := l.count(msg)
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("the log has %d lines %q after 30s, want %d", got, msg, n)
		}
	}
}

// find returns the lines with message msg whose attributes hold every
// pair of attrs.
func (l *logLines) find(msg string, attrs ...string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range l.lines {
		if line["msg"] != msg {
			continue
		}
		ok := true
		for i := 0; i+1 < len(attrs); i += 2 {
			ok = ok && fmt.Sprint(line[attrs[i]]) == attrs[i+1]
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// hangup sends SIGHUP to this process, in which e's mirror alone listens
// for it, and waits until the mirror has read its configuration file
// again: the (reloads+1)th line outcome says (applied or refused).
func (e *e2e) hangup(t *testing.T, logs *logLines, msg string, n int) {
	t.Helper()
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := self.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, msg, n)
}

// get fetches path of e's mirror.
func (e *e2e) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := trustingClient(t, e.caFile).Get(e.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// installed returns the versions of provider address terraform installed
// in dir.
func installed(t *testing.T, dir, address string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, ".terraform", "providers", address))
	if err != nil {
		t.Fatalf("no %s installed: %v", address, err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// installedModule returns the version of module key terraform installed
// in dir, from .terraform/modules/modules.json.
func installedModule(t *testing.T, dir, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".terraform", "modules", "modules.json"))
	if err != nil {
		t.Fatal(err)
	}
	var mj struct {
		Modules []struct{ Key, Version string }
	}
	if err := json.Unmarshal(b, &mj); err != nil {
		t.Fatal(err)
	}
	for _, m := range mj.Modules {
		if m.Key == key {
			return m.Version
		}
	}
	t.Fatalf("module %s not installed: %s", key, b)
	return ""
}

const cve = "CVE-2026-1234: use 1.1.0"

// policyConfig is the configuration file of the test with the policy
// block body.
func policyConfig(body string) string {
	return "policy {\n  allow = [\"" + privateRegistry + "/acme/*\", \"" + privateRegistry + "/acme/*/*\"]\n" + body + "}\n"
}

// TestTerraformPolicy: a mirror started with a configuration file whose
// policy allows only registry.example.test/acme/* and denies versions
// with a reason. A provider outside the allow list is neither listed nor
// served; terraform init with "~> 1.0" installs the newest allowed
// version through the network mirror and through the host block, and so
// does a module; a lock file pinning a denied version fails by both
// doors, with the reason in the registry's warnings that terraform
// prints, in the mirror's answers, its log and its status page. After a SIGHUP that
// sets a minimum release age of 72h, a version signed an hour ago is
// skipped (an older one installed); after one that exempts it, it is
// installed at once; a broken file changes nothing.
func TestTerraformPolicy(t *testing.T) {
	t.Parallel()
	e, logs := newPolicyE2E(t)
	origin := e.origin
	platforms := registryPlatforms()
	host := runtime.GOOS + "_" + runtime.GOARCH
	yearAgo := time.Now().AddDate(-1, 0, 0)
	origin.AddProvider("acme", "widget", []string{"1.0.0", "1.1.0", "1.2.0", "1.3.0"}, platforms)
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		origin.SetSignedAt("acme", "widget", v, yearAgo)
	}
	origin.SetSignedAt("acme", "widget", "1.3.0", time.Now().Add(-time.Hour))
	origin.AddProvider("other", "gadget", []string{"1.0.0"}, platforms)
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		file := "vpc-" + v + ".tar.gz"
		origin.AddTarball(file, fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("output \"v\" {\n  value = \"" + v + "\"\n}\n")}))
		origin.AddModule("acme", "vpc", "aws", v, origin.TarballURL(file))
	}
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(e.config, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(policyConfig(`  deny_version "` + privateRegistry + `/acme/widget" {
    versions = ">= 1.2.0"
    reason   = "` + cve + `"
  }
  deny_version "` + privateRegistry + `/acme/vpc/aws" {
    versions = "= 1.2.0"
    reason   = "` + cve + `"
  }
`))
	e.startMirror(filepath.Join(t.TempDir(), "data"))
	e.cliConf = filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(e.cliConf, []byte(fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", e.url)), 0o644); err != nil {
		t.Fatal(err)
	}
	hostBlock := throughMirrorAs(t, e, privateRegistry, "")
	widget := privateRegistry + "/acme/widget"
	root := map[string]string{"widget": widget + "@~> 1.0"}

	// Outside the allow list: neither listed nor served, by either door.
	for _, path := range []string{
		privateRegistry + "/other/gadget/index.json",
		privateRegistry + "/other/gadget/1.0.0.json",
		privateRegistry + "/other/gadget/terraform-provider-gadget_1.0.0_" + host + ".zip",
		proxy.RegistryPath(privateRegistry) + "other/gadget/versions",
		proxy.RegistryPath(privateRegistry) + "other/gadget/1.0.0/download/" + strings.ReplaceAll(host, "_", "/"),
	} {
		if status, body := e.get(t, path); status != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", path, status, body)
		}
	}
	if n := origin.ArchiveHits("other", "gadget", "1.0.0", host); n != 0 {
		t.Errorf("the origin was asked for the refused provider's archive %d times", n)
	}

	// terraform init with "~> 1.0": the newest allowed version, by both doors.
	dir := writeConfig(t, root)
	if out, err := e.terraform(dir, "init", "-no-color"); err != nil {
		t.Fatalf("terraform init through the network mirror: %v\n%s", err, out)
	}
	if got := installed(t, dir, widget); strings.Join(got, ",") != "1.1.0" {
		t.Errorf("through the network mirror, installed %v, want 1.1.0", got)
	}
	dir = writeConfig(t, root)
	hostBlock.run(t, dir, "init", "-no-color")
	if got := installed(t, dir, widget); strings.Join(got, ",") != "1.1.0" {
		t.Errorf("through the host block, installed %v, want 1.1.0", got)
	}

	// A lock file pinning the denied version fails; terraform prints the
	// registry's warning, which gives the reason.
	dir = writeConfig(t, root)
	archive := origin.Archive("acme", "widget", "1.2.0", host)
	h1, err := verify.H1(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatal(err)
	}
	lock := fmt.Sprintf("provider %q {\n  version     = \"1.2.0\"\n  constraints = \"~> 1.0\"\n  hashes = [\n    %q,\n  ]\n}\n", widget, h1)
	if err := os.WriteFile(filepath.Join(dir, ".terraform.lock.hcl"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := e.terraformWith(dir, hostBlock.conf, hostBlock.caFile, "init", "-no-color")
	if err == nil {
		t.Fatalf("terraform init with a lock file pinning the denied version succeeded:\n%s", out)
	}
	if !strings.Contains(strings.Join(strings.Fields(out), " "), cve) {
		t.Errorf("terraform's output does not give the reason %q:\n%s", cve, out)
	}
	// Through the network mirror too; its protocol has no warnings, but
	// its answers for the version give the reason.
	ndir := writeConfig(t, root)
	if err := os.WriteFile(filepath.Join(ndir, ".terraform.lock.hcl"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := e.terraform(ndir, "init", "-no-color"); err == nil || !strings.Contains(out, "1.2.0") {
		t.Fatalf("terraform init through the network mirror with a lock file pinning the denied version: %v\n%s", err, out)
	}
	for _, path := range []string{
		widget + "/1.2.0.json",
		widget + "/terraform-provider-widget_1.2.0_" + host + ".zip",
		proxy.RegistryPath(privateRegistry) + "acme/widget/1.2.0/download/" + strings.ReplaceAll(host, "_", "/"),
	} {
		if status, body := e.get(t, path); status != http.StatusUnavailableForLegalReasons || !strings.Contains(body, cve) {
			t.Errorf("%s: %d %s, want 451 with the reason", path, status, body)
		}
	}
	_, body := e.get(t, proxy.RegistryPath(privateRegistry)+"acme/widget/versions")
	var versionsDoc struct {
		Versions []struct{ Version string }
		Warnings []string
	}
	if err := json.Unmarshal([]byte(body), &versionsDoc); err != nil {
		t.Fatal(err)
	}
	if len(versionsDoc.Versions) != 2 || !strings.Contains(strings.Join(versionsDoc.Warnings, "\n"), "1.2.0 is held back") ||
		!strings.Contains(strings.Join(versionsDoc.Warnings, "\n"), cve) {
		t.Errorf("registry versions answer: %s", body)
	}

	// The same for a module: "~> 1.0" installs 1.1.0 through the host
	// block; the denied version's download answer gives the reason in the
	// body terraform prints.
	mdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(mdir, "main.tf"), []byte("module \"vpc\" {\n  source  = \""+privateRegistry+"/acme/vpc/aws\"\n  version = \"~> 1.0\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostBlock.run(t, mdir, "init", "-no-color")
	if got := installedModule(t, mdir, "vpc"); got != "1.1.0" {
		t.Errorf("module installed %s, want 1.1.0", got)
	}
	modules := proxy.ModulesPath(privateRegistry)
	_, body = e.get(t, modules+"acme/vpc/aws/versions")
	if strings.Contains(body, `"1.2.0"`) || !strings.Contains(body, `"1.1.0"`) {
		t.Errorf("module versions answer lists the denied version, or not the allowed one: %s", body)
	}
	if status, body := e.get(t, modules+"acme/vpc/aws/1.2.0/download"); status != http.StatusUnavailableForLegalReasons || !strings.Contains(body, cve) {
		t.Errorf("download of the denied module version: %d %s, want 451 with the reason", status, body)
	}
	if status, _ := e.get(t, modules+"other/vpc/aws/versions"); status != http.StatusNotFound {
		t.Errorf("a module outside the allow list: %d, want 404", status)
	}

	// The log says it once per version and rule; the status page lists it.
	for _, addr := range []string{widget, privateRegistry + "/acme/vpc/aws"} {
		held := logs.find("held back by the package policy", "address", addr, "version", "1.2.0", "rule", "deny_version")
		if len(held) != 1 || held[0]["reason"] != cve {
			t.Errorf("log lines on %s 1.2.0: %v, want one with the reason", addr, held)
		}
	}
	var st proxy.Status
	_, body = e.get(t, "?format=json")
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, w := range st.Withheld {
		reasons[w.Provider+" "+w.Version] = w.Rule + ": " + w.Reason
	}
	for _, k := range []string{widget + " 1.2.0", widget + " 1.3.0", privateRegistry + "/acme/vpc/aws 1.2.0"} {
		if reasons[k] != "deny_version: "+cve {
			t.Errorf("status page on %s: %q, want deny_version with the reason (all: %v)", k, reasons[k], reasons)
		}
	}
	if st.HeldBack == nil || !strings.HasPrefix(st.HeldBack.Text, "held back: ") {
		t.Errorf("status page summary: %+v", st.HeldBack)
	}
	if _, page := e.get(t, ""); !strings.Contains(page, cve) || !strings.Contains(page, `<table id="held">`) {
		t.Error("the status page's HTML does not list the held versions with their reason")
	}

	// SIGHUP: a minimum release age of 72h instead of the denials. 1.3.0,
	// signed an hour ago, is skipped; 1.2.0 installed.
	write(policyConfig("  minimum_release_age = \"72h\"\n"))
	e.hangup(t, logs, "configuration file reloaded", 1)
	dir = writeConfig(t, root)
	if out, err := e.terraform(dir, "init", "-no-color"); err != nil {
		t.Fatalf("terraform init with the age gate: %v\n%s", err, out)
	}
	if got := installed(t, dir, widget); strings.Join(got, ",") != "1.2.0" {
		t.Errorf("with the age gate, installed %v, want 1.2.0", got)
	}
	status, body := e.get(t, widget+"/1.3.0.json")
	if status != http.StatusUnavailableForLegalReasons || !strings.Contains(body, "minimum release age") || !strings.Contains(body, "available at") {
		t.Errorf("1.3.0.json inside the window: %d %s, want 451 saying when", status, body)
	}

	// A broken file is refused whole: the age gate stays.
	write(policyConfig("  minimum_release_age = \"soon\"\n"))
	e.hangup(t, logs, "configuration file refused; the configuration in force stays", 1)
	if status, _ := e.get(t, widget+"/1.3.0.json"); status != http.StatusUnavailableForLegalReasons {
		t.Errorf("after a refused reload, 1.3.0.json: %d, want 451", status)
	}

	// SIGHUP: an exemption for 1.3.0 makes it installable at once.
	write(policyConfig(`  minimum_release_age = "72h"
  release_age_exempt_version "` + widget + `" {
    versions = "= 1.3.0"
    reason   = "urgent fix"
  }
`))
	e.hangup(t, logs, "configuration file reloaded", 2)
	dir = writeConfig(t, root)
	hostBlock.run(t, dir, "init", "-no-color")
	if got := installed(t, dir, widget); strings.Join(got, ",") != "1.3.0" {
		t.Errorf("with the exemption, installed %v, want 1.3.0", got)
	}
}

// TestTerraformModuleAgeGateEverySpelling: two modules under a minimum
// release age of 72h, whose 1.1.0 appears a second after their first
// listing, one spelled "v1.1.0" by the origin and one "1.1.0". terraform
// init with "~> 1.0" installs 1.0.0 of each (1.1.0 held), asking for
// 1.1.0 exactly fails, and the download answer of 1.1.0 is 451, asked
// for as "1.1.0" or "v1.1.0": the release time is the version's, not
// the spelling's.
func TestTerraformModuleAgeGateEverySpelling(t *testing.T) {
	t.Parallel()
	e, _ := newPolicyE2E(t)
	origin := e.origin
	spelled := map[string]string{"net": "v1.1.0", "edge": "1.1.0"}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		origin.AddTarball("m-"+v+".tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("output \"v\" {\n  value = \"" + v + "\"\n}\n")}))
	}
	for name := range spelled {
		origin.AddModule("acme", name, "aws", "1.0.0", origin.TarballURL("m-1.0.0.tar.gz"))
	}
	if err := os.WriteFile(e.config, []byte("versions_ttl = \"1s\"\n"+policyConfig(`  release_age "`+privateRegistry+`/acme/*/*" { minimum = "72h" }
`)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.startMirror(filepath.Join(t.TempDir(), "data"))
	hostBlock := throughMirrorAs(t, e, privateRegistry, "")
	initModule := func(name, constraint string) (string, string, error) {
		t.Helper()
		dir := t.TempDir()
		src := "module \"m\" {\n  source  = \"" + privateRegistry + "/acme/" + name + "/aws\"\n  version = \"" + constraint + "\"\n}\n"
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := e.terraformWith(dir, hostBlock.conf, hostBlock.caFile, "init", "-no-color")
		return dir, out, err
	}
	// The first listing (the bootstrap: its versions pass).
	for name := range spelled {
		dir, out, err := initModule(name, "~> 1.0")
		if err != nil {
			t.Fatalf("terraform init of %s: %v\n%s", name, err, out)
		}
		if got := installedModule(t, dir, "m"); got != "1.0.0" {
			t.Fatalf("%s: installed %s, want 1.0.0", name, got)
		}
	}
	for name, v := range spelled {
		origin.AddModule("acme", name, "aws", v, origin.TarballURL("m-1.1.0.tar.gz"))
	}
	time.Sleep(1100 * time.Millisecond) // the lists' TTL: the next listing sees 1.1.0
	modules := proxy.ModulesPath(privateRegistry)
	for name := range spelled {
		dir, out, err := initModule(name, "~> 1.0")
		if err != nil {
			t.Fatalf("terraform init of %s after 1.1.0 appeared: %v\n%s", name, err, out)
		}
		if got := installedModule(t, dir, "m"); got != "1.0.0" {
			t.Errorf("%s: installed %s, want 1.0.0 (1.1.0 held by its age)", name, got)
		}
		if _, out, err := initModule(name, "1.1.0"); err == nil {
			t.Errorf("%s: terraform init of 1.1.0 exactly succeeded:\n%s", name, out)
		}
		for _, asked := range []string{"1.1.0", "v1.1.0"} {
			status, body := e.get(t, modules+"acme/"+name+"/aws/"+asked+"/download")
			if status != http.StatusUnavailableForLegalReasons || !strings.Contains(body, "minimum release age") {
				t.Errorf("%s (origin spells %s) download asked as %s: %d %s, want 451 held by its age", name, spelled[name], asked, status, body)
			}
		}
	}
}

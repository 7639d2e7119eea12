package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestReloadCommandProcess runs tfmirror serve with a configuration file
// and tfmirror reload as processes of their own: a changed setting and a
// changed policy are put in force and printed (the rules added and
// removed, as config check lists them); a policy-only change is a change,
// in the output and the log; a broken file exits 1 with the reason and the
// configuration in force stays; SIGHUP still reloads; and with no serve
// on the data directory the command says so and exits 1.
func TestReloadCommandProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const ns, typ, version = "hashicorp", "random", "1.0.0"
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider(ns, typ, []string{version}, []string{"linux_amd64"})
	origin.AddProvider("acme", "widget", []string{version}, []string{"linux_amd64"})
	caFile := originCAFile(t, origin)
	dataDir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(t.TempDir(), "tfmirror.hcl")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	denyAcme := fmt.Sprintf("policy {\n  deny = [%q]\n}\n", origin.Addr+"/acme/*")
	write("log_level = \"info\"\nversions_ttl = \"10m\"\n" + denyAcme)
	m := startProcess(t, bin, dataDir, origin, caFile, "--config", path)
	ctx := context.Background()

	// reload runs tfmirror reload on the data directory, as systemd's
	// ExecReload does (the environment names it).
	reload := func(env ...string) (code int, stdout, stderr string) {
		t.Helper()
		stdout, stderr, code = runProcessEnv(t, bin, "", append(os.Environ(), env...), "reload")
		return code, stdout, stderr
	}
	served := func(ns, typ string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s%s/%s/%s/index.json", m.url, origin.Addr, ns, typ), nil)
		resp, err := m.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	env := "TFMIRROR_DATA_DIR=" + dataDir
	if got := served("acme", "widget"); got == http.StatusOK {
		t.Fatalf("acme/widget served (%d) under a policy that denies it", got)
	}

	// A setting and the policy change: deny hashicorp/* instead of acme/*.
	denyHashicorp := fmt.Sprintf("policy {\n  deny = [%q]\n}\n", origin.Addr+"/hashicorp/*")
	write("log_level = \"debug\"\nversions_ttl = \"20m\"\n" + denyHashicorp)
	code, stdout, stderr := reload(env)
	if code != 0 {
		t.Fatalf("tfmirror reload: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		path + ": reloaded",
		`log_level: "info" -> "debug"`,
		`versions_ttl: "10m0s" -> "20m0s" (takes effect after a restart; "10m0s" stays in force)`,
		"policy: 1 rule added, 1 rule removed",
		fmt.Sprintf("- deny %q (%s:4)", origin.Addr+"/acme/*", path),
		fmt.Sprintf("+ deny %q (%s:4)", origin.Addr+"/hashicorp/*", path),
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("tfmirror reload's output lacks %q:\n%s", want, stdout)
		}
	}
	if got := served("acme", "widget"); got != http.StatusOK {
		t.Errorf("acme/widget after the reload: status %d, want 200", got)
	}
	if got := served(ns, typ); got == http.StatusOK {
		t.Errorf("hashicorp/random served after the reload denied it")
	}
	m.waitLog("configuration file reloaded", 10*time.Second)

	// The rules config check lists are the ones reload names.
	var checkOut bytes.Buffer
	check := exec.Command(bin, "config", "check", path)
	check.Stdout = &checkOut
	if err := check.Run(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(checkOut.String(), fmt.Sprintf("  deny %q (%s:4)\n", origin.Addr+"/hashicorp/*", path)) {
		t.Errorf("config check lists the rule otherwise than reload:\n%s", checkOut.String())
	}

	// A rule that only moved to another line is no change.
	write("log_level = \"debug\"\n\nversions_ttl = \"20m\"\n" + denyHashicorp)
	if code, stdout, _ = reload(env); code != 0 || strings.Contains(stdout, "policy:") || !strings.Contains(stdout, "nothing changed in force") {
		t.Errorf("a moved rule: exit %d\n%s", code, stdout)
	}

	// A policy-only change is reported as one, and logged as one.
	lines := len(m.snapshot())
	write("log_level = \"debug\"\nversions_ttl = \"20m\"\n" + denyAcme)
	code, stdout, stderr = reload(env)
	if code != 0 || !strings.Contains(stdout, "policy: 1 rule added, 1 rule removed") || strings.Contains(stdout, "nothing changed") {
		t.Errorf("policy-only reload: exit %d\n%s%s", code, stdout, stderr)
	}
	reloaded := func(from int, changed string) {
		t.Helper()
		m.waitLines(func() bool {
			for _, l := range m.snapshot()[from:] {
				if l["msg"] == "configuration file reloaded" && fmt.Sprint(l["changed"]) == changed {
					return true
				}
			}
			return false
		})
	}
	reloaded(lines, "[policy]")

	// The same file again: nothing changed (but what waits for a restart).
	if code, stdout, _ = reload(env); code != 0 || strings.Contains(stdout, "log_level") || strings.Contains(stdout, "policy:") {
		t.Errorf("unchanged file: exit %d\n%s", code, stdout)
	}

	// A broken file: exit 1 with the reason; the configuration stays.
	write("log_level = \"warn\"\npolicy {\n  deny = [\"not a pattern at all\"]\n}\n")
	code, stdout, stderr = reload(env, "TFMIRROR_CONFIG="+path) // the command itself does not read the file
	if code != 1 || !strings.Contains(stderr, path+":3") || !strings.Contains(stderr, "the configuration in force stays") {
		t.Errorf("broken file: exit %d, want 1 naming %s:3\nstdout: %s\nstderr: %s", code, path, stdout, stderr)
	}
	if got := served(ns, typ); got != http.StatusOK {
		t.Errorf("after a refused reload hashicorp/random: status %d, want 200 (the policy in force stays)", got)
	}
	if got := served("acme", "widget"); got == http.StatusOK {
		t.Error("after a refused reload acme/widget is served")
	}

	// A proxy URL the file gets wrong is refused without its password:
	// not in reload's answer, not in the serve's log (nor the audit log).
	for _, proxy := range []string{"ftp://user:hunter2-secret@proxy.example:3128", "user:hunter2-secret@proxy.example:3128"} {
		write("log_level = \"info\"\nupstream_proxy = \"" + proxy + "\"\n" + denyHashicorp)
		lines = len(m.snapshot())
		code, stdout, stderr = reload(env)
		if code != 1 || !strings.Contains(stderr, "upstream-proxy") || strings.Contains(stdout+stderr, "hunter2") {
			t.Errorf("a bad upstream_proxy: exit %d, want 1 naming the setting without its password\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		m.waitLines(func() bool {
			for _, l := range m.snapshot()[lines:] {
				if l["msg"] == "admin request failed" {
					return true
				}
			}
			return false
		})
		for _, l := range m.snapshot()[lines:] {
			if strings.Contains(fmt.Sprint(l), "hunter2") {
				t.Errorf("the serve logged the proxy's password: %v", l)
			}
		}
	}

	// SIGHUP goes the same way.
	write("log_level = \"info\"\nversions_ttl = \"20m\"\n" + denyHashicorp)
	lines = len(m.snapshot())
	m.cmd.Process.Signal(syscall.SIGHUP)
	reloaded(lines, "[log_level policy]")
	if got := served(ns, typ); got == http.StatusOK {
		t.Error("hashicorp/random served after SIGHUP put the policy denying it in force")
	}

	// No serve on the data directory: exit 1, saying so.
	other := t.TempDir()
	if code, _, stderr = reload("TFMIRROR_DATA_DIR=" + other); code != 1 || !strings.Contains(stderr, "no tfmirror serves the data directory "+other) {
		t.Errorf("reload without a serve: exit %d\n%s", code, stderr)
	}

	m.cmd.Process.Signal(syscall.SIGTERM)
	if err := m.wait(30 * time.Second); err != nil {
		t.Fatalf("tfmirror exited with %v", err)
	}
}

// snapshot is a copy of the log lines so far.
func (p *proc) snapshot() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]any(nil), p.lines...)
}

// TestReloadConfigNamesOnlyTheDataDirectory: `tfmirror reload --config
// FILE` reads FILE for the data directory alone; the serve reads its own
// configuration file again, whatever FILE is. When FILE is not the file
// the serve reads, the command says so, naming both, so that an operator
// who meant to put FILE in force does not take the reload of the other
// for it; with the serve's own file it says nothing of the kind, however
// each names it (a serve given a relative path warned of every reload).
func TestReloadConfigNamesOnlyTheDataDirectory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	caFile := originCAFile(t, origin)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	served := filepath.Join(dir, "tfmirror.hcl")
	other := filepath.Join(dir, "new.hcl")
	for path, content := range map[string]string{
		served: "log_level = \"info\"\n",
		other:  fmt.Sprintf("data_dir = %q\nlog_level = \"debug\"\n", dataDir),
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The serve given its file by a relative path, as an operator in its
	// directory would: the reload of another directory still knows it.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	relServed, err := filepath.Rel(wd, served)
	if err != nil {
		t.Fatal(err)
	}
	startProcess(t, bin, dataDir, origin, caFile, "--config", relServed)
	reload := func(args ...string) (int, string, string) {
		t.Helper()
		stdout, stderr, code := runProcess(t, bin, dir, append([]string{"reload"}, args...)...)
		return code, stdout, stderr
	}
	code, stdout, stderr := reload("--config", other)
	if code != 0 || !strings.Contains(stdout, served+": reloaded") ||
		!strings.Contains(stderr, "reads its own configuration file "+served) || !strings.Contains(stderr, other) {
		t.Errorf("reload --config %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant the serve's own file reloaded, and said to be another than %s", other, code, stdout, stderr, other)
	}
	for _, own := range []string{served, "tfmirror.hcl"} {
		if code, stdout, stderr := reload("--data-dir", dataDir, "--config", own); code != 0 || stderr != "" || !strings.Contains(stdout, served+": reloaded") {
			t.Errorf("reload --config %s, the serve's own file: exit %d\nstdout:\n%s\nstderr:\n%s\nwant it reloaded, nothing on stderr", own, code, stdout, stderr)
		}
	}
}

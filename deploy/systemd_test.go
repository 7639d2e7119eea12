package deploy_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------
// systemd

func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	unit := readUnit(t, "systemd/tfmirror.service")
	want := map[string]string{
		"DynamicUser":     "yes",
		"ProtectSystem":   "strict",
		"StateDirectory":  "tfmirror",
		"NoNewPrivileges": "yes",
		"PrivateTmp":      "yes",
		"ProtectHome":     "yes",
	}
	for k, v := range want {
		if !slices.Contains(unit[k], v) {
			t.Errorf("%s=%v, want %s", k, unit[k], v)
		}
	}
	if len(unit["ExecStart"]) != 1 || !strings.HasSuffix(unit["ExecStart"][0], "tfmirror serve") {
		t.Errorf("ExecStart %v, want .../tfmirror serve", unit["ExecStart"])
	}
	// systemctl reload runs tfmirror reload, which exits 1 when the file
	// is refused, so that the reload is reported as failed.
	if len(unit["ExecReload"]) != 1 || unit["ExecReload"][0] != strings.TrimSuffix(unit["ExecStart"][0], " serve")+" reload" {
		t.Errorf("ExecReload %v, want the binary of ExecStart with reload", unit["ExecReload"])
	}
	env := map[string]string{}
	for _, e := range unit["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	// The cache lives in the StateDirectory, the only writable place.
	if env["TFMIRROR_DATA_DIR"] != "/var/lib/"+unit["StateDirectory"][0] {
		t.Errorf("TFMIRROR_DATA_DIR=%q, want the StateDirectory /var/lib/%s", env["TFMIRROR_DATA_DIR"], unit["StateDirectory"][0])
	}
	// The state directory's mode is one tfmirror keeps: it takes from its
	// data directory the bits of its group and other users, so with any
	// other mode each start would change it (and log so), and systemd
	// would find it changed at the next.
	if mode, err := strconv.ParseUint(strings.Join(unit["StateDirectoryMode"], ""), 8, 32); err != nil {
		t.Errorf("StateDirectoryMode %v: %v", unit["StateDirectoryMode"], err)
	} else {
		state := filepath.Join(t.TempDir(), "state")
		if err := os.Mkdir(state, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(state, os.FileMode(mode)); err != nil {
			t.Fatal(err)
		}
		bin := binary(t) // the build first: the timeout is the run's
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		// It stops at the missing certificate, after preparing the
		// directory.
		out, _ := exec.CommandContext(ctx, bin, "serve", "--data-dir", state, "--listen", "127.0.0.1:0", "--metrics-listen", "",
			"--tls-cert", filepath.Join(state, "missing.pem"), "--tls-key", filepath.Join(state, "missing-key.pem")).CombinedOutput()
		cancel()
		if fi, err := os.Stat(state); err != nil {
			t.Fatal(err)
		} else if got := fi.Mode().Perm(); uint64(got) != mode {
			t.Errorf("StateDirectoryMode=%04o: tfmirror serve makes it %04o at each start:\n%s", mode, got, out)
		}
	}
	stop, err := time.ParseDuration(strings.Join(unit["TimeoutStopSec"], ""))
	if err != nil || stop <= 30*time.Second {
		t.Errorf("TimeoutStopSec %v: want longer than the 30s shutdown timeout", unit["TimeoutStopSec"])
	}
	// The example environment file, commented lines included.
	data, err := os.ReadFile("systemd/tfmirror.env")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "#")
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(k, " \t") {
			continue
		}
		listed[k] = true
		if strings.HasPrefix(k, "TFMIRROR_") {
			env[k] = v
		}
	}
	// The configuration file, the origin CA and the proxy settings are
	// where an operator looks for them.
	for _, k := range []string{"TFMIRROR_CONFIG", "TFMIRROR_ORIGIN_CA_FILE", "HTTPS_PROXY", "NO_PROXY", "TFMIRROR_UPSTREAM_PROXY"} {
		if !listed[k] {
			t.Errorf("tfmirror.env does not list %s", k)
		}
	}
	// The configuration file is read as the values are checked: one that
	// exists, empty.
	if env["TFMIRROR_CONFIG"] != "" {
		conf := filepath.Join(t.TempDir(), "tfmirror.hcl")
		if err := os.WriteFile(conf, []byte("# settings\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env["TFMIRROR_CONFIG"] = conf
	}
	checkEnv(t, "systemd unit and tfmirror.env", env)

	// systemd's own parser, where installed: unknown keys or values are
	// reported (and ignored by systemd, which would silently weaken the sandbox).
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed; unit not verified by systemd")
		return
	}
	dir := t.TempDir()
	text, err := os.ReadFile("systemd/tfmirror.service")
	if err != nil {
		t.Fatal(err)
	}
	text = bytes.ReplaceAll(text, []byte("/usr/local/bin/tfmirror"), []byte(binary(t)))
	path := filepath.Join(dir, "tfmirror.service")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", path).CombinedOutput()
	var complaints []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "tfmirror.service") {
			complaints = append(complaints, l)
		}
	}
	if err != nil || len(complaints) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, strings.Join(complaints, "\n"))
	}
}

// TestSystemdUnitSecretFiles: the unit runs as a dynamic user, which
// cannot read a file only root may read (the client tokens, a key), so
// the example files show how it gets one: a LoadCredential= of the unit,
// its copy named in tfmirror.env. That copy is made at each start and a
// reload reads it unchanged: a token removed from the host's file stayed
// accepted after `systemctl reload` said it had read the file again. The
// unit tells to restart for such a file.
func TestSystemdUnitSecretFiles(t *testing.T) {
	t.Parallel()
	const credentials = "/run/credentials/tfmirror.service/"
	text, err := os.ReadFile("systemd/tfmirror.service")
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]bool{}
	for _, line := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimLeft(strings.TrimSpace(line), "#"), "LoadCredential="); ok {
			id, _, _ := strings.Cut(v, ":")
			loaded[id] = true
		}
	}
	env, err := os.ReadFile("systemd/tfmirror.env")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, line := range strings.Split(string(env), "\n") {
		k, v, ok := strings.Cut(strings.TrimLeft(strings.TrimSpace(line), "#"), "=")
		if ok && strings.HasPrefix(v, credentials) {
			files[k] = v
		}
	}
	for _, k := range []string{"TFMIRROR_TLS_KEY", "TFMIRROR_AUTH_TOKENS_FILE"} {
		if files[k] == "" {
			t.Errorf("tfmirror.env shows no %s read from a credential (%s...): the dynamic user cannot read a file only root may", k, credentials)
		}
	}
	for k, v := range files {
		if id := strings.TrimPrefix(v, credentials); !loaded[id] {
			t.Errorf("tfmirror.env: %s=%s, and the unit loads no credential %s (LoadCredential=%s:...)", k, v, id, id)
		}
	}
	if !regexp.MustCompile(`(?s)LoadCredential=.*systemctl restart tfmirror|systemctl restart tfmirror.*LoadCredential=`).Match(text) {
		t.Error("the unit does not say that a credential is copied at start only: after changing its file, systemctl restart tfmirror (a reload reads the copy)")
	}
}

// readUnit reads a unit file's Key=Value lines (all sections).
func readUnit(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s: line %q is not Key=Value", path, line)
			continue
		}
		out[k] = append(out[k], v)
	}
	return out
}

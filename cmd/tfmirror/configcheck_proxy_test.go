package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/discovery"
)

// TestConfigCheckJudgesTheProxyEnvironment: config check says what serve
// would do with the proxy variables of the environment it runs in. A
// proxy variable serve refuses at start (an HTTPS_PROXY with a scheme
// net/http does not speak, or one the standard rules cannot read) is
// refused with serve's own message and exit status 1; otherwise the
// output names the proxy origin requests would go through (its scheme
// and host, never its user or password) and, for each allowed origin,
// whether it goes through it or direct (NO_PROXY), and warns of the
// variables set that origin requests do not read (ALL_PROXY,
// HTTP_PROXY). With upstream_proxy set, serve reads no proxy variable,
// and config check neither; with --skip-files (a file for another
// machine) it judges this environment's neither, and says so.
func TestConfigCheckJudgesTheProxyEnvironment(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	withUpstream := filepath.Join(dir, "upstream.hcl")
	for file, body := range map[string]string{
		conf:         `allowed_origins = ["registry.terraform.io", "tf.corp.example"]` + "\n",
		withUpstream: `allowed_origins = ["registry.terraform.io"]` + "\n" + `upstream_proxy = "socks5://mirror:s3cret-up@egress.corp.example:1080"` + "\n",
	} {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := func(kv ...string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == name {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	// serve's refusal at start, in its words.
	serveSays := func(t *testing.T, kv ...string) string {
		t.Helper()
		var environ []string
		for i := 0; i+1 < len(kv); i += 2 {
			environ = append(environ, kv[i]+"="+kv[i+1])
		}
		var dc discovery.Config
		err := originNetwork(&dc, settings.Config{}, overrides{environ: environ}, slog.New(slog.DiscardHandler))
		if err == nil {
			t.Fatalf("serve accepts %q", environ)
		}
		return err.Error()
	}

	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"SOCKS4", []string{"HTTPS_PROXY", "socks4://mirror:s3cret@proxy.corp.example:1080"}},
		{"unreadable password", []string{"https_proxy", "http://mirror:s3cret%zz@proxy.corp.example:3128"}},
		{"no host", []string{"HTTPS_PROXY", "http://"}},
		{"no host, a port", []string{"HTTPS_PROXY", "http://mirror:s3cret@:3128"}},
		{"a port out of range", []string{"HTTPS_PROXY", "http://mirror:s3cret@proxy.corp.example:65536"}},
		// A "/" of the password not percent-encoded ends the host there:
		// every request would go to the host "mirror".
		{"a password holding a /", []string{"HTTPS_PROXY", "http://mirror:/s3cret@proxy.corp.example:3128"}},
		{"a path", []string{"HTTPS_PROXY", "http://proxy.corp.example:3128/s3cret"}},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runConfig([]string{"check", conf}, env(tc.env...), &stdout, &stderr)
			if want := "tfmirror config check: " + serveSays(t, tc.env...) + "\n"; code != 1 || !strings.Contains(stderr.String(), want) {
				t.Errorf("exit status %d, want 1 and %q:\n%s%s", code, want, stdout.String(), stderr.String())
			}
			if strings.Contains(stdout.String()+stderr.String(), "s3cret") {
				t.Errorf("the output names the password:\n%s%s", stdout.String(), stderr.String())
			}
		})
	}

	for _, tc := range []struct {
		name  string
		args  []string
		env   []string
		wants []string
	}{
		{"HTTPS_PROXY and NO_PROXY", []string{conf},
			[]string{"HTTPS_PROXY", "http://mirror:s3cret@proxy.corp.example:3128", "NO_PROXY", ".corp.example"},
			[]string{"ORIGIN PROXY: http://proxy.corp.example:3128 (HTTPS_PROXY of this environment), except the hosts of NO_PROXY (.corp.example)",
				"registry.terraform.io  through http://proxy.corp.example:3128 (HTTPS_PROXY)\n",
				"tf.corp.example        direct (NO_PROXY"}},
		{"SOCKS5 in https_proxy", []string{conf},
			[]string{"https_proxy", "socks5h://mirror:s3cret@proxy.corp.example:1080"},
			[]string{"ORIGIN PROXY: socks5h://proxy.corp.example:1080 (HTTPS_PROXY of this environment)",
				"tf.corp.example        through socks5h://proxy.corp.example:1080 (HTTPS_PROXY)\n"}},
		{"ALL_PROXY alone", []string{conf},
			[]string{"ALL_PROXY", "socks5://mirror:s3cret@proxy.corp.example:1080"},
			[]string{"ORIGIN PROXY: none: origin requests go direct",
				"warning: ALL_PROXY set, but origin requests read HTTPS_PROXY only",
				"registry.terraform.io  direct\n"}},
		{"upstream_proxy wins", []string{withUpstream},
			[]string{"HTTPS_PROXY", "socks4://mirror:s3cret@proxy.corp.example:1080"},
			[]string{"ORIGIN PROXY: socks5://egress.corp.example:1080 (upstream_proxy)",
				"registry.terraform.io  through socks5://egress.corp.example:1080 (upstream_proxy)\n"}},
		{"--skip-files", []string{"--skip-files", conf},
			[]string{"HTTPS_PROXY", "socks4://mirror:s3cret@proxy.corp.example:1080"},
			[]string{"not checked (--skip-files): the files it names, the proxy and TF_TOKEN_ variables of this environment"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runConfig(append([]string{"check"}, tc.args...), env(tc.env...), &stdout, &stderr); code != 0 {
				t.Fatalf("exit status %d:\n%s%s", code, stdout.String(), stderr.String())
			}
			for _, want := range tc.wants {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("the output does not say %q:\n%s", want, stdout.String())
				}
			}
			if strings.Contains(stdout.String()+stderr.String(), "s3cret") {
				t.Errorf("the output names a password:\n%s%s", stdout.String(), stderr.String())
			}
		})
	}
}

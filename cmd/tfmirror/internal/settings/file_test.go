package settings

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// writeFile writes content to a file named name in a new directory, mode
// 0600, and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// load reads a serve configuration from args, env and the file they name.
func load(t *testing.T, args []string, env map[string]string) (*Effective, error) {
	t.Helper()
	var e Effective
	fs := allSettings(&e.Config)
	var path string
	AddConfigFlag(fs, &path)
	l, err := Load(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, AllNames())
	if err != nil {
		return nil, err
	}
	e.Loaded = l
	return &e, nil
}

// TestFileRefused feeds the reader files an operator might get wrong:
// each is refused whole, and the message names the file and the line.
func TestFileRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		line                string // "FILE:LINE" must appear, with the file's base name
		want                string // and this
	}{
		{"unknown attribute", "c.hcl", "listen = \":1\"\ncache_max_byte = \"1GiB\"\n", "c.hcl:2", "cache_max_byte"},
		{"flag spelling", "c.hcl", "\n\ncache-max-bytes = 1\n", "c.hcl:3", "cache-max-bytes"},
		{"bad duration", "c.hcl", "versions_ttl = \"10 minutes\"\n", "c.hcl:1", "versions_ttl"},
		{"duration as a number", "c.hcl", "\nversions_ttl = 600\n", "c.hcl:2", "duration"},
		{"bad size", "c.hcl", "# limits\ncache_max_bytes = \"lots\"\n", "c.hcl:2", "cache_max_bytes"},
		{"negative size", "c.hcl", "cache_max_bytes = -1\n", "c.hcl:1", "size"},
		{"fractional int", "c.hcl", "origin_retries = 1.5\n", "c.hcl:1", "whole number"},
		{"bool as a word", "c.hcl", "offline = \"yes\"\n", "c.hcl:1", "true or false"},
		{"string as a number", "c.hcl", "listen = 8443\n", "c.hcl:1", "want a string"},
		{"list of numbers", "c.hcl", "allowed_origins = [1, 2]\n", "c.hcl:1", "not a string"},
		{"list item with a comma", "c.hcl", "allowed_origins = [\"a.example,b.example\"]\n", "c.hcl:1", "comma"},
		{"null", "c.hcl", "log_level = null\n", "c.hcl:1", "null"},
		{"variable", "c.hcl", "log_level = var.level\n", "c.hcl:1", "literal"},
		{"function", "c.hcl", "data_dir = file(\"/etc/passwd\")\n", "c.hcl:1", "literal"},
		{"two policy blocks", "c.hcl", "policy {}\npolicy {}\n", "c.hcl:2", "policy"},
		{"unknown block", "c.hcl", "origin \"x\" {}\n", "c.hcl:1", "origin"},
		{"syntax", "c.hcl", "listen = \":1\"\nlisten\n", "c.hcl:2", ""},
		{"duplicate", "c.hcl", "listen = \":1\"\nlisten = \":2\"\n", "c.hcl:2", "listen"},
		{"json unknown", "c.json", "{\n  \"listen\": \":1\",\n  \"cache_max\": 1\n}\n", "c.json:3", "cache_max"},
		{"json wrong type", "c.json", "{\n  \"offline\": 1\n}\n", "c.json:2", "offline"},
		{"json bad size", "c.json", "{\"cache_max_bytes\": \"10 gigs\"}", "c.json:1", "cache_max_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.file, tc.content)
			_, err := load(t, []string{"--config", path}, nil)
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("accepted, or not as a file error: %v", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, path[:len(path)-len(tc.file)]+tc.line) || !strings.Contains(msg, tc.want) {
				t.Errorf("message %q does not name %s and %q", msg, tc.line, tc.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := load(t, []string{"--config", filepath.Join(t.TempDir(), "none.hcl")}, nil)
		if err == nil || !strings.Contains(err.Error(), "none.hcl") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("every error at once", func(t *testing.T) {
		path := writeFile(t, "c.hcl", "listen = 1\noffline = \"no way\"\nnope = 2\n")
		_, err := load(t, []string{"--config", path}, nil)
		for _, line := range []string{"c.hcl:1", "c.hcl:2", "c.hcl:3"} {
			if err == nil || !strings.Contains(err.Error(), line) {
				t.Errorf("%v: does not name %s", err, line)
			}
		}
	})
	t.Run("secret not quoted", func(t *testing.T) {
		path := writeFile(t, "c.hcl", "upstream_proxy = [\"http://user:hunter2-secret@proxy:3128\"]\n")
		_, err := load(t, []string{"--config", path}, nil)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("err %v", err)
		}
	})
}

// TestFileSyntaxes checks that each kind takes its HCL type and the
// flag's string syntax alike, in HCL and in JSON.
func TestFileSyntaxes(t *testing.T) {
	want := func(c Config) bool {
		return c.CacheMaxBytes == 10<<30 && c.OriginRetries == 5 && c.Offline && c.VersionsTTL == 72*time.Hour &&
			c.EvictUnusedAfter == 30*24*time.Hour && strings.Join(c.AllowedOrigins, " ") == "a.example b.example" &&
			c.Listen == ":1" && c.DiskReserve == 1024
	}
	for _, tc := range []struct{ name, file, content string }{
		{"hcl types", "c.hcl", `
cache_max_bytes = "10GiB"
disk_reserve = 1024
origin_retries = 5
offline = true
versions_ttl = "72h"
evict_unused_after = "30d"
allowed_origins = ["a.example", "b.example"]
listen = ":1"
`},
		{"flag syntax", "c.hcl", `
cache_max_bytes = "10 GiB"
disk_reserve = "1KiB"
origin_retries = "5"
offline = "true"
versions_ttl = "4320m"
evict_unused_after = "720h"
allowed_origins = "a.example, b.example"
listen = ":1"
`},
		{"json", "c.json", `{"cache_max_bytes": 10737418240, "disk_reserve": "1KiB", "origin_retries": 5, "offline": true,
"versions_ttl": "72h", "evict_unused_after": "30d", "allowed_origins": ["a.example", "b.example"], "listen": ":1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := load(t, []string{"--config", writeFile(t, tc.file, tc.content)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !want(e.Config) {
				t.Errorf("config %+v", e.Config)
			}
			if e.Sources["cache-max-bytes"] != FromFile || e.Sources["data-dir"] != FromDefault {
				t.Errorf("sources %v", e.Sources)
			}
		})
	}
}

// TestPrecedence: a flag wins over the environment, which wins over the
// file, which wins over the default; each value says where it came from.
func TestPrecedence(t *testing.T) {
	path := writeFile(t, "c.hcl", "log_level = \"warn\"\nversions_ttl = \"3m\"\nlisten = \":3\"\n")
	e, err := load(t, []string{"--config", path, "--log-level", "debug"},
		map[string]string{"TFMIRROR_LOG_LEVEL": "error", "TFMIRROR_VERSIONS_TTL": "2m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, value string
		source      Source
	}{
		{"log-level", "debug", FromFlag},         // flag, env and file
		{"versions-ttl", "2m0s", FromEnv},        // env and file
		{"listen", ":3", FromFile},               // file
		{"shutdown-timeout", "30s", FromDefault}, // none
	} {
		var got *Value
		for _, v := range e.Values() {
			if v.Setting.Name == tc.name {
				got = &v
			}
		}
		if got == nil || got.Value != tc.value || got.Source != tc.source {
			t.Errorf("%s: %+v, want %s from %s", tc.name, got, tc.value, tc.source)
		}
	}
	if e.Config.LogLevel != "debug" || e.Config.VersionsTTL != 2*time.Minute || e.Config.Listen != ":3" {
		t.Errorf("config %+v", e.Config)
	}
	// TFMIRROR_CONFIG names the file when --config does not.
	e, err = load(t, nil, map[string]string{"TFMIRROR_CONFIG": path})
	if err != nil || e.Config.Listen != ":3" || e.Sources["listen"] != FromFile {
		t.Errorf("TFMIRROR_CONFIG: %v, %+v", err, e)
	}
	// Only the settings named are read from the file (a command's own).
	var c Config
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	Add(fs, &c, "log-level")
	var p string
	AddConfigFlag(fs, &p)
	fs.String("listen", "mine", "a flag of the command's own")
	if _, err := Load(fs, []string{"--config", path}, func(string) (string, bool) { return "", false }, []string{"log-level"}); err != nil {
		t.Fatal(err)
	}
	if c.LogLevel != "warn" || fs.Lookup("listen").Value.String() != "mine" {
		t.Errorf("log level %q, own flag %q", c.LogLevel, fs.Lookup("listen").Value)
	}
}

// An environment variable set to the empty string is one not set, as
// the go command takes its own: the file's value or the default stands,
// where a TFMIRROR_OFFLINE= left by an edit had stopped start-up
// ("want true or false") and a TFMIRROR_LISTEN= had put ":3" aside.
func TestEmptyEnvironmentVariableIsUnset(t *testing.T) {
	path := writeFile(t, "c.hcl", "listen = \":3\"\n")
	e, err := load(t, []string{"--config", path}, map[string]string{"TFMIRROR_LISTEN": "", "TFMIRROR_OFFLINE": "", "TFMIRROR_LOG_LEVEL": ""})
	if err != nil {
		t.Fatal(err)
	}
	if e.Config.Listen != ":3" || e.Sources["listen"] != FromFile || e.Config.Offline || e.Sources["offline"] != FromDefault || e.Config.LogLevel != "info" {
		t.Errorf("listen %q from %s, offline %v from %s, log level %q", e.Config.Listen, e.Sources["listen"], e.Config.Offline, e.Sources["offline"], e.Config.LogLevel)
	}
	if len(e.File.Warnings) != 0 {
		t.Errorf("warnings %v, want none: nothing overrides the file", e.File.Warnings)
	}
	// TFMIRROR_CONFIG= names no file, as none given does.
	if e, err := load(t, nil, map[string]string{"TFMIRROR_CONFIG": ""}); err != nil || e.File != nil {
		t.Errorf("TFMIRROR_CONFIG empty: %v, %+v", err, e)
	}
}

// A value the file gives that a flag or an environment variable
// overrides with another is a warning at its line, naming what wins and
// the value in force (a secret's redacted): logged at start and on every
// reload, printed by config check, so that an edit of the file that
// cannot take effect is not silently ignored. The same value, however
// spelled, is no warning.
func TestOverriddenFileValueSaid(t *testing.T) {
	path := writeFile(t, "c.hcl", "log_level = \"warn\"\nversions_ttl = \"3m\"\nlisten = \":3\"\ncache_max_bytes = \"1GiB\"\nupstream_proxy = \"http://a.test:3128\"\n")
	e, err := load(t, []string{"--config", path, "--log-level", "debug"}, map[string]string{
		"TFMIRROR_VERSIONS_TTL":    "2m",
		"TFMIRROR_CACHE_MAX_BYTES": "1073741824", // the file's value, spelled otherwise
		"TFMIRROR_UPSTREAM_PROXY":  "http://user:secret@b.test:3128",
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range e.File.Warnings {
		if w.Severity != hcl.DiagWarning || w.Subject == nil {
			t.Errorf("not a warning with its place: %v", w)
			continue
		}
		got = append(got, FormatDiagnostic(w))
	}
	want := []string{
		"c.hcl:1,13-19: ", "log_level is not in force: --log-level on the command line wins over the file", `"debug"`,
		"c.hcl:2,16-20: ", "versions_ttl is not in force: TFMIRROR_VERSIONS_TTL in the environment wins over the file", `"2m0s"`,
		"c.hcl:5,18-38: ", "upstream_proxy is not in force: TFMIRROR_UPSTREAM_PROXY in the environment wins over the file",
	}
	all := strings.Join(got, "\n")
	if len(got) != 3 || strings.Contains(all, "secret") || strings.Contains(all, "cache_max_bytes") || strings.Contains(all, "listen") {
		t.Errorf("warnings:\n%s\nwant 3: log_level, versions_ttl, upstream_proxy (without its password)", all)
	}
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("warnings lack %q:\n%s", w, all)
		}
	}
}

// TestFilePolicyAndSecrets: the policy block's body is handed over
// undecoded; a secret is shown redacted; a file others may write (its
// group or all users) is refused, with the chmod that fixes it, and so
// is one another user owns (as root), with the chown.
func TestFilePolicyAndSecrets(t *testing.T) {
	path := writeFile(t, "c.hcl", `upstream_proxy = "http://user:hunter2-secret@proxy.corp:3128"
policy {
  allow = ["registry.terraform.io/hashicorp/*"]
  anything { goes = here }
}
`)
	e, err := load(t, []string{"--config", path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := e.File.Policy()
	if body == nil {
		t.Fatal("no policy body")
	}
	attrs, _ := body.JustAttributes()
	if _, ok := attrs["allow"]; !ok {
		t.Errorf("policy body attributes %v", attrs)
	}
	if e.Config.UpstreamProxy != "http://user:hunter2-secret@proxy.corp:3128" {
		t.Errorf("upstream proxy %q", e.Config.UpstreamProxy)
	}
	for _, v := range e.Values() {
		if strings.Contains(v.Value, "hunter2") {
			t.Errorf("%s shown as %q", v.Setting.Name, v.Value)
		}
		if v.Setting.Name == "upstream-proxy" && v.Value != "http://(credentials)@proxy.corp:3128" {
			t.Errorf("upstream-proxy shown as %q", v.Value)
		}
	}
	if len(e.File.Warnings) != 0 {
		t.Errorf("warnings for a 0600 file: %v", e.File.Warnings)
	}

	noPolicy, err := load(t, []string{"--config", writeFile(t, "c.hcl", "listen = \":1\"\n")}, nil)
	if err != nil || noPolicy.File.Policy() != nil {
		t.Errorf("no policy block: %v, body %v", err, noPolicy.File.Policy())
	}
	var none *File
	if none.Policy() != nil {
		t.Error("no file, a policy body")
	}

	if err := os.Chmod(path, 0o664); err != nil {
		t.Fatal(err)
	}
	_, err = load(t, []string{"--config", path}, nil)
	var fe *FileError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "Configuration file writable by others") ||
		!strings.Contains(err.Error(), "0664") || !strings.Contains(err.Error(), "chmod go-w "+path) {
		t.Errorf("group-writable: %v", err)
	}
	if err := os.Chmod(path, 0o646); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, []string{"--config", path}, nil); err == nil || !strings.Contains(err.Error(), "0646") {
		t.Errorf("writable by all users: %v", err)
	}

	// A file of another user, who may write it whatever its mode: giving
	// it to them takes root.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: a file of another user is not tried")
		return
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err = load(t, []string{"--config", path}, nil)
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "Configuration file owned by another user") ||
		!strings.Contains(err.Error(), path+" is owned by user 65534") || !strings.Contains(err.Error(), "chown root "+path) {
		t.Errorf("another user's: %v", err)
	}
}

// reloadCounts counts ConfigReload calls.
type reloadCounts map[string]int

func (c reloadCounts) ConfigReload(outcome string) { c[outcome]++ }

// TestReloader rewrites the file between reloads: a good one puts the
// Live settings and the hooks' parts in force and keeps the others' old
// values with a warning; a broken one, or one a hook refuses, is refused
// whole, logged and counted.
func TestReloader(t *testing.T) {
	path := writeFile(t, "c.hcl", "log_level = \"info\"\nversions_ttl = \"1m\"\npolicy { name = \"one\" }\n")
	loadNow := func() (*Effective, error) { return load(t, []string{"--config", path}, nil) }
	initial, err := loadNow()
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	counts := reloadCounts{}
	var applied [][]string
	policyInForce := ""
	hook := Hook{Name: "policy", Validate: func(f *File) (func(), hcl.Diagnostics) {
		attrs, diags := f.Policy().JustAttributes()
		v, d := attrs["name"].Expr.Value(nil)
		diags = append(diags, d...)
		if diags.HasErrors() {
			return nil, diags
		}
		name := v.AsString()
		if name == "bad" {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "policy refused", Subject: attrs["name"].Expr.Range().Ptr()}}
		}
		return func() { policyInForce = name }, nil
	}, Lines: func(f *File) []Line {
		if f == nil {
			return nil
		}
		attrs, _ := f.Policy().JustAttributes()
		v, _ := attrs["name"].Expr.Value(nil)
		return []Line{{Key: "name " + v.AsString(), Text: "name " + v.AsString()}, {Key: "kept", Text: fmt.Sprint("kept at ", attrs["name"].Range.Start.Line)}}
	}}
	r, err := NewReloader(initial, ReloaderConfig{
		Load: loadNow,
		Apply: func(cur, next *Effective, changed []*Setting) ([]string, error) {
			applied = append(applied, Names(changed))
			return nil, nil
		},
		Hooks:   []Hook{hook},
		Metrics: counts,
		Logger:  slog.New(slog.NewTextHandler(&logBuf, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if policyInForce != "one" {
		t.Fatalf("policy at start: %q", policyInForce)
	}
	rewrite := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Good: log level and policy change; versions-ttl needs a restart.
	rewrite("log_level = \"debug\"\nversions_ttl = \"5m\"\npolicy { name = \"two\" }\n")
	res, err := r.Reload()
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%v", res.Changed()); got != "[log_level policy]" {
		t.Errorf("changed %s, want [log_level policy]", got)
	}
	if len(res.Applied) != 1 || res.Applied[0].Old != "info" || res.Applied[0].New != "debug" {
		t.Errorf("applied %+v, want log-level info -> debug", res.Applied)
	}
	if len(res.Restart) != 1 || res.Restart[0].Setting.Name != "versions-ttl" || res.Restart[0].New != "5m0s" && res.Restart[0].New != "5m" {
		t.Errorf("restart %+v, want versions-ttl", res.Restart)
	}
	if len(res.Parts) != 1 || fmt.Sprint(res.Parts[0].Added) != "[name two]" || fmt.Sprint(res.Parts[0].Removed) != "[name one]" {
		t.Errorf("parts %+v, want policy: name two added, name one removed", res.Parts)
	}
	cur := r.Current()
	if cur.Config.LogLevel != "debug" || cur.Config.VersionsTTL != time.Minute || policyInForce != "two" {
		t.Errorf("after a good reload: level %q, versions-ttl %v, policy %q", cur.Config.LogLevel, cur.Config.VersionsTTL, policyInForce)
	}
	if len(applied) != 1 || strings.Join(applied[0], ",") != "log-level" {
		t.Errorf("applied %v", applied)
	}
	// The log names settings as the file does, as tfmirror reload does.
	if !strings.Contains(logBuf.String(), "only after a restart; their values in force stay\" settings=[versions_ttl]") || !strings.Contains(logBuf.String(), `changed="[log_level policy]"`) {
		t.Errorf("log does not say versions_ttl needs a restart and log_level changed:\n%s", logBuf.String())
	}

	// A change of the policy alone is a change, and the log says so.
	logBuf.Reset()
	rewrite("log_level = \"debug\"\nversions_ttl = \"5m\"\npolicy { name = \"three\" }\n")
	if res, err = r.Reload(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Changed()) != "[policy]" || policyInForce != "three" || !strings.Contains(logBuf.String(), "changed=[policy]") {
		t.Errorf("policy-only reload: changed %v, policy %q, log:\n%s", res.Changed(), policyInForce, logBuf.String())
	}
	// An unchanged file changes nothing; what waits for a restart still
	// does.
	if res, err = r.Reload(); err != nil || len(res.Changed()) != 0 || len(res.Restart) != 1 {
		t.Errorf("same file again: %+v, %v", res, err)
	}
	cur = r.Current()

	for _, tc := range []struct{ name, content, want string }{
		{"syntax", "log_level = \n", "c.hcl:1"},
		{"unknown attribute", "log_level = \"warn\"\nlog_levle = \"warn\"\n", "c.hcl:2"},
		{"bad value", "log_level = \"loud\"\n", "log-level"},
		{"hook refuses", "log_level = \"warn\"\npolicy { name = \"bad\" }\n", "c.hcl:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logBuf.Reset()
			before := counts["refused"]
			rewrite(tc.content)
			_, err := r.Reload()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("reload: %v, want a refusal naming %s", err, tc.want)
			}
			if counts["refused"] != before+1 || !strings.Contains(logBuf.String(), "configuration file refused") {
				t.Errorf("refusal counted %d times, logged: %s", counts["refused"]-before, logBuf.String())
			}
			if r.Current() != cur || policyInForce != "three" || len(applied) != 3 {
				t.Error("a refused file changed the configuration in force")
			}
		})
	}
	if counts["applied"] != 3 {
		t.Errorf("applied counted %d times", counts["applied"])
	}
}

// TestCheckEveryError: Check reports the file's errors, those of the
// values together and a hook's at once, each at its line; an error of
// the values about a setting whose value the file refused is left out
// (it would be about the default). Load stops at the file's errors, and
// Locate places each of the joined errors of the values.
func TestCheckEveryError(t *testing.T) {
	path := writeFile(t, "c.hcl", `cache_max_bytes = "lots"
log_level = "loud"
tls_cert = "/etc/cert.pem"
tls_key = 3
policy {}
`)
	hook := Hook{Name: "policy", Validate: func(f *File) (func(), hcl.Diagnostics) {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Policy refused", Subject: &hcl.Range{Filename: path, Start: hcl.Pos{Line: 5, Column: 1}, End: hcl.Pos{Line: 5, Column: 7}}}}
	}}
	var e Effective
	fs := allSettings(&e.Config)
	var p string
	AddConfigFlag(fs, &p)
	_, err := Check(fs, []string{"--config", path}, func(string) (string, bool) { return "", false }, AllNames(), func() error { return e.Config.Validate() }, []Hook{hook})
	msg := fmt.Sprint(err)
	for _, want := range []string{
		path + ":1,19-25: Invalid value for cache_max_bytes",
		path + `:2,13-19: Invalid settings: --log-level "loud"`,
		path + ":4,11-12: Invalid value for tls_key",
		path + ":5,1-7: Policy refused",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Check does not report %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "must be given together") {
		t.Errorf("an error about tls_key's default, which the file's refused value left:\n%s", msg)
	}
	if _, err := load(t, []string{"--config", path}, nil); err == nil || strings.Contains(err.Error(), "log-level") {
		t.Errorf("Load goes on past the file's errors: %v", err)
	}

	l := &Loaded{File: &File{Path: path, values: map[string]string{"log-level": "loud", "tls-cert": "x"},
		ranges: map[string]hcl.Range{"log-level": {Filename: path, Start: hcl.Pos{Line: 2}}, "tls-cert": {Filename: path, Start: hcl.Pos{Line: 3}}}},
		Sources: map[string]Source{"log-level": FromFile, "tls-cert": FromFile}, order: []*Setting{Named("log-level"), Named("tls-cert")}}
	got := l.Locate(errors.Join(errors.New(`--log-level "loud": want debug`), errors.New("--tls-cert and --tls-key must be given together"))).Error()
	if !strings.Contains(got, "want debug (configuration file: log_level at "+path+":2") || !strings.Contains(got, "together (configuration file: tls_cert at "+path+":3") {
		t.Errorf("Locate of joined errors: %s", got)
	}
}

// The CLI releases' origin URLs are refused with a query (Validate), but
// one given may carry a secret there (a pre-signed URL of a private
// mirror's): the values shown until it is refused (config check, a
// reload's changes) leave it out, as upstream_proxy's password.
func TestReleasesURLsShownRedacted(t *testing.T) {
	e, err := load(t, []string{
		"--releases-hashicorp-url", "https://artifactory.corp/hashicorp-releases/?token=hunter2-secret",
		"--releases-opentofu-url", "https://artifactory.corp/tofu/?token=hunter3-secret",
		"--releases-opentofu-api-url", "https://artifactory.corp/tofu/api.json?X-Amz-Signature=hunter4-secret",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for _, v := range e.Values() {
		if strings.Contains(v.Value, "secret") {
			t.Errorf("%s shown as %q", v.Setting.Name, v.Value)
		}
		if strings.HasPrefix(v.Setting.Name, "releases-") && strings.HasPrefix(v.Value, "https://artifactory.corp/") {
			shown++
		}
	}
	if shown != 3 {
		t.Errorf("%d of the three releases URLs shown by their host and path, want 3", shown)
	}
}

// A configuration file that does not parse where a secret setting's value
// is written is refused without the detail the parser gives, which
// quotes the text it could not read: part of a password. Elsewhere the
// detail stays, as it says what is wrong.
func TestParseErrorsQuoteNoSecret(t *testing.T) {
	for _, tc := range []struct{ name, content string }{
		{"c.hcl", `upstream_proxy = "http://u:%{SECRETpw}@proxy.corp:3128"` + "\n"},
		{"c.hcl", "listen = \":1\"\n  releases_hashicorp_url   =   \"https://u:%{SECRETpw}@releases.corp/\"\n"},
		{"c.json", `{"upstream_proxy": SECRETpw}`},
		{"c.json", "{\n  \"listen\": \":1\",\n  \"upstream_proxy\": SECRETpw\n}"},
	} {
		path := writeFile(t, tc.name, tc.content)
		_, diags := ReadFile(path)
		if !diags.HasErrors() {
			t.Fatalf("%q parsed", tc.content)
		}
		msg := (&FileError{Path: path, Diags: diags}).Error()
		if strings.Contains(msg, "SECRETpw") {
			t.Errorf("%q refused as %s: it quotes the secret", tc.content, msg)
		}
		if !strings.Contains(msg, path+":") {
			t.Errorf("%q refused as %s: it says not where", tc.content, msg)
		}
	}
	path := writeFile(t, "c.hcl", `log_level = "%{notakeyword}"`+"\n")
	_, diags := ReadFile(path)
	if msg := (&FileError{Path: path, Diags: diags}).Error(); !strings.Contains(msg, "notakeyword") {
		t.Errorf("a parse error of a setting that is not secret lost its detail: %s", msg)
	}
}

// A proxy's credentials are said to be there, never shown, so that a
// reload that adds, removes or changes them tells what it did: the two
// values shown were the same URL, the credentials stripped from both.
func TestCredentialsChangeShown(t *testing.T) {
	const with, other, without = "http://user:PASSA@proxy.corp:3128", "http://user:PASSB@proxy.corp:3128", "http://proxy.corp:3128"
	if got := redactValue(with); got != "http://(credentials)@proxy.corp:3128" {
		t.Errorf("shown as %q", got)
	}
	s := Named("upstream-proxy")
	loaded := func(v string) *Loaded {
		return &Loaded{raw: map[string]string{s.Name: v}, shown: map[string]string{s.Name: redactValue(v)}, order: []*Setting{s}}
	}
	for _, tc := range []struct{ from, to, old, new string }{
		{with, other, "http://(credentials)@proxy.corp:3128", "http://(credentials)@proxy.corp:3128 (what is not shown of it changed)"},
		{with, without, "http://(credentials)@proxy.corp:3128", "http://proxy.corp:3128"},
	} {
		cur, next := loaded(tc.from), loaded(tc.to)
		cs := cur.changes(next, cur.Changed(next))
		if len(cs) != 1 || cs[0].Old != tc.old || cs[0].New != tc.new {
			t.Errorf("%s -> %s: changes %+v, want %q -> %q", tc.from, tc.to, cs, tc.old, tc.new)
		}
		for _, c := range cs {
			if strings.Contains(c.Old+c.New, "PASS") {
				t.Errorf("a password shown: %+v", c)
			}
		}
	}
}

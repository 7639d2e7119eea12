package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// settingValue is a valid value, other than its default, for setting s:
// in the flag's syntax, and as an HCL and a JSON expression.
type settingValue struct{ flag, hcl, json string }

// nonDefaultValues gives every setting of the table a value other than
// its default that serve accepts: by the setting's kind, with the values
// serve checks named (a new checked setting fails the test until it is
// given one here).
func nonDefaultValues(t *testing.T) map[string]settingValue {
	t.Helper()
	named := map[string]string{
		"listen": "127.0.0.1:9443", "metrics-listen": ":9090", "public-url": "https://mirror.example.com/",
		"upstream-proxy": "http://user:hunter2-secret@proxy.example:3128", "shared-store": "s3://bucket/prefix?region=eu-west-1",
		"shared-store-key-file": "/etc/tfmirror-test/shared-store.key", "shared-store-previous-key-file": "/etc/tfmirror-test/shared-store-previous.key",
		"log-format": "text", "log-level": "debug",
		"oci-provider-prefix": "oci/providers", "oci-module-prefix": "oci/modules",
		"allowed-origins": "a.example,b.example", "platforms": "linux_amd64,darwin_arm64",
		"trusted-publisher-keys": "a.example/corp=/etc/tfmirror-test/corp.asc", "allow-unsigned-hosts": "b.example",
		"tls-san": "tfmirror.tfmirror.svc,10.0.0.7", "trusted-proxies": "10.0.0.0/8,2001:db8::/32",
		"releases-hashicorp-url": "https://releases.corp.example/hashicorp/", "releases-opentofu-url": "https://releases.corp.example/opentofu/",
		"releases-opentofu-api-url": "https://releases.corp.example/opentofu-api/", "releases-hashicorp-products": "terraform,packer",
		// At most settings.MaxSharedTimeout.
		"shared-store-timeout": "1m37s",
	}
	out := map[string]settingValue{}
	for _, s := range settings.Table {
		fs := flag.NewFlagSet("defaults", flag.ContinueOnError)
		var c settings.Config
		s.Register(fs, &c)
		def := fs.Lookup(s.Name).Value
		v, ok := named[s.Name]
		if !ok {
			switch s.Kind() {
			case "string":
				v = "/etc/tfmirror-test/" + s.Name
			case "bool":
				v = "true"
			case "int":
				n, _ := strconv.Atoi(def.String())
				v = strconv.Itoa(n + 3)
			case "duration":
				d, _ := time.ParseDuration(def.String())
				v = (d + 7*time.Minute).String()
			case "days":
				v = "9d"
			case "size":
				n := int64(*def.(*settings.ByteSize))
				v = strconv.FormatInt(n+7<<20, 10)
			case "list":
				v = "/etc/tfmirror-test/" + s.Name + "-1," + "/etc/tfmirror-test/" + s.Name + "-2"
			default:
				t.Fatalf("%s: kind %q", s.Name, s.Kind())
			}
		}
		sv := settingValue{flag: v, hcl: strconv.Quote(v), json: strconv.Quote(v)}
		switch s.Kind() {
		case "bool", "int":
			sv.hcl, sv.json = v, v
		case "size":
			// A number in HCL, the flag's syntax in JSON.
			sv.hcl, sv.json = v, strconv.Quote(v+"B")
		case "list":
			items, _ := json.Marshal(strings.Split(v, ","))
			sv.hcl, sv.json = string(items), string(items)
		}
		out[s.Name] = sv
	}
	return out
}

// TestConfigFileEverySetting: a mirror started with only --config FILE
// has the configuration of one started with the same settings as flags,
// for every setting of the table, each differing from its default, in
// HCL and in JSON. Two files cover the table: --insecure-http excludes
// --tls-cert, --tls-key and --http2.
func TestConfigFileEverySetting(t *testing.T) {
	values := nonDefaultValues(t)
	noEnv := func(string) (string, bool) { return "", false }
	defaults, err := parseServeConfig(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	shownDefault := map[string]string{}
	for _, v := range defaults.Values() {
		shownDefault[v.Setting.Name] = v.Value
	}
	covered := map[string]bool{}
	for _, leftOut := range [][]string{{"insecure-http"}, {"tls-cert", "tls-key", "http2"}} {
		for _, syntax := range []string{"hcl", "json"} {
			t.Run(syntax+" without "+strings.Join(leftOut, ","), func(t *testing.T) {
				var hclText strings.Builder
				var jsonItems, args []string
				for _, s := range settings.Table {
					if slices.Contains(leftOut, s.Name) {
						continue
					}
					v := values[s.Name]
					fmt.Fprintf(&hclText, "%s = %s\n", s.Attribute(), v.hcl)
					jsonItems = append(jsonItems, fmt.Sprintf("  %q: %s", s.Attribute(), v.json))
					args = append(args, "--"+s.Name+"="+v.flag)
				}
				content := hclText.String()
				if syntax == "json" {
					content = "{\n" + strings.Join(jsonItems, ",\n") + "\n}\n"
				}
				path := filepath.Join(t.TempDir(), "tfmirror."+syntax)
				if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				fromFile, err := parseServeConfig([]string{"--config", path}, noEnv, io.Discard)
				if err != nil {
					t.Fatalf("%v\n%s", err, content)
				}
				fromFlags, err := parseServeConfig(args, noEnv, io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(fromFile.Config, fromFlags.Config) {
					t.Errorf("from the file:\n%+v\nfrom flags:\n%+v", fromFile.Config, fromFlags.Config)
				}
				flagShown := map[string]string{}
				for _, v := range fromFlags.Values() {
					flagShown[v.Setting.Name] = v.Value
				}
				for _, v := range fromFile.Values() {
					name := v.Setting.Name
					if slices.Contains(leftOut, name) {
						continue
					}
					covered[name] = true
					if v.Source != settings.FromFile || fromFlags.Sources[name] != settings.FromFlag {
						t.Errorf("%s: source %s from the file, %s from flags", name, v.Source, fromFlags.Sources[name])
					}
					if v.Value == shownDefault[name] || v.Value != flagShown[name] {
						t.Errorf("%s: %q from the file, %q from flags, default %q", name, v.Value, flagShown[name], shownDefault[name])
					}
				}
			})
		}
	}
	for _, s := range settings.Table {
		if !covered[s.Name] {
			t.Errorf("%s was not set from a file", s.Name)
		}
	}
}

// TestConfigFileRefusedAtStart: serve with a file holding an unknown
// attribute, a bad duration, a bad size or a value of the wrong type
// stops before it opens anything (exit status 2), naming the file and
// the line.
func TestConfigFileRefusedAtStart(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"unknown attribute", "log_level = \"info\"\ncache_size = \"1GiB\"\n", `:2,1-11: Unsupported argument: An argument named "cache_size"`},
		{"bad duration", "# comment\n\nversions_ttl = \"ten minutes\"\n", `:3,16-29: Invalid value for versions_ttl`},
		{"bad size", "cache_max_bytes = \"40 GiBs\"\n", `:1,19-28: Invalid value for cache_max_bytes`},
		{"wrong type", "listen = \":1\"\noffline = [true]\n", `:2,11-17: Invalid value for offline: a tuple; want true or false`},
		{"checked value", "listen = \":1\"\nlog_format = \"yaml\"\n", `--log-format "yaml": want json or text (configuration file: log_format at `},
		{"checked together", "tls_cert = \"/c.pem\"\n", `--tls-cert and --tls-key must be given together (configuration file: tls_cert at `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "tfmirror.hcl")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			code := run([]string{"serve", "--config", path, "--data-dir", filepath.Join(dir, "data")}, io.Discard, &stderr)
			want := tc.want
			if strings.HasPrefix(want, ":") {
				want = path + want
			}
			if code != 2 || !strings.Contains(stderr.String(), want) {
				t.Errorf("exit status %d, stderr:\n%s\nwant %q", code, stderr.String(), want)
			}
			if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
				t.Error("the data directory was made")
			}
		})
	}
}

// TestConfigCheck runs `tfmirror config check`: a good file prints each
// setting's value and source, the secret redacted, exit 0; a bad one
// prints every error with its line, exit 1.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.hcl")
	os.WriteFile(good, []byte("cache_max_bytes = \"40GiB\"\nupstream_proxy = \"http://user:hunter2-secret@proxy.example:3128\"\nallowed_origins = [\"registry.terraform.io\"]\n"), 0o600)
	var stdout, stderr bytes.Buffer
	env := func(k string) (string, bool) {
		if k == "TFMIRROR_LOG_LEVEL" {
			return "warn", true
		}
		return "", false
	}
	if code := runConfig([]string{"check", good}, env, &stdout, &stderr); code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	out := stdout.String()
	rows := map[string][]string{}
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			rows[f[0]] = f[1:]
		}
	}
	for attr, want := range map[string][]string{
		"cache_max_bytes": {"40GiB", "file"}, "upstream_proxy": {"http://(credentials)@proxy.example:3128", "file"},
		"allowed_origins": {"registry.terraform.io", "file"}, "log_level": {"warn", "env"}, "listen": {":8443", "default"},
	} {
		if !slices.Equal(rows[attr], want) {
			t.Errorf("%s: %v, want %v", attr, rows[attr], want)
		}
	}
	if len(rows) != len(settings.Table)+1 || strings.Contains(out, "hunter2") || !strings.HasPrefix(out, good+": valid\n") {
		t.Errorf("output:\n%s", out)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{\n  \"cache_max_bytes\": \"lots\",\n  \"listen\": 1,\n  \"nope\": true\n}\n"), 0o600)
	stdout.Reset()
	stderr.Reset()
	if code := runConfig([]string{"check", bad}, env, &stdout, &stderr); code != 1 {
		t.Errorf("bad file: exit status %d", code)
	}
	for _, line := range []string{bad + ":2,", bad + ":3,", bad + ":4,"} {
		if !strings.Contains(stderr.String(), line) {
			t.Errorf("stderr lacks %s:\n%s", line, stderr.String())
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout for a bad file: %s", stdout.String())
	}
	if code := runConfig([]string{"check"}, env, io.Discard, io.Discard); code != 2 {
		t.Errorf("no FILE: exit status %d", code)
	}

	// A proxy or bucket URL it refuses is named without the credentials
	// written into it.
	for _, c := range []struct{ setting, attr, value string }{
		{"upstream-proxy", "upstream_proxy", "ftp://user:hunter2-secret@proxy.example:3128"},
		{"upstream-proxy", "upstream_proxy", "user:hunter2-secret@proxy.example:3128"},
		{"upstream-proxy", "upstream_proxy", "http://user:hunter2-secret@[::1"},
		// A "/", "?" or "#" of the password not percent-encoded ends the
		// URL's host there: the rest is read as its path, query or fragment.
		{"upstream-proxy", "upstream_proxy", "http://user:/hunter2-secret@proxy.example:3128"},
		{"upstream-proxy", "upstream_proxy", "http://user:8/hunter2-secret@proxy.example:3128"},
		{"upstream-proxy", "upstream_proxy", "http://user:8?hunter2-secret@proxy.example:3128"},
		{"shared-store", "shared_store", "s3://AKIAEXAMPLE:hunter2-secret@bucket/prefix"},
		{"shared-store", "shared_store", "https://AKIAEXAMPLE:hunter2-secret@bucket/prefix"},
		{"shared-store", "shared_store", "s3://AKIAEXAMPLE:hunter2-secret@[bucket/prefix"},
		{"shared-store", "shared_store", "s3://bucket/prefix?endpoint=https://AKIAEXAMPLE:hunter2-secret@minio.example:9000"},
	} {
		wrong := filepath.Join(dir, "creds.hcl")
		os.WriteFile(wrong, []byte(c.attr+" = \""+c.value+"\"\n"), 0o600)
		stdout.Reset()
		stderr.Reset()
		if code := runConfig([]string{"check", wrong}, env, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), c.setting) ||
			strings.Contains(stdout.String()+stderr.String(), "hunter2") {
			t.Errorf("%s %q: exit status %d, want 1 naming the setting without its password:\n%s%s", c.attr, c.value, code, stdout.String(), stderr.String())
		}
	}
}

// TestConfigFileSubcommands: sync reads the settings it takes from the
// file (not its own --platforms), and the commands on a data directory
// read it as serve does, each behind its own flags and the environment.
func TestConfigFileSubcommands(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tfmirror.hcl")
	os.WriteFile(path, []byte("data_dir = \"/srv/mirror\"\ncache_max_bytes = \"3GiB\"\nplatforms = [\"linux_amd64\"]\nlog_level = \"info\"\nlisten = \":1\"\n"), 0o600)
	noEnv := func(string) (string, bool) { return "", false }

	c, err := parseSyncFlags([]string{"--config", path, "--cache-max-bytes", "1GiB", "manifest.hcl"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/srv/mirror" || c.CacheMaxBytes != 1<<30 || c.LogLevel != "info" || len(c.SyncPlatforms) != 0 || c.Listen != "" {
		t.Errorf("sync: data dir %q, cache max %d, log level %q, platforms %v, listen %q", c.DataDir, c.CacheMaxBytes, c.LogLevel, c.SyncPlatforms, c.Listen)
	}
	env := func(k string) (string, bool) {
		if k == "TFMIRROR_CONFIG" {
			return path, true
		}
		return "", false
	}
	for _, name := range []string{"cache verify", "cache prune", "export-key"} {
		cfg, _, err := parseCacheCommandFlags(name, nil, env, io.Discard, "usage", func(*flag.FlagSet) {})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.DataDir != "/srv/mirror" || cfg.LogLevel != "info" {
			t.Errorf("%s with TFMIRROR_CONFIG: data dir %q, log level %q", name, cfg.DataDir, cfg.LogLevel)
		}
		cfg, _, err = parseCacheCommandFlags(name, []string{"--config", path, "--data-dir", "/elsewhere"}, noEnv, io.Discard, "usage", func(*flag.FlagSet) {})
		if err != nil || cfg.DataDir != "/elsewhere" {
			t.Errorf("%s with --data-dir: %v, data dir %q", name, err, cfg.DataDir)
		}
	}
	cfg, _, err := parseCacheCommandFlags("export", nil, noEnv, io.Discard, "usage", func(*flag.FlagSet) {})
	if err != nil || cfg.LogLevel != "warn" {
		t.Errorf("without a file: %v, log level %q", err, cfg.LogLevel)
	}
}

// TestLiveSettings: every setting the table marks Live is put in force
// by a reload, and only those.
func TestLiveSettings(t *testing.T) {
	var live []string
	for _, s := range settings.Table {
		if s.Live {
			live = append(live, s.Name)
		}
	}
	var handled []string
	for name := range liveSettings {
		handled = append(handled, name)
	}
	slices.Sort(live)
	slices.Sort(handled)
	if !slices.Equal(live, handled) {
		t.Errorf("Live in the table: %v; put in force on reload: %v", live, handled)
	}
}

// TestConfigurationDocExamples: the example files of docs/configuration.md
// are read as they say.
func TestConfigurationDocExamples(t *testing.T) {
	for _, syntax := range []string{"hcl", "json"} {
		_, rest, ok := strings.Cut(configFileDoc, "```"+syntax+"\n")
		example, _, ok2 := strings.Cut(rest, "```")
		if !ok || !ok2 {
			t.Fatalf("no %s example", syntax)
		}
		path := filepath.Join(t.TempDir(), "tfmirror."+syntax)
		if err := os.WriteFile(path, []byte(example), 0o600); err != nil {
			t.Fatal(err)
		}
		e, err := parseServeConfig([]string{"--config", path}, func(string) (string, bool) { return "", false }, io.Discard)
		if err != nil {
			t.Fatalf("%s example: %v", syntax, err)
		}
		if e.Config.CacheMaxBytes != 40<<30 || e.Sources["cache-max-bytes"] != settings.FromFile {
			t.Errorf("%s example: cache_max_bytes %d from %s", syntax, e.Config.CacheMaxBytes, e.Sources["cache-max-bytes"])
		}
		// The HCL example's policy block is one serve accepts.
		if syntax == "hcl" {
			if pol, err := readPolicy(e.File); err != nil || pol.Len() != 2 {
				t.Errorf("hcl example: policy %v, %v; want its two rules", pol, err)
			}
		}
	}
}

// TestConfigCheckPolicyBlock: config check reads the policy block as
// serve does, and refuses a broken one with its file and line.
func TestConfigCheckPolicyBlock(t *testing.T) {
	dir := t.TempDir()
	noEnv := func(string) (string, bool) { return "", false }
	good := filepath.Join(dir, "good.hcl")
	os.WriteFile(good, []byte("policy {\n  allow = [\"registry.example.test/acme/*\"]\n  minimum_release_age = \"72h\"\n}\n"), 0o600)
	var stdout, stderr bytes.Buffer
	if code := runConfig([]string{"check", good}, noEnv, &stdout, &stderr); code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	// It shows the policy, each rule with its place.
	for _, want := range []string{"POLICY (2 rules", `allow "registry.example.test/acme/*" (` + good + ":2", `minimum_release_age = "72h" (` + good + ":3"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("config check does not show %q:\n%s", want, stdout.String())
		}
	}
	// One rule is counted as one ("POLICY (1 rules" read as a typo).
	one := filepath.Join(dir, "one.hcl")
	os.WriteFile(one, []byte("policy {\n  minimum_release_age = \"72h\"\n}\n"), 0o600)
	stdout.Reset()
	if code := runConfig([]string{"check", one}, noEnv, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "POLICY (1 rule, in the order of evaluation)") {
		t.Errorf("config check of a policy of one rule: exit status %d, want it counted as \"1 rule\":\n%s", code, stdout.String())
	}
	bad := filepath.Join(dir, "bad.hcl")
	os.WriteFile(bad, []byte("policy {\n  allow = [\"registry.example.test/acme/*\"]\n  minimum_release_age = \"soon\"\n}\n"), 0o600)
	stderr.Reset()
	if code := runConfig([]string{"check", bad}, noEnv, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), bad+":3,") {
		t.Errorf("a bad minimum_release_age: exit status %d, stderr:\n%s", code, stderr.String())
	}
	// A rule written twice with two reasons, and an empty allow list, are
	// refused, each at its line, the duplicate naming the first's.
	os.WriteFile(bad, []byte("policy {\n  allow = []\n  deny = [\n    { pattern = \"registry.example.test/acme/x\", reason = \"use y\" },\n    { pattern = \"registry.example.test/acme/x\", reason = \"use z\" },\n  ]\n}\n"), 0o600)
	stderr.Reset()
	code := runConfig([]string{"check", bad}, noEnv, io.Discard, &stderr)
	for _, want := range []string{bad + ":2,", "Empty allow list", bad + ":5,", "Contradictory deny pattern", "(" + bad + ":4)"} {
		if code != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("duplicate deny and empty allow: exit status %d, want %q in stderr:\n%s", code, want, stderr.String())
		}
	}
}

// --log-format is taken in either case, as --log-level is: a file's
// "TEXT" passes config check and its logger writes text lines, "Json"
// JSON ones. Such a file had been refused ("want json or text") where
// "INFO" was taken.
func TestLogFormatInEitherCase(t *testing.T) {
	dir := t.TempDir()
	for format, want := range map[string]string{"TEXT": "level=INFO msg=hello", "Json": `"msg":"hello"`} {
		path := filepath.Join(dir, format+".hcl")
		os.WriteFile(path, []byte("log_format = \""+format+"\"\nlog_level = \"INFO\"\n"), 0o600)
		var stderr bytes.Buffer
		if code := runConfig([]string{"check", path}, func(string) (string, bool) { return "", false }, io.Discard, &stderr); code != 0 {
			t.Errorf("%s: exit status %d: %s", format, code, stderr.String())
		}
		var out bytes.Buffer
		logger, err := newLogger(format, "INFO", &out)
		if err != nil {
			t.Fatal(err)
		}
		logger.Info("hello")
		if !strings.Contains(out.String(), want) {
			t.Errorf("%s: logged %q, want %q in it", format, out.String(), want)
		}
	}
}

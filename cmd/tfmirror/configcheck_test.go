package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// config check refuses what serve --config would refuse in the files the
// configuration names, each problem at its setting's line: a tokens file
// others may write, a certificate that is not there, a listen address
// with no port; and a file serve accepts is valid, with what config
// check cannot know without serving said.
func TestConfigCheckNamedFiles(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("a-client-token-of-enough-length-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tokens, 0o666); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "tls.key")
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "tfmirror.hcl")
	if err := os.WriteFile(conf, []byte(strings.Join([]string{
		`listen = "8443"`,
		`tls_cert = "` + filepath.Join(dir, "missing.pem") + `"`,
		`tls_key = "` + key + `"`,
		`auth_tokens_file = "` + tokens + `"`,
		`origin_ca_file = ["` + filepath.Join(dir, "missing-ca.pem") + `"]`,
	}, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) (string, bool) { return "", false }
	var stdout, stderr bytes.Buffer
	if code := runConfig([]string{"check", conf}, noEnv, &stdout, &stderr); code != 1 {
		t.Errorf("exit status %d, want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{
		conf + ":1,", "--listen", `"8443"`,
		conf + ":2,", "--tls-cert", "missing.pem",
		conf + ":4,", "--auth-tokens-file", tokens,
		conf + ":5,", "--origin-ca-file", "missing-ca.pem",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("config check's errors lack %q:\n%s", want, stderr.String())
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("a refused file: stdout %q", stdout.String())
	}

	// --skip-files: the file alone (one written for another machine),
	// and the output says what was not read.
	stdout.Reset()
	stderr.Reset()
	if code := runConfig([]string{"check", "--skip-files", conf}, noEnv, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "--listen") || strings.Contains(stderr.String(), "--tls-cert") || strings.Contains(stderr.String(), "--auth-tokens-file") {
		t.Errorf("--skip-files: exit status %d, want 1 for the listen address alone\n%s%s", code, stdout.String(), stderr.String())
	}
	if err := os.WriteFile(conf, []byte(`tls_cert = "`+filepath.Join(dir, "missing.pem")+`"`+"\n"+`tls_key = "`+key+`"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := runConfig([]string{"check", "--skip-files", conf}, noEnv, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "not checked (--skip-files): the files it names") {
		t.Errorf("--skip-files: exit status %d\n%s%s", code, stdout.String(), stderr.String())
	}

	// The same settings, right.
	if err := os.Chmod(tokens, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(`listen = "localhost:8443"`+"\n"+`auth_tokens_file = "`+tokens+`"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := runConfig([]string{"check", conf}, noEnv, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), conf+": valid\n") ||
		!strings.Contains(stdout.String(), "not checked (tfmirror serve finds these when it starts): whether listen and metrics_listen can be bound") {
		t.Errorf("a file serve accepts: exit status %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

// A CLI releases URL with a user name or password, which serve refuses at
// start, is refused by config check too, at its line, without repeating
// the password.
func TestConfigCheckReleasesURLWithCredentials(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tfmirror.hcl")
	if err := os.WriteFile(file, []byte(`allowed_origins = ["registry.terraform.io", "releases.corp.example"]
releases_hashicorp_url = "https://mirror:hunter2@releases.corp.example/hashicorp/"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) (string, bool) { return "", false }
	var stdout, stderr bytes.Buffer
	if code := runConfig([]string{"check", file}, noEnv, &stdout, &stderr); code != 1 {
		t.Errorf("config check: exit %d, want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String() + stderr.String()
	if !strings.Contains(out, "tfmirror.hcl:2") || !strings.Contains(out, "user name or password") {
		t.Errorf("the refusal does not name the line and why:\n%s", out)
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("the password is shown:\n%s", out)
	}
}

// A refusal of a releases URL that advises --credentials-file is placed
// at the URL's line, not at credentials_file's, earlier in the file.
func TestConfigCheckReleasesURLRefusalAtItsLine(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials.tfrc")
	file := filepath.Join(dir, "tfmirror.hcl")
	writePrivate(t, creds, "")
	writePrivate(t, file, fmt.Sprintf("allowed_origins = [\"registry.terraform.io\", \"releases.hashicorp.com\"]\ncredentials_file = %q\nreleases_hashicorp_url = \"https://reluser:RELPASSWORD77@releases.hashicorp.com/\"\n", creds))
	noEnv := func(string) (string, bool) { return "", false }
	var stdout, stderr bytes.Buffer
	if code := runConfig([]string{"check", file}, noEnv, &stdout, &stderr); code != 1 {
		t.Errorf("config check: exit %d, want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String() + stderr.String()
	if !strings.Contains(out, "tfmirror.hcl:3,") || strings.Contains(out, "tfmirror.hcl:2,") || strings.Contains(out, "RELPASSWORD77") {
		t.Errorf("the refusal is not at releases_hashicorp_url's line (3), or shows the password:\n%s", out)
	}
}

// A shared_store URL that does not parse is refused once, for what it
// is: the check of the AWS configuration a start would load for it
// refused it a second time, blaming the environment.
func TestConfigCheckSharedStoreURLRefusedOnce(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "shared.key")
	file := filepath.Join(dir, "tfmirror.hcl")
	writePrivate(t, key, strings.Repeat("k", 32))
	writePrivate(t, file, fmt.Sprintf("shared_store = \"s3://bucket/prefix?region=eu-west-1&aws_secret=X\"\nshared_store_key_file = %q\n", key))
	noEnv := func(string) (string, bool) { return "", false }
	var stdout, stderr bytes.Buffer
	if code := runConfig([]string{"check", file}, noEnv, &stdout, &stderr); code != 1 {
		t.Errorf("config check: exit %d, want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String() + stderr.String()
	if n := strings.Count(out, `unknown parameter "aws_secret"`); n != 1 || strings.Contains(out, "AWS configuration") {
		t.Errorf("the URL refused %d times, or the environment blamed:\n%s", n, out)
	}
}

// TestConfigCheckRefusesWhatServeRefuses: a value serve refuses (an
// allowed origin or a platform that does not parse, a list given as one
// string of space-separated items, a CLI product HashiCorp's layout does
// not serve, a listen address without a port, a releases URL that is not
// https or carries a query) is refused alike by config check (at its
// line), by serve before it opens anything (exit status 2, the data
// directory not made), and by a reload, which reads the file as serve
// does: config check never calls valid a file serve refuses, and a
// reload never keeps for a restart a value the restart refuses.
func TestConfigCheckRefusesWhatServeRefuses(t *testing.T) {
	for _, tc := range []struct{ name, content, flag string }{
		{"allowed origins as a string", `allowed_origins = "[a b]"`, "--allowed-origins"},
		{"allowed origin", `allowed_origins = ["registry.terraform.io", "a_b.example"]`, "--allowed-origins"},
		{"platform", `platforms = ["foo"]`, "--platforms"},
		{"platforms as a string", `platforms = "linux_amd64 darwin_arm64"`, "--platforms"},
		{"product", `releases_hashicorp_products = ["Terraform"]`, "--releases-hashicorp-products"},
		{"listen", `listen = "8443"`, "--listen"},
		{"releases URL", `releases_hashicorp_url = "http://releases.example/"`, "--releases-hashicorp-url"},
		{"releases URL with a query", `releases_opentofu_url = "https://releases.example/?token=QTOK"`, "--releases-opentofu-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := filepath.Join(dir, "tfmirror.hcl")
			if err := os.WriteFile(conf, []byte("log_level = \"info\"\n"+tc.content+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			noEnv := func(string) (string, bool) { return "", false }
			var stdout, stderr bytes.Buffer
			if code := runConfig([]string{"check", "--skip-files", conf}, noEnv, &stdout, &stderr); code != 1 ||
				!strings.Contains(stderr.String(), conf+":2,") || !strings.Contains(stderr.String(), tc.flag) {
				t.Errorf("config check: exit status %d, want 1 naming %s at %s:2\n%s%s", code, tc.flag, conf, stdout.String(), stderr.String())
			}
			data := filepath.Join(dir, "data")
			args := []string{"--config", conf, "--data-dir", data, "--insecure-http", "--listen", "127.0.0.1:0", "--metrics-listen", ""}
			if tc.flag == "--listen" {
				args = []string{"--config", conf, "--data-dir", data, "--insecure-http"}
			}
			stderr.Reset()
			if code := run(append([]string{"serve"}, args...), io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.flag) {
				t.Errorf("serve: exit status %d, want 2 naming %s\n%s", code, tc.flag, stderr.String())
			}
			if _, err := os.Stat(data); err == nil {
				t.Error("serve made the data directory before refusing the value")
			}
			// What a reload reads the file with.
			if _, err := parseServeConfig(args, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("the reload's reading of the file: %v, want it refused naming %s", err, tc.flag)
			}
		})
	}
}

// A certificate that cannot be read does not hide its key's refusal:
// config check names both files, each at its line, so that one run says
// all that a start would refuse.
func TestConfigCheckNamesTheKeyOfAMissingCertificate(t *testing.T) {
	dir := t.TempDir()
	key := goodFile(dir, "tls.key", "not read for what it holds")
	if err := os.Chmod(key, 0o666); err != nil {
		t.Fatal(err)
	}
	conf := goodFile(dir, "tfmirror.hcl", `tls_cert = "`+filepath.Join(dir, "missing.pem")+`"`+"\n"+`tls_key = "`+key+`"`+"\n")
	noEnv := func(string) (string, bool) { return "", false }
	var stdout, stderr bytes.Buffer
	if code := runConfig([]string{"check", conf}, noEnv, &stdout, &stderr); code != 1 {
		t.Errorf("exit status %d, want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{
		conf + ":1,", "--tls-cert", "missing.pem",
		conf + ":2,", "--tls-key", key + " has mode 0666",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("config check's errors lack %q:\n%s", want, stderr.String())
		}
	}

	// So with the shared store's keys: the current one missing, the
	// previous one refused.
	conf = goodFile(dir, "shared.hcl", `shared_store = "s3://bucket/prefix"`+"\n"+
		`shared_store_key_file = "`+filepath.Join(dir, "missing.key")+`"`+"\n"+
		`shared_store_previous_key_file = "`+key+`"`+"\n")
	stdout.Reset()
	stderr.Reset()
	if code := runConfig([]string{"check", conf}, noEnv, &stdout, &stderr); code != 1 {
		t.Errorf("exit status %d, want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{
		conf + ":2,", "--shared-store-key-file", "missing.key",
		conf + ":3,", "--shared-store-previous-key-file", key + " has mode 0666",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("config check's errors lack %q:\n%s", want, stderr.String())
		}
	}
}

// goodFile writes a regular file of mode 0600 in dir.
func goodFile(dir, name, content string) string {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		panic(err)
	}
	return path
}

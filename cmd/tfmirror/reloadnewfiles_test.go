package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/certs"
)

// TestReloadRefusesANewTokensOrKeysFileARestartWouldRefuse: a reload
// that names another client tokens file, or other trusted keys files,
// than the serve started with (or names one where it had none) keeps the
// change for a restart, as any setting naming a file; when the file it
// names is missing or refused, that restart would fail to start, so the
// reload is refused, naming the setting and the file, as one naming a
// missing CA file is. The files the serve started with are read again by
// the reload itself, and a bad one there leaves the configuration file
// in force (TestReloadRefusalSaysWhatWasPutInForce).
func TestReloadRefusesANewTokensOrKeysFileARestartWouldRefuse(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	tokens := filepath.Join(dir, "tokens")
	writePrivate(t, tokens, "0123456789abcdef0123456789abcdef\n")
	writePrivate(t, conf, "log_level = \"info\"\nauth_tokens_file = \""+tokens+"\"\n")
	args := []string{"--config", conf, "--data-dir", filepath.Join(dir, "data"), "--insecure-http"}
	m, _ := reloadingServer(t, args)

	missing := filepath.Join(dir, "not-there")
	for _, body := range []string{
		"auth_tokens_file = \"" + missing + "\"\n",
		"auth_tokens_file = \"" + tokens + "\"\ntrusted_export_keys = [\"" + missing + "\"]\n",
		"auth_tokens_file = \"" + tokens + "\"\ntrusted_publisher_keys = [\"registry.terraform.io/acme=" + missing + "\"]\n",
	} {
		writePrivate(t, conf, body)
		_, err := m.reload()
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("reload of\n%s: %v, want it refused naming %s", body, err, missing)
		}
		if last := m.configuration().LastReload; last == nil || last.Applied {
			t.Errorf("reload of\n%s: last reload %+v, want it not applied", body, last)
		}
	}

	// A file that is there: the change is kept for the restart.
	other := filepath.Join(dir, "other-tokens")
	writePrivate(t, other, "fedcba9876543210fedcba9876543210\n")
	writePrivate(t, conf, "auth_tokens_file = \""+other+"\"\n")
	got, err := m.reload()
	if err != nil {
		t.Fatalf("reload naming another tokens file that is there: %v", err)
	}
	restart := false
	for _, s := range got.Settings {
		restart = restart || (s.Name == "auth-tokens-file" && s.Restart)
	}
	if !restart {
		t.Errorf("reload %+v: want auth-tokens-file kept for a restart", got.Settings)
	}
}

// TestReloadRefusalNamesTheFilesLine: a reload refused for a file a
// restart would refuse, or for a public URL whose certificate cannot be
// issued, says where the configuration file sets the setting, as a
// value that does not validate is said: the operator finds the line to
// fix.
func TestReloadRefusalNamesTheFilesLine(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	writePrivate(t, conf, "public_url = \"https://mirror-a.example.test/\"\n")
	data := filepath.Join(dir, "data")
	m, _ := reloadingServer(t, []string{"--config", conf, "--data-dir", data})

	writePrivate(t, conf, "public_url = \"https://mirror-a.example.test/\"\n\norigin_ca_file = [\""+filepath.Join(dir, "not-there")+"\"]\n")
	if _, err := m.reload(); err == nil || !strings.Contains(err.Error(), "origin_ca_file at "+conf+":3") {
		t.Errorf("reload naming a CA file that is not there: %v, want it refused naming origin_ca_file at %s:3", err, conf)
	}

	if err := os.WriteFile(filepath.Join(data, "tls", "ca-key.pem"), []byte("damaged\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writePrivate(t, conf, "log_level = \"info\"\npublic_url = \"https://mirror-b.example.test/\"\n")
	if _, err := m.reload(); err == nil || !strings.Contains(err.Error(), "public_url at "+conf+":2") {
		t.Errorf("reload of a public URL whose certificate cannot be issued: %v, want it refused naming public_url at %s:2", err, conf)
	}
}

// TestReloadSaysTheOperatorsCertificateDoesNotNameThePublicURL: a reload
// that puts in force a public URL whose host the operator's certificate
// (--tls-cert) does not name says so in its answer (tfmirror reload
// prints it as a warning), as it says a value a flag overrides: every
// client that uses the URL refuses the certificate. The log alone said
// it, and tfmirror reload printed the change as a success.
func TestReloadSaysTheOperatorsCertificateDoesNotNameThePublicURL(t *testing.T) {
	dir := t.TempDir()
	files, err := certs.Ensure(filepath.Join(dir, "certs"), []string{"mirror-a.example.test"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "tfmirror.hcl")
	writePrivate(t, conf, "public_url = \"https://mirror-a.example.test/\"\n")
	m, _ := reloadingServer(t, []string{"--config", conf, "--data-dir", filepath.Join(dir, "data"),
		"--tls-cert", files.Cert, "--tls-key", files.Key})

	writePrivate(t, conf, "public_url = \"https://mirror-b.example.test/\"\n")
	res, err := m.reload()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printReloaded(&out, res)
	if !strings.Contains(out.String(), "warning: ") || !strings.Contains(out.String(), "mirror-b.example.test is not named by the certificate") {
		t.Errorf("tfmirror reload printed:\n%s\nwant a warning that the certificate does not name mirror-b.example.test", out.String())
	}

	// A host it names: no warning.
	writePrivate(t, conf, "public_url = \"https://mirror-a.example.test:8443/\"\n")
	if res, err = m.reload(); err != nil || len(res.Warnings) > 0 {
		t.Errorf("reload of a public URL the certificate names: %v, warnings %q", err, res.Warnings)
	}
}

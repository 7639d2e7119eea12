package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestTerraformConfigFileOnly: a mirror started with nothing but
// --config FILE (its data directory, origins and policy in the file)
// serves terraform init through the network mirror: "~> 1.0" installs
// the newest version the file's policy allows, and the status page says
// each setting came from the file.
func TestTerraformConfigFileOnly(t *testing.T) {
	t.Parallel()
	tf := terraformBinary(t)
	conf := filepath.Join(t.TempDir(), "tfmirror.hcl")
	e := &e2e{t: t, tf: tf, config: conf, configOnly: true}
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: e2eOrigins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	e.origin = origin
	origin.AddProvider("acme", "widget", []string{"1.0.0", "1.1.0", "1.2.0"}, registryPlatforms())
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`data_dir              = %q
allowed_origins       = [%q]
allow_private_origins = true

policy {
  deny_version "%s/acme/widget" {
    versions = "1.2.0"
    reason   = %q
  }
}
`, dataDir, privateRegistry, privateRegistry, cve)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.startMirror(dataDir)
	e.cliConf = filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(e.cliConf, []byte(fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", e.url)), 0o644); err != nil {
		t.Fatal(err)
	}

	widget := privateRegistry + "/acme/widget"
	dir := writeConfig(t, map[string]string{"widget": widget + "@~> 1.0"})
	if out, err := e.terraform(dir, "init", "-no-color"); err != nil {
		t.Fatalf("terraform init through the network mirror: %v\n%s", err, out)
	}
	if got := installed(t, dir, widget); strings.Join(got, ",") != "1.1.0" {
		t.Errorf("installed %v, want 1.1.0: the newest the file's policy allows", got)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "tls", "ca.pem")); err != nil {
		t.Errorf("the file's data directory is not the one in use: %v", err)
	}

	_, body := e.get(t, "?format=json")
	var st struct {
		Configuration struct {
			File     string `json:"file"`
			Settings []struct{ Name, Value, Source string }
		} `json:"configuration"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Configuration.File != conf {
		t.Errorf("status page: configuration file %q, want %s", st.Configuration.File, conf)
	}
	want := map[string]string{"data-dir": dataDir, "allowed-origins": privateRegistry, "allow-private-origins": "true"}
	for _, s := range st.Configuration.Settings {
		if v, ok := want[s.Name]; ok {
			if s.Value != v || s.Source != "file" {
				t.Errorf("status page: %s = %q from %s, want %q from the file", s.Name, s.Value, s.Source, v)
			}
			delete(want, s.Name)
		} else if s.Source != "default" && s.Source != "file" {
			t.Errorf("status page: %s = %q from %s: only the file and defaults were given", s.Name, s.Value, s.Source)
		}
	}
	if len(want) != 0 {
		t.Errorf("status page lacks %v", want)
	}
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrustedKeysReloaded: a reload (tfmirror reload, SIGHUP) reads the
// files of the keys imports trust again, as it reads the tokens file: a
// key removed from its file (revoked) is no longer trusted by the next
// import, and one added is; a file refused (a key that does not parse)
// leaves the keys in force, and the reload says so with the file and
// counts it (tfmirror_trusted_keys_last_reload_successful 0), as a
// refused tokens file is.
func TestTrustedKeysReloaded(t *testing.T) {
	dir := t.TempDir()
	old, next := newTestKey(t, "old exporter"), newTestKey(t, "new exporter")
	keys := filepath.Join(dir, "exporters.asc")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(keys, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(armoredPublic(t, old))
	args := []string{"--data-dir", filepath.Join(dir, "data"), "--insecure-http", "--trusted-export-keys", keys}
	m, _ := reloadingServer(t, args)
	trusted := func() []string {
		var out []string
		for _, k := range m.trustNow().ExportKeys {
			out = append(out, fmt.Sprintf("%X", k.PrimaryKey.Fingerprint))
		}
		return out
	}
	oldFP, nextFP := fmt.Sprintf("%X", old.PrimaryKey.Fingerprint), fmt.Sprintf("%X", next.PrimaryKey.Fingerprint)
	if got := trusted(); len(got) != 1 || got[0] != oldFP {
		t.Fatalf("at start, imports trust %v, want %s", got, oldFP)
	}

	// The old key revoked, the new one trusted.
	write(armoredPublic(t, next))
	res, err := m.reload()
	if err != nil {
		t.Fatal(err)
	}
	if got := trusted(); len(got) != 1 || got[0] != nextFP {
		t.Errorf("after the reload, imports trust %v, want only %s", got, nextFP)
	}
	if res.TrustedKeys == nil || *res.TrustedKeys != 1 {
		t.Errorf("the reload reports %v trusted keys, want 1", res.TrustedKeys)
	}

	// A file that does not parse leaves the keys in force.
	write("-----BEGIN PGP PUBLIC KEY BLOCK-----\nnot a key\n")
	if _, err := m.reload(); err == nil || !strings.Contains(err.Error(), keys) || !strings.Contains(err.Error(), "the keys in force stay") {
		t.Errorf("a reload of a key file that does not parse: %v, want it refused naming %s", err, keys)
	}
	if got := trusted(); len(got) != 1 || got[0] != nextFP {
		t.Errorf("after a refused reload, imports trust %v, want still %s", got, nextFP)
	}
	// Counted, so that an alert fires: the key revoked from the file is
	// still trusted while the refused file is on disk.
	if got := metric(t, m.registry, "tfmirror_trusted_keys_last_reload_successful"); got != 0 {
		t.Errorf("after a refused reload: tfmirror_trusted_keys_last_reload_successful %v, want 0", got)
	}
	for outcome, want := range map[string]float64{"applied": 1, "refused": 1} {
		if got := metric(t, m.registry, "tfmirror_trusted_keys_reloads_total", "outcome", outcome); got != want {
			t.Errorf("tfmirror_trusted_keys_reloads_total{outcome=%q} %v, want %v", outcome, got, want)
		}
	}
	write(armoredPublic(t, old))
	if _, err := m.reload(); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, m.registry, "tfmirror_trusted_keys_last_reload_successful"); got != 1 {
		t.Errorf("after a reload put in force: tfmirror_trusted_keys_last_reload_successful %v, want 1", got)
	}
}

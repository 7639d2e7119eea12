package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOriginCAsCutShortRefused: origin_ca_file's file read while it is
// half written (a bundle whose last certificate is cut short) is refused
// and the CAs in force stay, as it stops a start, rather than put in
// force without the CAs it was cut before.
func TestOriginCAsCutShortRefused(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "company-ca.pem")
	a, b := newCompanyCA(t), newCompanyCA(t)
	both := append(append([]byte(nil), a.pem...), b.pem...)
	if err := os.WriteFile(caFile, both, 0o644); err != nil {
		t.Fatal(err)
	}
	m, _ := reloadingServer(t, []string{"--data-dir", filepath.Join(dir, "data"), "--origin-ca-file", caFile})
	half := both[:len(a.pem)+len(b.pem)/2]
	if err := os.WriteFile(caFile, half, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := m.reload()
	if err == nil || !strings.Contains(err.Error(), "origin_ca_file's files refused") {
		t.Fatalf("reload of a file cut short: %v (new CAs %v, %q), want it refused", err, res.OriginCAsNew, res.OriginCAs)
	}
	if _, err := originRoots([]string{caFile}, nil, slog.New(slog.DiscardHandler)); err == nil {
		t.Errorf("a start with a file cut short is not refused")
	}
}

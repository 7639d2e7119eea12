package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
)

// coldClientsOver spreads the clients round-robin over the URLs and, with
// hashAll, checks every client's bytes: a server that sends the right
// length but wrong bytes to the second client's replica is caught, where
// checking only client 0 (figure 3's check) lets it through.
func TestColdClientsOverChecksEveryClient(t *testing.T) {
	good := bytes.Repeat([]byte("tfmirror"), 4096)
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 1
	sum := sha256.Sum256(good)
	want := hex.EncodeToString(sum[:])
	var hits [2]atomic.Int32
	pool := x509.NewCertPool()
	var urls, warm []string
	for i, body := range [][]byte{good, bad} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/archive" {
				hits[i].Add(1)
			}
			w.Write(body)
		}))
		srv.EnableHTTP2 = false
		srv.StartTLS()
		t.Cleanup(srv.Close)
		pool.AddCert(srv.Certificate())
		urls = append(urls, srv.URL+"/archive")
		warm = append(warm, srv.URL+"/warm")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newClient(pool, 4)
	defer closeIdle(c)

	if _, _, err := coldClientsOver(ctx, c, urls, warm, 4, int64(len(good)), want, false); err != nil {
		t.Fatalf("only client 0 hashed: %v", err)
	}
	_, each, err := coldClientsOver(ctx, c, urls, warm, 4, int64(len(good)), want, true)
	if err == nil {
		t.Fatal("every client hashed: the wrong bytes of the second server were not noticed")
	}
	for _, client := range []string{"client 1 ", "client 3 "} {
		if !strings.Contains(err.Error(), client) {
			t.Errorf("error does not name %s: %v", client, err)
		}
	}
	for _, client := range []string{"client 0 ", "client 2 "} {
		if strings.Contains(err.Error(), client) {
			t.Errorf("error names %s, which got the right bytes: %v", client, err)
		}
	}
	if len(each) != 4 {
		t.Errorf("%d times, want 4", len(each))
	}
	if a, b := hits[0].Load(), hits[1].Load(); a != 4 || b != 4 {
		t.Errorf("archive requests per server %d and %d, want 4 and 4 (two runs of 4 clients, round-robin)", a, b)
	}
}

func TestFindVersitygw(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "versitygw")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findVersitygw(bin); err != nil || got != bin {
		t.Errorf("-versitygw %s: got %q, %v", bin, got, err)
	}
	if _, err := findVersitygw(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "bench/setup.sh") {
		t.Errorf("a missing -versitygw binary: %v, want an error pointing at bench/setup.sh", err)
	}
	// Default: PATH first.
	t.Setenv("PATH", dir)
	if got, err := findVersitygw(""); err != nil || got != bin {
		t.Errorf("versitygw on PATH: got %q, %v", got, err)
	}
	// Then .ci/bin under the working directory.
	t.Setenv("PATH", t.TempDir())
	wd := t.TempDir()
	ci := filepath.Join(wd, ".ci", "bin", "versitygw")
	if err := os.MkdirAll(filepath.Dir(ci), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ci, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(wd)
	if got, err := findVersitygw(""); err != nil || got != ci {
		t.Errorf("versitygw in .ci/bin: got %q, %v", got, err)
	}
	if err := os.Remove(ci); err != nil {
		t.Fatal(err)
	}
	if _, err := findVersitygw(""); err == nil {
		t.Error("no versitygw anywhere: no error")
	}
}

// TestVersitygwVersionsInStep: the versitygw release is pinned in four
// places; the tests run against the one .ci/run installs, so the bench
// and its setup script must install the same.
func TestVersitygwVersionsInStep(t *testing.T) {
	if versitygwVersion != s3test.Version {
		t.Errorf("bench/shared.go pins versitygw %s, internal/testrig/s3test %s", versitygwVersion, s3test.Version)
	}
	for _, f := range []string{"../.ci/run", "setup.sh"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := "versitygw_version=" + s3test.Version; !strings.Contains(string(data), want) {
			t.Errorf("%s does not pin %s", f, want)
		}
	}
}

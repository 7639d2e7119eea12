package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// Clients get HTTP/1.1 unless --http2 is set, even when they would take
// HTTP/2 (as terraform's and tofu's clients would).
func TestHTTP2OnlyWhenAsked(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	for _, tc := range []struct {
		args      []string
		wantMajor int
	}{
		{nil, 1},
		{[]string{"--http2"}, 2},
	} {
		tm := startMirror(t, origin, t.TempDir(), nil, tc.args...)
		c := trustingClient(t, tm.m.caFile)
		c.Transport.(*http.Transport).ForceAttemptHTTP2 = true
		for _, path := range []string{"/" + tfRegistry + "/hashicorp/random/index.json", "/" + tfRegistry + "/hashicorp/random/terraform-provider-random_3.6.0_linux_amd64.zip"} {
			resp, err := c.Get(tm.url + strings.TrimPrefix(path, "/"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.ProtoMajor != tc.wantMajor {
				t.Errorf("%v: %s: %s over %s, want 200 over HTTP/%d", tc.args, path, resp.Status, resp.Proto, tc.wantMajor)
			}
		}
		c.CloseIdleConnections()
		tm.stop()
	}
}

func TestHTTP2NeedsTLS(t *testing.T) {
	_, err := parseServeFlags([]string{"--data-dir", t.TempDir(), "--insecure-http", "--http2"}, func(string) (string, bool) { return "", false }, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "--http2") {
		t.Fatalf("--insecure-http --http2: err = %v, want one naming --http2", err)
	}
}

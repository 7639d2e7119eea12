package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/discovery"
)

// TestEnvironmentProxyThatDoesNotParse: an HTTPS_PROXY the standard rules
// cannot read (a password with a '%' not percent-encoded) is ignored by
// them: every origin request would go direct while the log
// says origin traffic goes through HTTPS_PROXY. One with a scheme
// net/http does not speak (socks4://, which it would ask for a CONNECT
// in HTTP) or without a host fails every origin request, as origin
// failures that open the circuit breakers. Start-up refuses them
// instead, as it refuses such an --upstream-proxy, naming the variable
// but not its value, which may hold the proxy's password.
func TestEnvironmentProxyThatDoesNotParse(t *testing.T) {
	for _, env := range []string{
		"HTTPS_PROXY=http://mirror:s3cret%pass@proxy.corp.example:3128",
		"https_proxy=http://mirror:s3cret%zz@proxy.corp.example:3128",
		"HTTPS_PROXY=socks4://mirror:s3cret@proxy.corp.example:1080",
		"HTTPS_PROXY=ftp://mirror:s3cret@proxy.corp.example:21",
		"HTTPS_PROXY=http://",
		"HTTPS_PROXY=http://[::1",
	} {
		t.Run(env, func(t *testing.T) {
			var logs bytes.Buffer
			var dc discovery.Config
			err := originNetwork(&dc, settings.Config{}, overrides{environ: []string{env}}, slog.New(slog.NewTextHandler(&logs, nil)))
			if err == nil {
				t.Fatalf("HTTPS_PROXY that does not parse accepted; log:\n%s", logs.String())
			}
			name, _, _ := strings.Cut(env, "=")
			if !strings.Contains(err.Error(), name) {
				t.Errorf("error %q does not name %s", err, name)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(logs.String(), "s3cret") {
				t.Errorf("error %q or log names the proxy's password:\n%s", err, logs.String())
			}
		})
	}
	// One that parses, without a scheme as the standard rules allow, or
	// with NO_PROXY exempting every host, or a SOCKS5 one: accepted.
	for _, environ := range [][]string{
		{"HTTPS_PROXY=proxy.corp.example:3128"},
		{"HTTPS_PROXY=http://mirror:s3cret%25pass@proxy.corp.example:3128", "NO_PROXY=*"},
		{"HTTPS_PROXY=socks5://mirror:s3cret@proxy.corp.example:1080"},
		{"https_proxy=socks5h://proxy.corp.example"},
		// An empty port: net/http takes the scheme's.
		{"HTTPS_PROXY=http://proxy.corp.example:"},
	} {
		var dc discovery.Config
		if err := originNetwork(&dc, settings.Config{}, overrides{environ: environ}, slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("%q: %v", environ, err)
		}
	}
}

// TestEnvironmentProxyNotRead: ALL_PROXY (which Go's proxy rules do not
// read) or HTTP_PROXY (which no origin request, all https, reads) set
// without HTTPS_PROXY leaves origin requests going direct: the start
// says so in a warning naming them, never their values; with HTTPS_PROXY
// set, or none of them, there is no such warning.
func TestEnvironmentProxyNotRead(t *testing.T) {
	for _, tc := range []struct {
		environ []string
		want    string // "" for no warning
	}{
		{[]string{"ALL_PROXY=socks5://mirror:s3cret@proxy.corp.example:1080"}, "ALL_PROXY set"},
		{[]string{"all_proxy=socks5://proxy.corp.example:1080", "http_proxy=http://mirror:s3cret@proxy.corp.example:3128"}, "HTTP_PROXY and ALL_PROXY set"},
		{[]string{"ALL_PROXY=socks5://proxy.corp.example:1080", "HTTPS_PROXY=socks5://proxy.corp.example:1080"}, ""},
		{nil, ""},
	} {
		var logs bytes.Buffer
		var dc discovery.Config
		if err := originNetwork(&dc, settings.Config{}, overrides{environ: append([]string{}, tc.environ...)}, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatalf("%q: %v", tc.environ, err)
		}
		warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "origin requests read HTTPS_PROXY only")
		if warned != (tc.want != "") || !strings.Contains(logs.String(), tc.want) {
			t.Errorf("%q: want a warning saying %q; log:\n%s", tc.environ, tc.want, logs.String())
		}
		if strings.Contains(logs.String(), "s3cret") || strings.Contains(logs.String(), "proxy.corp.example:1080") && tc.want != "" {
			t.Errorf("%q: the log names a value:\n%s", tc.environ, logs.String())
		}
	}
}

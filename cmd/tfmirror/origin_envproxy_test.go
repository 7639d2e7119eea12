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
// says origin traffic goes through HTTPS_PROXY. Start-up refuses it
// instead, as it refuses such an --upstream-proxy, naming the variable
// but not its value, which may hold the proxy's password.
func TestEnvironmentProxyThatDoesNotParse(t *testing.T) {
	for _, env := range []string{
		"HTTPS_PROXY=http://mirror:s3cret%pass@proxy.corp.example:3128",
		"https_proxy=http://mirror:s3cret%zz@proxy.corp.example:3128",
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
	// with NO_PROXY exempting every host: accepted.
	for _, environ := range [][]string{
		{"HTTPS_PROXY=proxy.corp.example:3128"},
		{"HTTPS_PROXY=http://mirror:s3cret%25pass@proxy.corp.example:3128", "NO_PROXY=*"},
	} {
		var dc discovery.Config
		if err := originNetwork(&dc, settings.Config{}, overrides{environ: environ}, slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("%q: %v", environ, err)
		}
	}
}

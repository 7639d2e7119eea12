package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

func TestOriginFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(settings.Config) bool
		wantErr string
	}{
		{name: "defaults", check: func(c settings.Config) bool {
			return !c.Offline && c.UpstreamProxy == "" && c.CredentialsFile == "" &&
				c.OriginTimeout == 30*time.Second && c.OriginRetries == 2 &&
				c.OriginMinSpeed == 1024 && c.OriginMinSpeedWindow == 30*time.Second &&
				c.BreakerThreshold == 5 && c.BreakerCooldown == 30*time.Second
		}},
		{name: "retries and breaker", args: []string{"--origin-timeout", "5s", "--origin-retries", "0", "--origin-breaker-threshold", "0"},
			env: map[string]string{"TFMIRROR_ORIGIN_BREAKER_COOLDOWN": "2m"},
			check: func(c settings.Config) bool {
				return c.OriginTimeout == 5*time.Second && c.OriginRetries == 0 &&
					c.BreakerThreshold == 0 && c.BreakerCooldown == 2*time.Minute
			}},
		{name: "low-speed limit", args: []string{"--origin-min-speed", "10KiB"},
			env: map[string]string{"TFMIRROR_ORIGIN_MIN_SPEED_WINDOW": "1m"},
			check: func(c settings.Config) bool {
				return c.OriginMinSpeed == 10<<10 && c.OriginMinSpeedWindow == time.Minute
			}},
		{name: "low-speed limit off", args: []string{"--origin-min-speed", "0"},
			check: func(c settings.Config) bool { return c.OriginMinSpeed == 0 }},
		{name: "negative low-speed window", args: []string{"--origin-min-speed-window", "-1s"}, wantErr: "--origin-min-speed-window"},
		{name: "negative retries", args: []string{"--origin-retries", "-1"}, wantErr: "--origin-retries"},
		{name: "zero timeout", args: []string{"--origin-timeout", "0s"}, wantErr: "--origin-timeout"},
		{name: "flags", args: []string{"--offline", "--upstream-proxy", "http://proxy.corp:3128", "--credentials-file", "/etc/tfmirror/creds.tfrc"},
			check: func(c settings.Config) bool {
				return c.Offline && c.UpstreamProxy == "http://proxy.corp:3128" && c.CredentialsFile == "/etc/tfmirror/creds.tfrc"
			}},
		{name: "from the environment", env: map[string]string{"TFMIRROR_OFFLINE": "true", "TFMIRROR_UPSTREAM_PROXY": "socks5://10.0.0.1:1080", "TFMIRROR_CREDENTIALS_FILE": "/c"},
			check: func(c settings.Config) bool {
				return c.Offline && c.UpstreamProxy == "socks5://10.0.0.1:1080" && c.CredentialsFile == "/c"
			}},
		{name: "proxy without scheme", args: []string{"--upstream-proxy", "proxy.corp:3128"}, wantErr: "--upstream-proxy"},
		{name: "proxy with an unknown scheme", args: []string{"--upstream-proxy", "ftp://proxy.corp"}, wantErr: "scheme"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseServeCase(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if !tc.check(c) {
				t.Errorf("config %+v", c)
			}
		})
	}
}

func TestBadCredentialsFileStopsStartup(t *testing.T) {
	cfg, err := parseServeFlags([]string{"--data-dir", t.TempDir(), "--insecure-http", "--credentials-file", "/nonexistent/creds.tfrc"},
		func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newServer(cfg, discardLogger(), overrides{environ: []string{}})
	if err == nil {
		m.shutdown(t.Context())
		t.Fatal("mirror started with a missing credentials file")
	}
	if !strings.Contains(err.Error(), "credentials file") {
		t.Fatalf("err = %v", err)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openOffline opens the engine of a serve given args (no environment),
// sealed, as a command that reads a data directory does; the caller
// shuts it down (which lets the data directory go), and has its
// configuration to open it again.
func openOffline(t *testing.T, args ...string) (*engineParts, settings.Config) {
	t.Helper()
	cfg, err := parseServeFlags(args, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Offline = true
	parts, err := openEngine(cfg, discardLogger(), overrides{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return parts, cfg
}

// TestMetadataTimeoutIsDerived: the limit on one whole metadata operation
// follows the origin limits (four requests with all their retries), so
// that raising --origin-timeout or --origin-retries is never cut short by
// a fixed cap.
func TestMetadataTimeoutIsDerived(t *testing.T) {
	tests := []struct {
		args []string
		want time.Duration
	}{
		// 3 attempts of 30s, 2 waits of at most 10s (the Retry-After cap).
		{nil, 4 * (3*30*time.Second + 2*10*time.Second)},
		{[]string{"--origin-timeout", "3m", "--origin-retries", "0"}, 4 * 3 * time.Minute},
		{[]string{"--origin-timeout", "5s", "--origin-retries", "4"}, 4 * (5*5*time.Second + 4*10*time.Second)},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cfg, err := parseServeFlags(append([]string{"--data-dir", t.TempDir(), "--insecure-http"}, tc.args...),
				func(string) (string, bool) { return "", false }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			m, err := newServer(cfg, discardLogger(), overrides{environ: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.shutdown(t.Context())
			if m.metadataTimeout != tc.want || m.metadataTimeout != metadataStages*m.origin.MaxRequestTime() {
				t.Fatalf("metadata operation limit %s, want %s", m.metadataTimeout, tc.want)
			}
		})
	}
}

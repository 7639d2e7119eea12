package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestSharedStoreFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantTTL time.Duration
		wantErr string
	}{
		{name: "default is none", wantTTL: 30 * time.Second},
		{name: "full URL", args: []string{"--shared-store", "s3://b/p?endpoint=http://127.0.0.1:7070&region=x&path_style=true", "--shared-store-key-file", "k"},
			want: "s3://b/p?endpoint=http://127.0.0.1:7070&region=x&path_style=true", wantTTL: 30 * time.Second},
		{name: "from the environment", env: map[string]string{"TFMIRROR_SHARED_STORE": "s3://b", "TFMIRROR_SHARED_STORE_LEASE_TTL": "1m", "TFMIRROR_SHARED_STORE_KEY_FILE": "k"},
			want: "s3://b", wantTTL: time.Minute},
		{name: "not s3", args: []string{"--shared-store", "https://b/p"}, wantErr: "scheme"},
		{name: "unknown parameter", args: []string{"--shared-store", "s3://b/p?secret=x"}, wantErr: "unknown parameter"},
		{name: "lease too short", args: []string{"--shared-store", "s3://b", "--shared-store-key-file", "k", "--shared-store-lease-ttl", "1s"}, wantErr: "at least 3s"},
		{name: "archives larger than one PUT", args: []string{"--shared-store", "s3://b", "--shared-store-key-file", "k", "--max-archive-bytes", "6GiB"}, wantErr: "one PUT"},
		{name: "no timeout", args: []string{"--shared-store", "s3://b", "--shared-store-key-file", "k", "--shared-store-timeout", "0s"}, wantErr: "--shared-store-timeout"},
		// The call's bound widens the window in which a record put back
		// in the bucket is taken as just written.
		{name: "a timeout longer than 2m", args: []string{"--shared-store", "s3://b", "--shared-store-key-file", "k", "--shared-store-timeout", "1h"}, wantErr: "--shared-store-timeout must be at most 2m0s"},
		{name: "a timeout of 2m", args: []string{"--shared-store", "s3://b", "--shared-store-key-file", "k", "--shared-store-timeout", "2m"}, want: "s3://b", wantTTL: 30 * time.Second},
		{name: "no key", args: []string{"--shared-store", "s3://b"}, wantErr: "--shared-store needs --shared-store-key-file"},
		{name: "a key without a store", args: []string{"--shared-store-key-file", "k"}, wantErr: "need --shared-store"},
		{name: "a previous key alone", args: []string{"--shared-store", "s3://b", "--shared-store-previous-key-file", "p"}, wantErr: "--shared-store-key-file"},
		{name: "breaker that never opens", args: []string{"--shared-store", "s3://b", "--shared-store-key-file", "k", "--shared-store-breaker-threshold", "0"}, wantErr: "--shared-store-breaker-threshold"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseServeCase(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if c.SharedStore != tc.want || c.SharedLeaseTTL != tc.wantTTL {
				t.Errorf("SharedStore %q, lease TTL %v; want %q, %v", c.SharedStore, c.SharedLeaseTTL, tc.want, tc.wantTTL)
			}
		})
	}
}

// The call limit and breaker flags reach the store's configuration;
// unset, they are the documented defaults.
func TestSharedStoreLimitFlags(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	c, err := parseServeFlags([]string{"--shared-store", "s3://b", "--shared-store-key-file", "k"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := sharedConfig(c); got.CallTimeout != 10*time.Second || got.BreakerThreshold != 5 || got.BreakerCooldown != 30*time.Second || got.LeaseTTL != 30*time.Second || got.MinSpeed != 1<<10 {
		t.Errorf("defaults: timeout %v, threshold %d, cooldown %v, lease %v, min speed %d", got.CallTimeout, got.BreakerThreshold, got.BreakerCooldown, got.LeaseTTL, got.MinSpeed)
	}
	c, err = parseServeFlags([]string{"--shared-store", "s3://b", "--shared-store-key-file", "k", "--shared-store-timeout", "3s",
		"--shared-store-breaker-threshold", "2", "--shared-store-breaker-cooldown", "1m", "--shared-store-min-speed", "4KiB"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := sharedConfig(c); got.CallTimeout != 3*time.Second || got.BreakerThreshold != 2 || got.BreakerCooldown != time.Minute || got.URL != "s3://b" || got.MinSpeed != 4<<10 {
		t.Errorf("set: %+v", got)
	}
	// 0 turns the limit off, which the store takes as a negative figure
	// (its 0 is its default).
	c, err = parseServeFlags([]string{"--shared-store", "s3://b", "--shared-store-key-file", "k", "--shared-store-min-speed", "0"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := sharedConfig(c); got.MinSpeed >= 0 {
		t.Errorf("--shared-store-min-speed 0: the store's MinSpeed is %d, want negative (off)", got.MinSpeed)
	}
}

// export and import take the shared store's flags as serve does, checked
// by serve's rules.
func TestSharedStoreFlagsOfExportAndImport(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	own := func(*flag.FlagSet) {}
	cfg, rest, err := parseCacheCommandFlags("export", []string{"--shared-store", "s3://b/p", "--shared-store-key-file", "k", "--shared-store-timeout", "3s",
		"--shared-store-breaker-threshold", "2", "out"}, noEnv, io.Discard, "tfmirror export OUT", own)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SharedStore != "s3://b/p" || cfg.SharedTimeout != 3*time.Second || cfg.SharedBreakerThresh != 2 ||
		cfg.SharedLeaseTTL != 30*time.Second || len(rest) != 1 || rest[0] != "out" {
		t.Errorf("got store %q timeout %v threshold %d lease %v args %v", cfg.SharedStore, cfg.SharedTimeout, cfg.SharedBreakerThresh, cfg.SharedLeaseTTL, rest)
	}
	if _, _, err := parseCacheCommandFlags("import", []string{"--shared-store", "s3://b", "--shared-store-key-file", "k", "--shared-store-lease-ttl", "1s", "in"},
		noEnv, io.Discard, "tfmirror import IN", own); err == nil || !strings.Contains(err.Error(), "at least 3s") {
		t.Errorf("a too short lease: err = %v", err)
	}
}

// --shared-store-id reaches the store's configuration (unset: "", the
// store's default from its URL); one that cannot be an ID, or one without
// a store, stops the start.
func TestSharedStoreIDFlag(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	c, err := parseServeFlags([]string{"--shared-store", "s3://b/p", "--shared-store-key-file", "k"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := sharedConfig(c); got.StoreID != "" {
		t.Errorf("default store ID %q, want the store's own default", got.StoreID)
	}
	c, err = parseServeFlags([]string{"--shared-store", "s3://new/p", "--shared-store-key-file", "k", "--shared-store-id", "s3://old/p/"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := sharedConfig(c); got.StoreID != "s3://old/p/" {
		t.Errorf("store ID %q", got.StoreID)
	}
	for _, bad := range [][]string{
		{"--shared-store", "s3://b", "--shared-store-key-file", "k", "--shared-store-id", "a\nb"},
		{"--shared-store", "s3://b", "--shared-store-key-file", "k", "--shared-store-id", strings.Repeat("x", 257)},
		{"--shared-store-id", "prod"},
	} {
		if _, err := parseServeFlags(bad, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "shared-store-id") {
			t.Errorf("%q: %v, want an error naming --shared-store-id", bad, err)
		}
	}
}

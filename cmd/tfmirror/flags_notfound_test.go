package main

import (
	"testing"
	"time"
)

// --not-found-ttl and --not-found-max-entries: their defaults, 0 turning
// the memory off, the environment and the file's syntax, and the values
// refused.
func TestNotFoundFlags(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		env         map[string]string
		wantTTL     time.Duration
		wantEntries int
		wantErr     string
	}{
		{name: "defaults", wantTTL: time.Minute, wantEntries: 10000},
		{name: "off", args: []string{"--not-found-ttl", "0"}, wantTTL: 0, wantEntries: 10000},
		{name: "set", args: []string{"--not-found-ttl", "30s", "--not-found-max-entries", "500"}, wantTTL: 30 * time.Second, wantEntries: 500},
		{name: "from the environment", env: map[string]string{"TFMIRROR_NOT_FOUND_TTL": "5m", "TFMIRROR_NOT_FOUND_MAX_ENTRIES": "7"}, wantTTL: 5 * time.Minute, wantEntries: 7},
		{name: "negative", args: []string{"--not-found-ttl", "-1m"}, wantErr: "--not-found-ttl must not be negative"},
		{name: "no entries", args: []string{"--not-found-max-entries", "0"}, wantErr: "--not-found-max-entries must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseServeCase(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if c.NotFoundTTL != tc.wantTTL || c.NotFoundMaxEntries != tc.wantEntries {
				t.Errorf("not_found_ttl %v, not_found_max_entries %d; want %v, %d", c.NotFoundTTL, c.NotFoundMaxEntries, tc.wantTTL, tc.wantEntries)
			}
		})
	}
}

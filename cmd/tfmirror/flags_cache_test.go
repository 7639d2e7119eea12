package main

import (
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
)

func TestCacheMaxBytesFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    int64
		wantErr string
	}{
		{name: "default is unlimited", want: 0},
		{name: "size syntax", args: []string{"--cache-max-bytes", "50GiB"}, want: 50 << 30},
		{name: "plain bytes", args: []string{"--cache-max-bytes", "1048576"}, want: 1 << 20},
		{name: "from the environment", env: map[string]string{"TFMIRROR_CACHE_MAX_BYTES": "2GB"}, want: 2e9},
		{name: "not a size", args: []string{"--cache-max-bytes", "lots"}, wantErr: `invalid value "lots" for flag -cache-max-bytes: not a size`},
		// Rounded down to 0, it turned the limit off.
		{name: "a fraction of a byte", args: []string{"--cache-max-bytes", "0.1"}, wantErr: `invalid value "0.1" for flag -cache-max-bytes: 0.1 is less than one byte`},
		{name: "a fraction of a byte with a unit", env: map[string]string{"TFMIRROR_CACHE_MAX_BYTES": "0.0001KB"}, wantErr: `0.0001KB is less than one byte`},
		{name: "zero with a unit", args: []string{"--cache-max-bytes", "0.0GiB"}, want: 0},
		{name: "a fraction of a KiB", args: []string{"--cache-max-bytes", "0.5KiB"}, want: 512},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseServeCase(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if c.CacheMaxBytes != tc.want {
				t.Errorf("CacheMaxBytes = %d, want %d", c.CacheMaxBytes, tc.want)
			}
		})
	}
}

func TestDiskReserveFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want int64
	}{
		{name: "default is derived from the cache's Badger options", want: cache.DefaultDiskReserve},
		{name: "size syntax", args: []string{"--disk-reserve", "1GiB"}, want: 1 << 30},
		{name: "zero disables the check", args: []string{"--disk-reserve", "0"}, want: 0},
		{name: "from the environment", env: map[string]string{"TFMIRROR_DISK_RESERVE": "100MiB"}, want: 100 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := parseServeCase(t, tc.args, tc.env, "")
			if c.DiskReserve != tc.want {
				t.Errorf("DiskReserve = %d, want %d", c.DiskReserve, tc.want)
			}
		})
	}
}

func TestCacheVerifyIntervalFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    time.Duration
		wantErr string
	}{
		{name: "default: only when asked", want: 0},
		{name: "a week", args: []string{"--cache-verify-interval", "168h"}, want: 168 * time.Hour},
		{name: "from the environment", env: map[string]string{"TFMIRROR_CACHE_VERIFY_INTERVAL": "24h"}, want: 24 * time.Hour},
		{name: "negative", args: []string{"--cache-verify-interval", "-1h"}, wantErr: "must not be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseServeCase(t, tc.args, tc.env, tc.wantErr)
			if ok && c.CacheVerifyInterval != tc.want {
				t.Errorf("CacheVerifyInterval = %v, want %v", c.CacheVerifyInterval, tc.want)
			}
		})
	}
}

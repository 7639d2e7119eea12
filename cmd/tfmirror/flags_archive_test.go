package main

import (
	"testing"
)

func TestArchiveLimitFlags(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		env         map[string]string
		wantBytes   int64
		wantEntries int
		wantErr     string
	}{
		{name: "defaults", wantBytes: 2 << 30, wantEntries: 10000},
		{name: "size syntax", args: []string{"--archive-max-unpacked-bytes", "4GiB", "--archive-max-entries", "50"}, wantBytes: 4 << 30, wantEntries: 50},
		{name: "from the environment", env: map[string]string{"TFMIRROR_ARCHIVE_MAX_UNPACKED_BYTES": "512MiB", "TFMIRROR_ARCHIVE_MAX_ENTRIES": "7"}, wantBytes: 512 << 20, wantEntries: 7},
		{name: "zero bytes", args: []string{"--archive-max-unpacked-bytes", "0"}, wantErr: "must be positive"},
		{name: "zero entries", args: []string{"--archive-max-entries", "0"}, wantErr: "must be positive"},
		{name: "not a size", args: []string{"--archive-max-unpacked-bytes", "lots"}, wantErr: `invalid value "lots" for flag -archive-max-unpacked-bytes: not a size`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseServeCase(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if c.ArchiveMaxUnpacked != tc.wantBytes || c.ArchiveMaxEntries != tc.wantEntries {
				t.Errorf("limits %d bytes, %d entries; want %d, %d", c.ArchiveMaxUnpacked, c.ArchiveMaxEntries, tc.wantBytes, tc.wantEntries)
			}
		})
	}
}

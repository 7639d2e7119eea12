package main

import (
	"io"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// parseServeCase parses args, with env as the environment, as serve does.
// With wantErr (a part of the expected message) it fails t unless the
// parse fails so; it returns the configuration, and false when there is
// nothing more to check.
func parseServeCase(t *testing.T, args []string, env map[string]string, wantErr string) (settings.Config, bool) {
	t.Helper()
	c, err := parseServeFlags(args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one saying %q", err, wantErr)
		}
		return c, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return c, true
}

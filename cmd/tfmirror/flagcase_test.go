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

// A value an environment variable gives that the checks of the values
// refuse is said to come from it: the message names the flag, which the
// command line, and the configuration file, may not hold.
func TestValueFromTheEnvironmentRefusedNamesIt(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		args    []string
		wantErr string
	}{
		{map[string]string{"TFMIRROR_MAX_CONNECTIONS": "0"}, nil, "--max-connections must be positive, not 0 (from the environment: TFMIRROR_MAX_CONNECTIONS)"},
		{map[string]string{"TFMIRROR_LOG_LEVEL": "verbose"}, nil, `--log-level "verbose": want debug, info, warn or error (from the environment: TFMIRROR_LOG_LEVEL)`},
		{map[string]string{"TFMIRROR_ALLOWED_ORIGINS": ","}, nil, "--allowed-origins must name at least one host (from the environment: TFMIRROR_ALLOWED_ORIGINS)"},
	} {
		parseServeCase(t, tc.args, tc.env, tc.wantErr)
	}
	// Given by a flag, it says nothing of the environment.
	if _, err := parseServeFlags([]string{"--max-connections", "0"}, func(string) (string, bool) { return "", false }, io.Discard); err == nil || strings.Contains(err.Error(), "environment") {
		t.Errorf("--max-connections 0: %v, want refused without naming the environment", err)
	}
}

package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// TestDocsDescribeEveryFlag keeps the configuration reference in step with
// the flags: every flag of `tfmirror serve` and `tfmirror sync` is a row
// of docs/configuration.md (which TestConfigurationDoc keeps exactly what
// the settings table gives), and sync's own flags, which are not settings
// of serve, are rows of the sync flag table in docs/air-gap.md.
func TestDocsDescribeEveryFlag(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	var serveUsage, syncUsage bytes.Buffer
	if _, err := parseServeFlags([]string{"-help"}, noEnv, &serveUsage); !errors.Is(err, settings.ErrHelp) {
		t.Fatalf("-help: %v", err)
	}
	if _, err := parseSyncFlags([]string{"-help"}, noEnv, &syncUsage); !errors.Is(err, settings.ErrHelp) {
		t.Fatalf("sync -help: %v", err)
	}
	rowsOf := func(path string) []string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var rows []string
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.HasPrefix(line, "| `--") {
				cell, _, _ := strings.Cut(line[1:], "|")
				rows = append(rows, cell)
			}
		}
		return rows
	}
	hasRow := func(rows []string, flag string) bool {
		for _, cell := range rows {
			if strings.Contains(cell, "`--"+flag+"`") {
				return true
			}
		}
		return false
	}
	reference, airGap := rowsOf(configurationDocPath), rowsOf("../../docs/air-gap.md")
	usage := serveUsage.String() + syncUsage.String()
	serveSyncFlags := usageEntries(t, usage)
	if len(serveSyncFlags) < 50 {
		t.Fatalf("found only %d flags in the usage text:\n%s", len(serveSyncFlags), usage)
	}
	syncFlags := usageEntries(t, syncUsage.String())
	for name := range serveSyncFlags {
		_, ofSync := syncFlags[name]
		switch {
		case !ofSync || hasHelp(syncFlags[name], settingHelp(name)) || name == settings.ConfigFlag:
			if !hasRow(reference, name) {
				t.Errorf("docs/configuration.md has no row for --%s", name)
			}
		default: // one of sync's own
			if !hasRow(airGap, name) {
				t.Errorf("docs/air-gap.md's table of sync's flags has no row for --%s", name)
			}
		}
	}
}

// settingHelp is the help of setting name, "" when there is none.
func settingHelp(name string) string {
	for _, s := range settings.Table {
		if s.Name == name {
			return s.Help
		}
	}
	return ""
}

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
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

// TestSettingsErrorsEachOnALine: several settings a command refuses at
// once (serve's flags, a data directory command's configuration file)
// are listed each on a line of its own, indented under the command's
// line, as config check lists a file's errors: they were printed one
// after the other, the first after "tfmirror serve:" and the others at
// the start of a line, where they read as lines of another program.
func TestSettingsErrorsEachOnALine(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	if err := os.WriteFile(conf, []byte("listen = \"8443\"\nlog_level = \"loud\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--data-dir", dir, "--listen", "foo", "--log-level", "loud", "--max-connections", "-1"},
		{"export", "--data-dir", dir, "--config", conf, filepath.Join(dir, "out")},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Fatalf("tfmirror %s: exit %d, want 2\n%s", strings.Join(args, " "), code, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		prefix := "tfmirror " + args[0] + ": "
		if !strings.HasPrefix(lines[0], prefix) || len(lines) < 3 {
			t.Fatalf("tfmirror %s: stderr:\n%s\nwant the command's line, then a line for each error", strings.Join(args, " "), stderr.String())
		}
		errs := 0
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "Usage: ") {
				break
			}
			if !strings.HasPrefix(l, "  --") {
				t.Errorf("tfmirror %s: line %q is neither the command's nor an indented error's\nstderr:\n%s", args[0], l, stderr.String())
			}
			errs++
		}
		if errs < 2 {
			t.Errorf("tfmirror %s: %d errors listed under the command's line, want each on its own\nstderr:\n%s", args[0], errs, stderr.String())
		}
	}
}

// TestOCILayoutExportRefusesEveryTarName: an OCI layout export is a
// directory; OUT named as a tar file is refused before anything is
// done, exit 2, the refusal naming every ending it refuses (.tgz was
// refused as not ending in ".tar or .tar.gz").
func TestOCILayoutExportRefusesEveryTarName(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"out.tar", "out.tar.gz", "out.tgz"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"export", "--data-dir", dir, "--format", "oci-layout", filepath.Join(dir, name)}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "OUT must not end in .tar, .tar.gz or .tgz") {
			t.Errorf("export --format oci-layout %s: exit %d, stderr:\n%s\nwant 2, naming the endings refused", name, code, stderr.String())
		}
	}
}

package main

import (
	"bytes"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// usageEntries parses flag.PrintDefaults output: each flag's help, with
// its default if it shows one.
func usageEntries(t *testing.T, usage string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)(?: [a-z]+)?\n    \t(.*)$`).FindAllStringSubmatch(usage, -1) {
		out[m[1]] = m[2]
	}
	if len(out) < 3 {
		t.Fatalf("found only %d flags in the usage text:\n%s", len(out), usage)
	}
	return out
}

// TestSettingsCommands checks what the table says of the other commands
// against their flags, as their -h lists them: a command takes a setting
// when it has a flag of that name with serve's help (a default of its own
// is allowed: sync and the commands on a data directory log less), and
// the table says so exactly then.
func TestSettingsCommands(t *testing.T) {
	help := func(args ...string) map[string]string {
		var stdout, stderr bytes.Buffer
		if code := run(append(args, "-h"), &stdout, &stderr); code != 0 {
			t.Fatalf("%v -h: exit status %d: %s", args, code, stderr.String())
		}
		return usageEntries(t, stdout.String())
	}
	serve := help("serve")
	// Every setting, and --config.
	if names := slices.Sorted(maps.Keys(serve)); len(names) != len(settings.Table)+1 || !slices.Contains(names, settings.ConfigFlag) {
		t.Errorf("serve -h lists %d flags, the table has %d settings (and --config)", len(names), len(settings.Table))
	}
	for _, s := range settings.Table {
		if !hasHelp(serve[s.Name], s.Help) {
			t.Errorf("serve -h: --%s: %q, want %q", s.Name, serve[s.Name], s.Help)
		}
	}
	for _, cn := range settings.CommandNames {
		flags := help(strings.Fields(cn.Name)...)
		for _, s := range settings.Table {
			h, ok := flags[s.Name]
			takes := ok && hasHelp(h, s.Help)
			if says := s.Commands&cn.Cmd != 0; takes != says {
				t.Errorf("tfmirror %s --%s: the table says taken %v, the command's flags say %v (%q)", cn.Name, s.Name, says, takes, h)
			}
		}
	}
	// Every command the usage lists that takes a setting with serve's
	// meaning is one of CommandNames, so that docs/configuration.md's
	// column names it beside the settings it takes.
	var usage bytes.Buffer
	if code := run([]string{"help"}, &usage, io.Discard); code != 0 {
		t.Fatalf("help: exit status %d", code)
	}
	commands := regexp.MustCompile(`(?m)^  tfmirror ([a-z-]+(?: [a-z]+)?)\b`).FindAllStringSubmatch(usage.String(), -1)
	if len(commands) < 10 {
		t.Fatalf("found %d commands in the usage:\n%s", len(commands), usage.String())
	}
	for _, c := range commands {
		name := c[1]
		if name == "serve" || name == "version" ||
			slices.ContainsFunc(settings.CommandNames, func(cn struct {
				Cmd  settings.Command
				Name string
			}) bool {
				return cn.Name == name
			}) {
			continue
		}
		var stdout, stderr bytes.Buffer
		if code := run(append(strings.Fields(name), "-h"), &stdout, &stderr); code != 0 {
			t.Fatalf("%s -h: exit status %d: %s", name, code, stderr.String())
		}
		for _, s := range settings.Table {
			if h, ok := flagHelp(stdout.String(), s.Name); ok && hasHelp(h, s.Help) {
				t.Errorf("tfmirror %s takes --%s with serve's meaning, but is not one of settings.CommandNames: docs/configuration.md does not say so", name, s.Name)
			}
		}
	}
}

// flagHelp is the help of flag name in usage, flag.PrintDefaults output.
func flagHelp(usage, name string) (string, bool) {
	m := regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(name) + `(?: [a-z]+)?\n    \t(.*)$`).FindStringSubmatch(usage)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// hasHelp says whether entry, a flag's line in -h, is help with or
// without a default.
func hasHelp(entry, help string) bool {
	return entry == help || strings.HasPrefix(entry, help+" (default ") && strings.HasSuffix(entry, ")")
}

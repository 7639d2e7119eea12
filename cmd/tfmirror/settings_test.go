package main

import (
	"bytes"
	"flag"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// nonDefault is a valid value of kind that differs from def.
func nonDefault(kind, def string) string {
	v := map[string]string{"string": "x-test", "bool": "true", "int": "7", "duration": "7m0s",
		"size": "7MiB", "days": "7d", "list": "a.example,b.example"}[kind]
	if v == def {
		v = map[string]string{"int": "8", "duration": "8m0s", "size": "8MiB", "days": "8d"}[kind]
	}
	return v
}

// allSettings registers every setting on a new flag set bound to c.
func allSettings(c *serveConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, s := range settings {
		s.register(fs, c)
	}
	return fs
}

// TestSettingsTable checks the table itself: each setting has a name of
// its own, a group of the docs, a default the docs show truly, and a field
// of its own; and each can be set by its flag and by its environment
// variable.
func TestSettingsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range settings {
		if seen[s.Name] {
			t.Errorf("setting %s is in the table twice", s.Name)
		}
		seen[s.Name] = true
		if !regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`).MatchString(s.Name) {
			t.Errorf("setting %q: not a flag name", s.Name)
		}
		if !slices.Contains(groups, s.Group) {
			t.Errorf("setting %s: group %q is not one of the docs' groups", s.Name, s.Group)
		}
		if s.Help == "" {
			t.Errorf("setting %s has no help", s.Name)
		}
		if s.DocDefault != "" && !s.bind.zero {
			t.Errorf("setting %s: DocDefault %q hides its default", s.Name, s.DocDefault)
		}
		if strings.Contains(s.Doc+s.Help, "|") {
			t.Errorf("setting %s: a | would break the docs' table", s.Name)
		}
	}
	if len(settings) < 50 {
		t.Fatalf("only %d settings", len(settings))
	}

	for _, s := range settings {
		t.Run(s.Name, func(t *testing.T) {
			var c serveConfig
			fs := allSettings(&c)
			defaults := map[string]string{}
			fs.VisitAll(func(f *flag.Flag) { defaults[f.Name] = f.Value.String() })
			v := nonDefault(s.bind.kind, defaults[s.Name])
			if v == "" {
				t.Fatalf("kind %q", s.bind.kind)
			}
			for _, how := range []string{"flag", "environment"} {
				var c serveConfig
				fs := allSettings(&c)
				args, env := []string{"--" + s.Name + "=" + v}, map[string]string{}
				if how == "environment" {
					args, env = nil, map[string]string{s.Env(): v}
				}
				if err := parseWithEnv(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
					t.Fatalf("%s: %v", how, err)
				}
				// Only this setting's value changed: it has a field of its own.
				var changed []string
				fs.VisitAll(func(f *flag.Flag) {
					if f.Value.String() != defaults[f.Name] {
						changed = append(changed, f.Name)
					}
				})
				if !slices.Equal(changed, []string{s.Name}) {
					t.Errorf("set by %s to %q, the settings that changed are %v", how, v, changed)
				}
				var plain serveConfig
				allSettings(&plain)
				if reflect.DeepEqual(c, plain) {
					t.Errorf("set by %s, the configuration is the default one", how)
				}
			}
		})
	}
}

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
		var stderr bytes.Buffer
		if code := run(append(args, "-h"), io.Discard, &stderr); code != 0 {
			t.Fatalf("%v -h: exit status %d: %s", args, code, stderr.String())
		}
		return usageEntries(t, stderr.String())
	}
	serve := help("serve")
	if names := slices.Sorted(maps.Keys(serve)); len(names) != len(settings) {
		t.Errorf("serve -h lists %d flags, the table has %d settings", len(names), len(settings))
	}
	for _, s := range settings {
		if !hasHelp(serve[s.Name], s.Help) {
			t.Errorf("serve -h: --%s: %q, want %q", s.Name, serve[s.Name], s.Help)
		}
	}
	for _, cn := range commandNames {
		flags := help(strings.Fields(cn.name)...)
		for _, s := range settings {
			h, ok := flags[s.Name]
			takes := ok && hasHelp(h, s.Help)
			if says := s.Commands&cn.cmd != 0; takes != says {
				t.Errorf("tfmirror %s --%s: the table says taken %v, the command's flags say %v (%q)", cn.name, s.Name, says, takes, h)
			}
		}
	}
}

// hasHelp says whether entry, a flag's line in -h, is help with or
// without a default.
func hasHelp(entry, help string) bool {
	return entry == help || strings.HasPrefix(entry, help+" (default ") && strings.HasSuffix(entry, ")")
}

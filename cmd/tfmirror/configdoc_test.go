package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/cmd/tfmirror/internal/settings"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from the settings table")

// configurationDocPath is docs/configuration.md, from this directory.
const configurationDocPath = "../../docs/configuration.md"

// TestConfigurationDoc keeps docs/configuration.md what the settings
// table makes of it; -update rewrites it.
func TestConfigurationDoc(t *testing.T) {
	want := configurationDoc()
	if *update {
		if err := os.WriteFile(configurationDocPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(configurationDocPath)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/tfmirror -run TestConfigurationDoc -update to write it)", err)
	}
	if string(got) != want {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		line := func(ls []string) string {
			if i < len(ls) {
				return ls[i]
			}
			return "(end of file)"
		}
		t.Errorf("docs/configuration.md is not what the settings table (cmd/tfmirror/internal/settings/table.go) gives;\n"+
			"regenerate it with: go test ./cmd/tfmirror -run TestConfigurationDoc -update\n"+
			"first difference, line %d:\n  file:  %s\n  table: %s", i+1, line(gl), line(wl))
	}
}

// configurationDoc is docs/configuration.md, made from the table.
func configurationDoc() string {
	var b strings.Builder
	b.WriteString(`<!-- Generated from the settings table, cmd/tfmirror/internal/settings/table.go; do not edit.
     Regenerate with: go test ./cmd/tfmirror -run TestConfigurationDoc -update -->

# Configuration

` + "`tfmirror serve`" + ` takes the settings below. Each is a flag, and can also be set by an environment
variable ` + "`TFMIRROR_`" + ` followed by the flag name in upper snake case (` + "`--data-dir` is `TFMIRROR_DATA_DIR`" + `);
a flag on the command line wins over the environment. Sizes are a number of bytes or a number and a
unit (` + "`512MiB`, `2GB`" + `), durations are Go's (` + "`90s`, `10m`, `1h30m`" + `), lists are comma-separated.

The column *also* names the other commands that take a setting with the same meaning.
` + "`tfmirror sync`" + ` logs as ` + "`text`" + ` at level ` + "`warn`" + ` by default; its own flags are listed under
[tfmirror sync](air-gap.md#tfmirror-sync). The commands on a data directory (export, import,
export-key, cache prune and cache verify) log at level ` + "`warn`" + ` by default and take ` + "`--data-dir`" + ` too.

A setting's value is read once, at start; where a setting names a file or a directory that is read
again while serving, it says so. A setting marked *secret* may carry a credential in its value, which
tfmirror never prints; the other settings that lead to secrets name a file or a variable holding them.

`)
	for _, g := range settings.Groups {
		fmt.Fprintf(&b, "- [%s](#%s)\n", g, anchorOf(string(g)))
	}
	for _, g := range settings.Groups {
		fmt.Fprintf(&b, "\n## %s\n\n", g)
		b.WriteString("| flag | environment variable | default | also | meaning |\n| --- | --- | --- | --- | --- |\n")
		for _, s := range settings.Table {
			if s.Group != g {
				continue
			}
			meaning := s.Doc
			if meaning == "" {
				meaning = s.Help
			}
			if s.Reload != "" {
				meaning += ". **Read again while serving:** " + s.Reload
			}
			if s.Secret {
				meaning += ". **Secret:** the value may carry a credential; it is never printed"
			}
			var also []string
			for _, cn := range settings.CommandNames {
				if s.Commands&cn.Cmd != 0 {
					also = append(also, cn.Name)
				}
			}
			fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s | %s |\n", s.Name, s.Env(), docDefault(s), strings.Join(also, ", "), meaning)
		}
	}
	return b.String()
}

// docDefault is s's default as the docs show it: the flag's own, or
// DocDefault for a zero value that means more.
func docDefault(s *settings.Setting) string {
	fs := flag.NewFlagSet("doc", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s.Register(fs, &settings.Config{})
	def := fs.Lookup(s.Name).DefValue
	switch {
	case !s.ZeroDefault():
		return "`" + def + "`"
	case s.DocDefault != "":
		return s.DocDefault
	case s.Kind() == "bool":
		return "`false`"
	case s.Kind() == "string" || s.Kind() == "list":
		return "none"
	default:
		return "`0`"
	}
}

// anchorOf is the anchor GitHub gives a heading of text.
func anchorOf(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

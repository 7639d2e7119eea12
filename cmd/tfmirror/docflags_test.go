package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// commandFlags returns the flags of each command line of subcommands, as
// its -h lists them.
func commandFlags(t *testing.T) map[string][]string {
	t.Helper()
	flagLine := regexp.MustCompile(`^  -([a-z0-9-]+)`)
	out := map[string][]string{}
	for _, cmd := range subcommands {
		var stdout, stderr bytes.Buffer
		run(append(cmd[:len(cmd):len(cmd)], "-h"), &stdout, &stderr)
		var names []string
		for line := range strings.Lines(stdout.String() + stderr.String()) {
			if m := flagLine.FindStringSubmatch(line); m != nil {
				names = append(names, m[1])
			}
		}
		out[strings.Join(cmd, " ")] = names
	}
	return out
}

// docCommandLines returns the command lines of a Markdown document that
// start with "tfmirror ": its code lines (indented or fenced, a line
// ending in a backslash joined to the next, a comment cut off) and its
// inline code spans, each with its line number.
func docCommandLines(text string) map[int][]string {
	out := map[int][]string{}
	lines := strings.Split(text, "\n")
	span := regexp.MustCompile("`([^`]+)`")
	fenced := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		var candidates []string
		if fenced || strings.HasPrefix(line, "    ") {
			code := line
			for strings.HasSuffix(code, `\`) && i+1 < len(lines) {
				i++
				code = strings.TrimSuffix(code, `\`) + " " + strings.TrimSpace(lines[i])
			}
			code, _, _ = strings.Cut(code, " #")
			candidates = append(candidates, strings.TrimPrefix(strings.TrimSpace(code), "$ "))
		} else {
			for _, m := range span.FindAllStringSubmatch(line, -1) {
				candidates = append(candidates, m[1])
			}
		}
		for _, c := range candidates {
			if rest, ok := strings.CutPrefix(c, "tfmirror "); ok {
				// One command: up to a pipe, a redirection or the next command.
				rest, _, _ = strings.Cut(rest, " | ")
				rest, _, _ = strings.Cut(rest, " && ")
				rest, _, _ = strings.Cut(rest, "; ")
				rest, _, _ = strings.Cut(rest, " > ")
				out[i+1] = append(out[i+1], rest)
			}
		}
	}
	return out
}

// Every tfmirror command line the documents show (README.md, SECURITY.md,
// docs/*.md) names a command that exists and only flags that command
// takes, as its -h lists them: a user who copies one is not told that the
// flag is not defined.
func TestDocsNameFlagsTheCommandsTake(t *testing.T) {
	flags := commandFlags(t)
	groups := map[string]bool{}
	for name := range flags {
		if group, _, ok := strings.Cut(name, " "); ok {
			groups[group] = true
		}
	}
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join("..", "..", "README.md"), filepath.Join("..", "..", "SECURITY.md"))
	flagWord := regexp.MustCompile(`(?:^|\s)--([a-z0-9][a-z0-9-]*)`)
	checked := 0
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for line, cmds := range docCommandLines(string(data)) {
			for _, c := range cmds {
				words := strings.Fields(c)
				if len(words) == 0 {
					continue
				}
				name := words[0]
				if strings.HasSuffix(name, ":") {
					continue // a message the command prints ("tfmirror import: ... refused")
				}
				if groups[name] {
					if len(words) < 2 || flags[name+" "+words[1]] == nil {
						t.Errorf("%s:%d: tfmirror %s: no such command (%q)", doc, line, name, c)
						continue
					}
					name += " " + words[1]
				}
				own, ok := flags[name]
				if !ok {
					if name != "version" && name != "-h" {
						t.Errorf("%s:%d: tfmirror %s: no such command (%q)", doc, line, name, c)
					}
					continue
				}
				checked++
				for _, m := range flagWord.FindAllStringSubmatch(c, -1) {
					if m[1] != "help" && !slices.Contains(own, m[1]) {
						t.Errorf("%s:%d: tfmirror %s takes no --%s (%q)", doc, line, name, m[1], c)
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d tfmirror command lines found in the documents: the scan reads them wrong", checked)
	}
}

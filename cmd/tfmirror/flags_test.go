package main

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEDocumentsEveryFlag keeps the README's configuration reference
// in step with the flags: every flag of `tfmirror serve` and `tfmirror
// sync` has a row.
func TestREADMEDocumentsEveryFlag(t *testing.T) {
	var usage bytes.Buffer
	if _, err := parseServeFlags([]string{"-help"}, func(string) (string, bool) { return "", false }, &usage); !errors.Is(err, errHelp) {
		t.Fatalf("-help: %v", err)
	}
	// sync's flags: the shared ones and its own.
	if _, err := parseSyncFlags([]string{"-help"}, func(string) (string, bool) { return "", false }, &usage); !errors.Is(err, errHelp) {
		t.Fatalf("sync -help: %v", err)
	}
	names := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(usage.String(), -1)
	if len(names) < 20 {
		t.Fatalf("found only %d flags in the usage text:\n%s", len(names), usage.String())
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for line := range strings.SplitSeq(string(readme), "\n") {
		if strings.HasPrefix(line, "| `--") {
			rows = append(rows, line)
		}
	}
	for _, m := range names {
		flag := "`--" + m[1] + "`"
		documented := false
		for _, row := range rows {
			if cell, _, _ := strings.Cut(row[1:], "|"); strings.Contains(cell, flag) {
				documented = true
			}
		}
		if !documented {
			t.Errorf("README.md's flag table has no row for %s", flag)
		}
	}
}

package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// subcommands are the command lines of every command and subcommand,
// for the tests of their -h.
var subcommands = [][]string{
	{"serve"}, {"sync"}, {"export"}, {"import"}, {"export-key"}, {"cache", "prune"}, {"cache", "verify"},
	{"config", "check"}, {"policy", "explain"}, {"reload"},
}

// Every flag's -h line names its argument by its type or a NAME: Go's
// flag package takes back-quoted text in a usage string as the
// argument's name (flag.UnquoteUsage), so that `import -h` showed
// "-allow-unsigned terraform providers mirror".
func TestFlagUsageArgumentNames(t *testing.T) {
	word := regexp.MustCompile(`^[A-Za-z_]+$`)
	for _, cmd := range subcommands {
		var stdout, stderr bytes.Buffer
		if code := run(append(cmd[:len(cmd):len(cmd)], "-h"), &stdout, &stderr); code != 0 {
			t.Errorf("tfmirror %s -h: exit %d\n%s%s", strings.Join(cmd, " "), code, stdout.String(), stderr.String())
		}
		n := 0
		for line := range strings.Lines(stdout.String() + stderr.String()) {
			if !strings.HasPrefix(line, "  -") {
				continue
			}
			n++
			head, _, _ := strings.Cut(strings.TrimSpace(line), "\t")
			f := strings.Fields(head)
			if len(f) > 2 || len(f) == 2 && !word.MatchString(f[1]) {
				t.Errorf("tfmirror %s -h: %q: the argument's name is usage text", strings.Join(cmd, " "), strings.TrimSpace(line))
			}
		}
		if n == 0 {
			t.Errorf("tfmirror %s -h lists no flag:\n%s%s", strings.Join(cmd, " "), stdout.String(), stderr.String())
		}
	}
}

// -h, --help and help print a command group's usage on stdout and exit
// 0, whichever the group; a subcommand it does not have is a usage error
// (exit 2).
func TestGroupHelp(t *testing.T) {
	for _, group := range []string{"cache", "policy", "config"} {
		for _, h := range []string{"-h", "--help", "help"} {
			var stdout, stderr bytes.Buffer
			if code := run([]string{group, h}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "Usage: tfmirror "+group+" ") {
				t.Errorf("tfmirror %s %s: exit %d, want 0 and the usage on stdout\nstdout: %s\nstderr: %s", group, h, code, stdout.String(), stderr.String())
			}
		}
		var stdout, stderr bytes.Buffer
		if code := run([]string{group, "nope"}, &stdout, &stderr); code != 2 {
			t.Errorf("tfmirror %s nope: exit %d, want 2", group, code)
		}
	}
}

// Every command's usage asked for with -h or --help is printed on stdout
// with exit status 0, as tfmirror's own and its command groups' are
// (tfmirror sync -h | less, tfmirror export --help | grep -- --format);
// a flag it does not have gets the error and the usage on stderr, exit
// status 2, and nothing on stdout.
func TestCommandHelpOnStdout(t *testing.T) {
	for _, cmd := range subcommands {
		name := strings.Join(cmd, " ")
		for _, h := range []string{"-h", "--help"} {
			var stdout, stderr bytes.Buffer
			code := run(append(cmd[:len(cmd):len(cmd)], h), &stdout, &stderr)
			if code != 0 || !strings.Contains(stdout.String(), "Usage: tfmirror "+name) || !strings.Contains(stdout.String(), "\n  -") || stderr.Len() != 0 {
				t.Errorf("tfmirror %s %s: exit %d, want 0, the usage and flags on stdout and nothing on stderr\nstdout:\n%s\nstderr:\n%s", name, h, code, stdout.String(), stderr.String())
			}
		}
		var stdout, stderr bytes.Buffer
		code := run(append(cmd[:len(cmd):len(cmd)], "--no-such-flag"), &stdout, &stderr)
		if code != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "no-such-flag") {
			t.Errorf("tfmirror %s --no-such-flag: exit %d, want 2, the error on stderr and nothing on stdout\nstdout:\n%s\nstderr:\n%s", name, code, stdout.String(), stderr.String())
		}
	}
}

// export-key reads a key file and opens no cache: the flags of the
// commands on a data directory that it would take and pass over (the
// shared store's, --origin-ca-file, --log-level) are not its own. It took
// them, listed them in -h and in docs/configuration.md, and did nothing
// with them.
func TestExportKeyTakesOnlyItsFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--shared-store", "s3://bucket/prefix"},
		{"--shared-store-key-file", "/etc/tfmirror/shared.key"},
		{"--origin-ca-file", "/etc/ssl/origin.pem"},
		{"--log-level", "debug"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"export-key", "--data-dir", filepath.Join(t.TempDir(), "data")}, args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "flag provided but not defined: "+strings.TrimPrefix(args[0], "-")) {
			t.Errorf("tfmirror export-key %s: exit status %d, stderr:\n%s\nwant 2, the flag not defined", strings.Join(args, " "), code, stderr.String())
		}
	}
}

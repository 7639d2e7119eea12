package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
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

` + "`tfmirror serve`" + ` takes the settings below. Each is a flag; an environment variable
` + "`TFMIRROR_`" + ` followed by the flag name in upper snake case (` + "`--data-dir` is `TFMIRROR_DATA_DIR`" + `);
and an attribute of the [configuration file](#the-configuration-file), the flag name in snake case
(` + "`data_dir`" + `). A flag on the command line wins over the environment, which wins over the file, which
wins over the default; an environment variable set to the empty string counts as unset. Sizes are a number of bytes or a number and a unit (` + "`512MiB`, `2GB`" + `),
durations are Go's (` + "`90s`, `10m`, `1h30m`" + `) or whole days (` + "`1d`, `30d`" + `), every duration alike (the
policy's ages too), lists are comma-separated (in the file, lists of strings).

The column *also* names the other commands that take a setting with the same meaning.
` + "`tfmirror sync`" + ` logs as ` + "`text`" + ` at level ` + "`warn`" + ` by default; its own flags are listed under
[tfmirror sync](air-gap.md#tfmirror-sync). The commands on a data directory (export, import,
export-key, cache prune, cache verify and policy explain) log at level ` + "`warn`" + ` by default and take ` + "`--data-dir`" + ` too.

A setting's value is read at start. Where a setting names a file or a directory that is read
again while serving, it says so; a setting marked *reloadable* takes a new value from the
configuration file on a reload (` + "`tfmirror reload`" + ` or ` + "`SIGHUP`" + `). A setting marked *secret* may carry a credential in its value,
which tfmirror never prints; the other settings that lead to secrets name a file or a variable
holding them.

- [The configuration file](#the-configuration-file)
`)
	for _, g := range settings.Groups {
		fmt.Fprintf(&b, "- [%s](#%s)\n", g, anchorOf(string(g)))
	}
	b.WriteString(configFileDoc)
	for _, g := range settings.Groups {
		fmt.Fprintf(&b, "\n## %s\n\n", g)
		b.WriteString("| flag | environment variable | file attribute | default | also | meaning |\n| --- | --- | --- | --- | --- | --- |\n")
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
			if s.Live {
				meaning += ". **Reloadable:** a new value in the configuration file is put in force by `tfmirror reload` (or `SIGHUP`)"
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
			fmt.Fprintf(&b, "| `--%s` | `%s` | `%s` | %s | %s | %s |\n", s.Name, s.Env(), s.Attribute(), docDefault(s), strings.Join(also, ", "), meaning)
		}
	}
	return b.String()
}

// configFileDoc is docs/configuration.md's section on the file.
const configFileDoc = `
## The configuration file

| flag | environment variable | default | meaning |
| --- | --- | --- | --- |
| ` + "`--config`" + ` | ` + "`TFMIRROR_CONFIG`" + ` | none | the configuration file: HCL, or HCL's JSON syntax when its name ends in ` + "`.json`" + ` |

Every setting below is an attribute of the file, named as its flag in snake case. A value is the
setting's type (a string, ` + "`true`/`false`" + `, a whole number, a list of strings) or a string in the
flag's syntax: ` + "`cache_max_bytes = \"40GiB\"`" + ` and ` + "`cache_max_bytes = 42949672960`" + ` are the same, and so
are ` + "`allowed_origins = [\"a.example\", \"b.example\"]`" + ` and ` + "`allowed_origins = \"a.example,b.example\"`" + `.
Durations are strings (` + "`\"72h\"`, `\"1d\"`" + `). The file holds values only: no variables, no functions.

` + "```hcl" + `
# /etc/tfmirror/tfmirror.hcl
listen          = ":8443"
data_dir        = "/var/lib/tfmirror"
allowed_origins = ["registry.terraform.io", "registry.opentofu.org"]
cache_max_bytes = "40GiB"
versions_ttl    = "10m"
public_url      = "https://tfmirror.example.com/"
auth_tokens_file = "/etc/tfmirror/tokens" # the tokens stay in their own file
log_level       = "info"

# The package policy (docs/policy.md): what may be served.
policy {
  allow               = ["registry.terraform.io/hashicorp/*"]
  minimum_release_age = "3d"
}
` + "```" + `

` + "```json" + `
{"allowed_origins": ["registry.terraform.io"], "cache_max_bytes": "40GiB", "log_level": "info"}
` + "```" + `

**Precedence.** A flag wins over its ` + "`TFMIRROR_`" + ` variable, which wins over the file, which wins
over the default. The status page (HTML, and ` + "`?format=json`" + `'s ` + "`configuration`" + `) lists every setting's
value in effect and where it came from (` + "`flag`, `env`, `file` or `default`" + `), secrets redacted; with
client authentication on, only to requests with a token. A value the file gives that a flag or a
variable overrides with another is a warning with its line (` + "`tfmirror.hcl:3,13-19: Overridden value: log_level is not in force: TFMIRROR_LOG_LEVEL in the environment wins over the file (the value in force is \"debug\")`" + `),
logged at start and on each reload and printed by ` + "`tfmirror config check`" + ` and ` + "`tfmirror reload`" + `: an edit of the file that
cannot take effect is said, not ignored.

**Refused whole.** An attribute that names no setting, a value of the wrong type, a duration or a
size that does not parse, a value the flag would refuse: each is an error with the file and line
(` + "`tfmirror.hcl:3,19-25: Invalid value for cache_max_bytes: ...`" + `), and ` + "`tfmirror serve`" + ` does not
start (exit status 2). A name that is not a setting gets the one meant when one is near
(` + "`policies`: did you mean `policy`?" + `), and a rule of the policy written outside its block is told so
(` + "`deny` belongs inside `policy { }`" + `). A file nested deeper than 64 levels (brackets, braces,
strings, templates, operators), one of more than 524,288 tokens (words, numbers, punctuation,
lines) or one that is not UTF-8 is refused with its line before it is parsed, as is every HCL file
tfmirror reads (credentials, manifests, pins, a module's ` + "`.tf`" + ` files, each at most 16 MiB). Values
are literal: strings (templates of literals too), numbers within 10^±308, booleans, lists and
objects; arithmetic, conditionals, indexing and ` + "`for`" + ` expressions in a value tfmirror reads are
refused with their line, as Terraform refuses them in a module's ` + "`source` and `version`" + `.

**Writable by its owner only.** A file that users other than its owner may write (its group's or all
users' write bit), or that a user other than root and the one the mirror runs as owns, is refused,
as the admin socket refuses other users: whoever may write it decides what the mirror serves and
trusts (see [SECURITY.md](../SECURITY.md)). Run ` + "`chmod go-w /etc/tfmirror/tfmirror.hcl`" + `, or
` + "`chown root /etc/tfmirror/tfmirror.hcl`" + `. A file owned by root with mode ` + "`0644`" + ` is read by a serve
running as another user. A file on a read-only mount is accepted whatever its mode and owner: a
Kubernetes ConfigMap (mounted read-only, its files links into ` + "`..data`" + `) is read as it is. A
read-only bind mount of a host's file (` + "`docker run -v ...:ro`" + `, a ` + "`hostPath`" + ` volume, systemd's
` + "`ProtectSystem=strict`" + `) is read-only in the mirror's view only: the host file's mode and owner are
yours to keep (see [The files you hand the mirror](operations.md#the-files-you-hand-the-mirror)).

**Reload.** ` + "`tfmirror reload`" + ` (on the serving host or in its container, with the same
` + "`TFMIRROR_DATA_DIR`" + ` or ` + "`--data-dir`" + `; it asks the running serve through the admin socket of its data
directory) reads the file again (and the client tokens file, the files of the keys imports trust, the operator's TLS certificate files and ` + "`origin_ca_file`" + `'s), and so does ` + "`SIGHUP`" + `; the systemd
unit's ` + "`systemctl reload tfmirror`" + ` runs the command. It prints what changed: each setting with its old
and new value, those that wait for a restart, and the policy's rules added and removed (as
` + "`tfmirror config check`" + ` lists them). A file that does not parse or validate is refused whole: the
command exits 1 with the file's line, the configuration in force stays, the log says why and
` + "`tfmirror_config_reloads_total{outcome=\"refused\"}`" + ` counts it (and
` + "`tfmirror_config_last_reload_successful`" + ` is 0 until a reload is applied). A good one puts the new values of the
*reloadable* settings in force from the next request on (and the policy block's); a setting that
cannot change while serving keeps its value, and the command, the log and the status page name it as needing a restart (the page with the file's value beside the value in force).

**` + "`tfmirror config check FILE`" + `** reads a file as serve would (with the ` + "`TFMIRROR_`" + ` variables of its
environment) and prints every error with its line in one run (exit status 1): the file's, those of
the values together (` + "`--log-level`" + `, pairs of settings, a ` + "`listen`" + ` or ` + "`metrics_listen`" + ` that is not
` + "`HOST:PORT`" + ` or ` + "`:PORT`" + ` with a port from 0 to 65535 or a service name, a ` + "`shared_store`" + ` without
` + "`shared_store_id`" + ` whose bucket and prefix are no store ID), the policy block's, and those of the files the settings name, read and
parsed as serve reads them at start (` + "`tls_cert`" + ` and ` + "`tls_key`" + `, ` + "`auth_tokens_file`" + `,
` + "`url_signing_key_file`" + `, ` + "`origin_ca_file`" + `, ` + "`credentials_file`" + `, ` + "`module_source_credentials`" + `, the
keys files: one missing, one others may write, one that does not parse; a ` + "`data_dir`" + ` that is a
file, or to be made under one), and the proxy variables
of its environment as serve judges them at start when ` + "`upstream_proxy`" + ` is not set (an ` + "`HTTPS_PROXY`" + `
serve refuses, with serve's message: see [Outbound proxy and address
policy](operations.md#outbound-proxy-and-address-policy)), and its ` + "`TF_TOKEN_`" + ` variables as serve judges
them at start (one that names no host, or is empty), and with ` + "`shared_store`" + ` the AWS
configuration serve loads for it from its environment (an ` + "`AWS_CA_BUNDLE`" + ` that is not there, an
` + "`AWS_CONFIG_FILE`" + ` or ` + "`AWS_PROFILE`" + ` the AWS SDK refuses, a file of it that is no regular file); or the configuration in
effect: each setting, its value (secrets redacted) and its source, then the rules of the ` + "`policy`" + `
block in the order of evaluation, each with its line (see [Package policy](policy.md)), then the
proxy origin requests go through (` + "`ORIGIN PROXY`" + `: ` + "`upstream_proxy`" + `, else ` + "`HTTPS_PROXY`" + ` and ` + "`NO_PROXY`" + ` of
its environment, by scheme and host, never user or password), with, for each allowed origin, the
proxy or ` + "`direct`" + `, and a warning when ` + "`ALL_PROXY`" + ` or ` + "`HTTP_PROXY`" + ` is set without ` + "`HTTPS_PROXY`" + ` (origin
requests read neither), then what only a running serve finds and it did not check (whether the
addresses can be bound, whether the data directory can be made and written, what serve makes in it (a URL-signing key it would read there, with ` + "`auth_tokens_file`" + ` and no ` + "`url_signing_key_file`" + `, is judged when it is there), ` + "`pins_dir`" + `, the origins,
and whether the shared store's bucket answers to its credentials). ` + "`--skip-files`" + ` checks the file alone, for one written for another machine (a
ConfigMap whose Secrets are mounted beside it there), not this environment's proxy and ` + "`TF_TOKEN_`" + `
variables either, and says so. It judges the file's
owner against the user it runs as: as root it refuses a file the mirror's user owns, which serve
reads; run it as the mirror's user, or make the file root's.

**The other commands.** ` + "`tfmirror sync --config FILE`" + ` reads the settings sync shares with serve
from the file, and its policy block; the commands on a data directory (export, import, export-key,
cache prune, cache verify, policy explain) read the whole file as serve does, as they read serve's ` + "`TFMIRROR_`" + ` variables. Each also
takes ` + "`TFMIRROR_CONFIG`" + `.
`

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

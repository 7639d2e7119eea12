package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// policyHook reads the configuration file's policy block, at start, on
// SIGHUP and in config check; set (nil in config check) puts the policy
// decoded in force once the whole file was accepted. A file without a
// policy block allows everything.
func policyHook(set func(*policy.Policy)) settings.Hook {
	return settings.Hook{Name: settings.PolicyBlock, Validate: func(f *settings.File) (func(), hcl.Diagnostics) {
		p, diags := policy.Decode(f.Policy())
		if diags.HasErrors() {
			return nil, diags
		}
		return func() {
			if set != nil {
				set(p)
			}
		}, diags
	}, Lines: func(f *settings.File) []settings.Line {
		p, err := readPolicy(f) // validated
		if err != nil || f == nil {
			return nil
		}
		var out []settings.Line
		for _, r := range p.Rules() {
			out = append(out, settings.Line{Key: ruleKey(r, f.Path), Text: r})
		}
		return out
	}}
}

// ruleKey is a policy rule as policy.Rules describes it without where it
// is in the file at path: `deny "…" (FILE:LINE): REASON` is
// `deny "…": REASON`, so that a rule that only moved is no change and one
// whose reason changed is.
func ruleKey(rule, path string) string {
	at := " (" + path + ":"
	i := strings.Index(rule, at)
	if i < 0 {
		return rule
	}
	j := i + len(at)
	for j < len(rule) && rule[j] >= '0' && rule[j] <= '9' {
		j++
	}
	if j == i+len(at) || j == len(rule) || rule[j] != ')' {
		return rule
	}
	return rule[:i] + rule[j+1:]
}

// readPolicy is the policy of the configuration file f (nil: none).
func readPolicy(f *settings.File) (*policy.Policy, error) {
	p, diags := policy.Decode(f.Policy())
	if diags.HasErrors() {
		return nil, &settings.FileError{Path: f.Path, Diags: diags}
	}
	return p, nil
}

// noPolicyNote is what a command that judges versions by the package
// policy of its configuration file says when there is none: without
// --config a sync, export or import that opens the data directory itself
// lets through what the serve's policy would refuse.
const noPolicyNote = "no package policy: no configuration file (--config or TFMIRROR_CONFIG), or none with a policy block: everything is allowed"

// filePolicyUnused is what sync, export and import say when they work
// through the tfmirror serving the data directory with a configuration
// file whose policy block they would otherwise apply: the serve judges by
// its own.
const filePolicyUnused = "the package policy of the configuration file (--config or TFMIRROR_CONFIG) is not used: the tfmirror serving the data directory judges by the policy in force there (tfmirror policy explain without --config shows it)"

// setPolicy puts p in force on the engine dd opened, and says so when
// there is none (noPolicyNote); through a running serve, that process's
// policy applies and p is not used: note is then filePolicyUnused when p
// is not nil (the configuration file has a policy block), for the
// command to print.
func (dd *dataDir) setPolicy(p *policy.Policy) (note string) {
	if dd.parts == nil {
		if dd.viaServer && p != nil {
			return filePolicyUnused
		}
		return ""
	}
	if p == nil && dd.logger != nil {
		dd.logger.Warn(noPolicyNote)
	}
	dd.parts.engine.SetPolicy(p)
	return ""
}

// policyRefuses says whether the engine's policy refuses a stored version
// now (retention's Config.Refused); a CLI version as the releases side
// judges it.
func policyRefuses(e *mirror.Engine, rel *releases.Releases) func(kind, address, version string) bool {
	return func(kind, address, version string) bool {
		if kind == releases.Kind {
			return !rel.Inventory().StoredVerdict(e.Policy(), address, version).Allowed
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return !e.Inventory().StoredVerdict(ctx, policy.Kind(kind), address, version).Allowed
	}
}

const policyUsage = "tfmirror policy explain [--config FILE] [--data-dir DIR] [--kind provider|module] ADDRESS [VERSION]"

// runPolicy is `tfmirror policy explain ADDRESS [VERSION]`: it prints
// which rule of the configuration file's policy decides on the address,
// or on one version of it, and why; without a configuration file, that of
// the tfmirror serving the data directory, asked through its admin
// socket, when one answers. The release time, when a minimum
// release age applies, is what the cache knows (read through the serve
// running on the data directory, or on the directory opened sealed);
// nothing is fetched. Exit status 0 when served, 1 when refused or held,
// 2 on a usage or configuration error.
func runPolicy(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintf(stdout, "Usage: %s\n\ntfmirror policy explain -h lists its flags.\n", policyUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "explain" {
		fmt.Fprintf(stderr, "Usage: %s\n", policyUsage)
		return 2
	}
	var asKind string
	e, rest, err := parseCacheCommandConfig("policy explain", args[1:], lookupEnv, usageOutput(args[1:], stdout, stderr), policyUsage, func(fs *flag.FlagSet) {
		fs.StringVar(&asKind, "kind", "", "what ADDRESS names, provider or module (default: a provider of two parts, or of three whose first is a host name with a dot or a port; else a module)")
	})
	if errors.Is(err, settings.ErrHelp) {
		return 0
	}
	var kind policy.Kind
	var addr, version string
	if err == nil && (len(rest) < 1 || len(rest) > 2) {
		err = argumentsError("ADDRESS [VERSION]", rest)
	}
	if err == nil {
		kind, addr, err = policy.ParseAddressAs(policy.Kind(asKind), rest[0])
	}
	if err == nil && asKind == "" && policy.ReadAsModule(rest[0]) {
		host, _, _ := strings.Cut(rest[0], "/")
		fmt.Fprintf(stderr, "tfmirror policy explain: %s read as a module of registry.terraform.io (NAMESPACE/NAME/SYSTEM); --kind provider reads it as a provider of the host %q\n", rest[0], host)
	}
	if err == nil && len(rest) == 2 {
		var v interface{ String() string }
		if kind == policy.Module {
			v, err = addrs.ParseModuleVersion(rest[1])
		} else {
			v, err = addrs.ParseSemver(trimV(rest[1]))
		}
		if err == nil {
			version = v.String()
		}
	}
	var pol *policy.Policy
	if err == nil {
		pol, err = readPolicy(e.File)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror policy explain: %v\nUsage: %s\n", err, policyUsage)
		return 2
	}
	if e.File == nil {
		// Without a file, the policy is that of the serve running on the
		// data directory, when one answers; a data directory that is not
		// there has none, and "allowed by default" would be a mistyped
		// --data-dir's answer, not the serve's.
		if err := noDataDir(e.Config.DataDir, "without --config, policy explain answers by the policy of the tfmirror serving an existing one"); err != nil {
			fmt.Fprintf(stderr, "tfmirror policy explain: %v\n", err)
			return 1
		}
		if code, asked := explainByServer(e.Config.DataDir, kind, addr, version, stdout, stderr); asked {
			return code
		}
	}
	if pol == nil {
		fmt.Fprintf(stderr, "tfmirror policy explain: %s\n", noPolicyNote)
	}
	var rel policy.Release
	from := ""
	sub := pol.For(kind, addr)
	if w := sub.Window(); version != "" && w > 0 {
		if _, final := sub.Undated(version, time.Now()); final {
			// Decided whatever the release time (an address rule, a
			// deny_version, an exemption): the cache is not read.
			from = "not looked up: the verdict needs no release time"
		} else {
			rel, from, err = knownRelease(e.Config, kind, addr, version, w, stderr)
		}
		if err != nil {
			fmt.Fprintf(stderr, "tfmirror policy explain: %v\n", err)
			return 1
		}
	}
	ex := pol.Explain(kind, addr, version, rel, from, time.Now())
	fmt.Fprint(stdout, ex)
	if !ex.Verdict.Allowed {
		return 1
	}
	return 0
}

// explainByServer asks the tfmirror serving dataDir, when one answers on
// its admin socket, to judge the address or version by the policy in
// force there, and prints its answer; asked is false when none answers.
func explainByServer(dataDir string, kind policy.Kind, addr, version string, stdout, stderr io.Writer) (code int, asked bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := admin.Dial(ctx, dataDir)
	if errors.Is(err, admin.ErrNoServer) {
		return 0, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror policy explain: %v\n", err)
		return 1, true
	}
	defer c.Close()
	res, err := c.Explain(ctx, admin.PolicyRequest{Kind: string(kind), Address: addr, Version: version})
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror policy explain: %v\n", err)
		return 1, true
	}
	if res.Rules == 0 {
		fmt.Fprintf(stderr, "tfmirror policy explain: the package policy of the tfmirror serving %s, asked through its admin socket: none, everything is allowed\n", dataDir)
	} else {
		fmt.Fprintf(stderr, "tfmirror policy explain: the package policy of the tfmirror serving %s, asked through its admin socket (%s)\n", dataDir, counted(res.Rules, "rule"))
	}
	ex := res.Explanation(kind, addr, version)
	fmt.Fprint(stdout, ex)
	if !ex.Verdict.Allowed {
		return 1, true
	}
	return 0, true
}

// knownRelease is what the data directory's cache knows of a version's
// release, and where it was read.
func knownRelease(cfg settings.Config, kind policy.Kind, addr, version string, window time.Duration, stderr io.Writer) (policy.Release, string, error) {
	// The answer is the output: the engine's log goes to stderr, and only
	// what needs the operator's eye.
	level := "warn"
	if l, err := settings.ParseLevel(cfg.LogLevel); err == nil && l > slog.LevelWarn {
		level = cfg.LogLevel
	}
	logger, err := newLogger("text", level, stderr)
	if err != nil {
		return policy.Release{}, "", err
	}
	if err := existingDataDir(cfg.DataDir, "policy explain"); err != nil {
		return policy.Release{}, "", err
	}
	fmt.Fprintln(stderr, "tfmirror policy explain: answered from the cache; nothing is fetched")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg.Offline = true
	dd, err := openDataDir(ctx, "policy explain", cfg, logger, overrides{})
	if err != nil {
		return policy.Release{}, "", err
	}
	defer closeDataDir(dd, "policy explain", stderr)
	r, err := dd.ops.Release(ctx, admin.PolicyRequest{Kind: string(kind), Address: addr, Version: version, Window: window})
	if err != nil {
		return policy.Release{}, "", err
	}
	from := "the cache of " + cfg.DataDir
	if dd.viaServer {
		from += ", through the running tfmirror"
	}
	return policy.Release{At: r.At, Known: r.Known, InHouse: r.InHouse}, from, nil
}

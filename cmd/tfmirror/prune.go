package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// ruleSettings are serve's retention rules, which cache prune takes when
// it opens the data directory itself (not --retention-interval: it
// applies them once).
var ruleSettings = []string{"keep-versions", "keep-versions-per-major", "evict-unused-after", "pins-dir"}

const pruneUsage = "tfmirror cache prune [--data-dir DIR] [--dry-run] [--keep-versions N] [--keep-versions-per-major] [--evict-unused-after D] [--pins-dir DIR] [--offline] [HOST/NAMESPACE/TYPE | --module HOST/NAMESPACE/NAME/SYSTEM | --cli PRODUCT VERSION...]"

// runCache is `tfmirror cache SUBCOMMAND`.
func runCache(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "tfmirror cache: want a subcommand: prune or verify\nUsage: %s\n       %s\n", pruneUsage, verifyUsage)
		return 2
	}
	if isHelp(args[0]) {
		fmt.Fprintf(stdout, "Usage: %s\n       %s\n\ntfmirror cache prune -h and tfmirror cache verify -h list their flags.\n", pruneUsage, verifyUsage)
		return 0
	}
	switch args[0] {
	case "prune":
		return runPrune(args[1:], os.LookupEnv, stdout, stderr)
	case "verify":
		return runVerify(args[1:], os.LookupEnv, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "tfmirror cache: unknown subcommand %q (want prune or verify)\n", args[0])
		return 2
	}
}

// runPrune is `tfmirror cache prune`: it lists (--dry-run) or removes
// what the retention rules would remove now, or the versions named. When
// a tfmirror serve runs on the data directory, that process prunes, by
// its own rules and pins (rule flags given here are then an error);
// otherwise this one opens the data directory and applies the rules
// given here.
func runPrune(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	var (
		dryRun, offline bool
		module, cli     string
		own             settings.Config // the retention rules, as serve takes them
		pfs             *flag.FlagSet
	)
	cfg, rest, err := parseCacheCommandFlags("cache prune", args, lookupEnv, usageOutput(args, stdout, stderr), pruneUsage, func(fs *flag.FlagSet) {
		pfs = fs
		settings.BoolVar(fs, &dryRun, "dry-run", "list what would be removed, with sizes, and remove nothing")
		fs.StringVar(&module, "module", "", "the registry module (HOST/NAMESPACE/NAME/SYSTEM) whose VERSIONs to remove")
		fs.StringVar(&cli, "cli", "", "the CLI release product (terraform, tofu, ...) whose VERSIONs to remove")
		settings.BoolVar(fs, &offline, "offline", "the data directory is a sealed mirror's (serve --offline): nothing can be fetched again, so the rules remove nothing (only named versions)")
		settings.Add(fs, &own, ruleSettings...)
	})
	if errors.Is(err, settings.ErrHelp) {
		return 0
	}
	// The rules and pins as serve takes them: a flag given here, else
	// the TFMIRROR_ variable, else the configuration file (cfg has
	// those two, and the defaults).
	ruleFlags := settings.TakeGiven(pfs, own, &cfg, ruleSettings...)
	var req admin.PruneRequest
	req.DryRun = dryRun
	if err == nil {
		err = cfg.RetentionConfig.Validate()
	}
	if err == nil {
		switch {
		case module != "" && cli != "":
			err = errors.New("--module and --cli name two things: name one")
		case cli != "":
			req.CLI, req.Versions = cli, rest
			if len(rest) == 0 {
				err = errors.New("--cli needs the VERSIONs to remove")
			}
		case module != "":
			var m addrs.Module
			if m, err = addrs.ParseModule(module); err == nil {
				req.Module, req.Versions = m.String(), rest
			}
			if err == nil && len(rest) == 0 {
				err = errors.New("--module needs the VERSIONs to remove")
			}
		case len(rest) > 0:
			var p addrs.Provider
			if p, err = addrs.ParseProvider(rest[0]); err == nil {
				req.Provider, req.Versions = p.String(), rest[1:]
			}
			if err == nil && len(req.Versions) == 0 {
				err = fmt.Errorf("name the versions of %s to remove", rest[0])
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror cache prune: %v\nUsage: %s\n", err, pruneUsage)
		return 2
	}
	if flagGiven(pfs, "offline") {
		// Else TFMIRROR_OFFLINE, or the configuration file's, as serve
		// takes it.
		cfg.Offline = offline
		ruleFlags = append(ruleFlags, "--offline")
	}

	logger, err := newLogger("text", cfg.LogLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror cache prune: %v\n", err)
		return 2
	}
	// A data directory that is not there (a mistyped --data-dir, the
	// default of another working directory) has nothing to prune: made
	// here, it would hide that the cache meant was never pruned.
	if err := noCacheIn(cfg.DataDir, "cache prune prunes the cache of an existing one, it never makes one"); err != nil {
		fmt.Fprintf(stderr, "tfmirror cache prune: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dd, err := openDataDir(ctx, "cache prune", cfg, logger, overrides{evictNothing: dryRun, listEvictions: true})
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror cache prune: %v\n", err)
		return 1
	}
	defer closeDataDir(dd, "cache prune", stderr)
	fmt.Fprintf(stderr, "tfmirror cache prune: %s (%s)\n", dd.where(), cfg.DataDir)
	if dd.viaServer && len(ruleFlags) > 0 {
		fmt.Fprintf(stderr, "tfmirror cache prune: %s given, but the tfmirror serving this data directory prunes by its own rules and pins: give them to tfmirror serve\n", strings.Join(ruleFlags, ", "))
		return 2
	}
	if dd.viaServer {
		warnEnvIgnored(stderr, lookupEnv, "cache prune", "prunes", append(slices.Clone(ruleSettings), "offline")...)
	}
	res, err := dd.ops.Prune(ctx, req)
	// What a failed prune did, when it says (a prune that failed part
	// way, here); a call whose answer was lost says nothing, and no total
	// of none is printed for it.
	if err == nil || len(res.Removals) > 0 {
		printPruned(stdout, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror cache prune: %v\n", err)
		return 1
	}
	return 0
}

// printPruned writes one line per removal and a total.
func printPruned(w io.Writer, res admin.Pruned) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range res.Removals {
		var notes []string
		if r.Unlisted {
			notes = append(notes, "unlisted")
		}
		if r.Withheld {
			notes = append(notes, "with the withheld import set aside in it")
		}
		note := strings.Join(notes, ", ")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d archives\t%s\t%s\n", r.Rule, r.Kind, r.Address, r.Version, len(r.Archives), humanize.IBytes(uint64(r.Bytes)), note)
	}
	tw.Flush()
	verb := "removed"
	if res.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(w, "%s the packages of %d versions, %s (%d bytes)\n", verb, res.Versions, humanize.IBytes(uint64(res.Bytes)), res.Bytes)
}

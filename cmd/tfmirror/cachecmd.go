package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// parseCacheCommandFlags parses the flags a subcommand on the data
// directory shares with serve (--data-dir, and the settings every such
// command takes: --log-level and the shared store's; each also from its
// TFMIRROR_ variable) besides its own, added by own, and returns the
// serve configuration: those flags, then serve's TFMIRROR_ variables and
// its --config file (TFMIRROR_CONFIG), as serve reads them, then serve's
// defaults.
func parseCacheCommandFlags(name string, args []string, lookupEnv func(string) (string, bool), out io.Writer, usage string, own func(*flag.FlagSet)) (settings.Config, []string, error) {
	e, rest, err := parseCacheCommandConfig(name, args, lookupEnv, out, usage, own)
	if err != nil {
		return settings.Config{}, nil, err
	}
	return e.Config, rest, nil
}

// parseCacheCommandConfig is parseCacheCommandFlags with the
// configuration file read (its policy block).
func parseCacheCommandConfig(name string, args []string, lookupEnv func(string) (string, bool), out io.Writer, usage string, own func(*flag.FlagSet)) (*settings.Effective, []string, error) {
	fs := flag.NewFlagSet("tfmirror "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	// --data-dir is theirs: its help speaks of the cache only.
	fs.String("data-dir", "./tfmirror-data", "directory of the cache (as for serve)")
	// The settings every command on a data directory takes as serve
	// defines them (the shared store's: when they open the data directory
	// themselves, they use the bucket as a replica does; and the log
	// level); given ones are handed to serve's parser, which checks them.
	var mine settings.Config
	passed := []string{"data-dir"}
	for _, s := range settings.Table {
		if s.Commands&settings.OnDataDir == settings.OnDataDir && s.Commands&settings.CommandNamed(name) != 0 {
			s.Register(fs, &mine)
			passed = append(passed, s.Name)
		}
	}
	// The configuration file serve reads, read as serve reads it.
	var configPath string
	settings.AddConfigFlag(fs, &configPath)
	passed = append(passed, settings.ConfigFlag)
	// A command's log is for its operator: only trouble.
	if logLevel := fs.Lookup("log-level"); logLevel != nil {
		logLevel.DefValue = "warn"
		logLevel.Value.Set("warn")
	}
	own(fs)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: %s\n\nFlags:\n", usage)
		settings.PrintDefaults(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, settings.ErrHelp
		}
		return nil, nil, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var serveArgs []string
	for _, n := range passed {
		if given[n] {
			serveArgs = append(serveArgs, "--"+n, fs.Lookup(n).Value.String())
		}
	}
	e, err := parseServeConfig(serveArgs, lookupEnv, io.Discard)
	if err != nil {
		return nil, nil, err
	}
	if e.Sources["log-level"] == settings.FromDefault {
		e.Config.LogLevel = mine.LogLevel
	}
	return e, fs.Args(), nil
}

// airGapResult is what runSealed reports of an export, import or check.
type airGapResult struct {
	// summary is one line for stdout; none ("") when the command failed
	// before it did anything, since a summary of nothing done ("exported
	// 0 packages ..., 0 failed") would read as a success.
	summary  string
	failures []string // one line each for stderr
	failed   int
}

// runSealed runs op, an export, import or check, on the data directory,
// with pol the package policy of an engine it opens itself: through
// the tfmirror serve holding it, or else on an engine this process opens
// sealed (a command on its own never contacts an origin). viaServer, when
// not nil, is told when it goes through a serve, and an error from it
// stops the command (exit status 2) before op runs. It reports op's
// failures on stderr and its summary, when it has one, on stdout, and
// returns the exit status: 1 when anything failed. What it prints of
// op's failures and error is shownLines: control characters as escapes,
// line breaks kept.
func runSealed(name string, cfg settings.Config, pol *policy.Policy, stdout, stderr io.Writer, viaServer func() error, op func(context.Context, engineOps) (airGapResult, error)) int {
	logger, err := newLogger("text", cfg.LogLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror %s: %v\n", name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg.Offline = true
	dd, err := openDataDir(ctx, name, cfg, logger, overrides{})
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror %s: %v\n", name, err)
		return 1
	}
	defer closeDataDir(dd, name, stderr)
	note := dd.setPolicy(pol)
	fmt.Fprintf(stderr, "tfmirror %s: %s (%s)\n", name, dd.where(), cfg.DataDir)
	if note != "" {
		fmt.Fprintf(stderr, "tfmirror %s: %s\n", name, note)
	}
	if dd.viaServer && viaServer != nil {
		if err := viaServer(); err != nil {
			fmt.Fprintf(stderr, "tfmirror %s: %v\n", name, err)
			return 2
		}
	}

	// Failures name what the input holds (an import's directory is a
	// stranger's): shown line by line, so that no control character of
	// a name reaches the terminal, and an error of several lines (a
	// version's failures joined) keeps them.
	res, err := op(ctx, dd.ops)
	for _, line := range res.failures {
		fmt.Fprintf(stderr, "tfmirror %s: %s\n", name, shownLines(line))
	}
	if res.summary != "" {
		fmt.Fprintln(stdout, res.summary)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror %s: %s\n", name, shownLines(err.Error()))
		return 1
	}
	if res.failed > 0 {
		return 1
	}
	return 0
}

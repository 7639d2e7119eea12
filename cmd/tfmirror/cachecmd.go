package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// parseCacheCommandFlags parses the flags a subcommand on the data
// directory shares with serve (--data-dir, --log-level, --log-format;
// each also from its TFMIRROR_ variable) besides its own, added by own,
// and returns the serve configuration with serve's defaults for the rest.
func parseCacheCommandFlags(name string, args []string, lookupEnv func(string) (string, bool), out io.Writer, usage string, own func(*flag.FlagSet)) (serveConfig, []string, error) {
	fs := flag.NewFlagSet("tfmirror "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	dataDir := fs.String("data-dir", "./tfmirror-data", "directory of the cache (as for serve)")
	logLevel := fs.String("log-level", "warn", "log level: debug, info, warn or error")
	own(fs)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return serveConfig{}, nil, errHelp
		}
		return serveConfig{}, nil, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var serveArgs []string
	for _, f := range []struct{ name, value string }{{"data-dir", *dataDir}, {"log-level", *logLevel}} {
		if given[f.name] {
			serveArgs = append(serveArgs, "--"+f.name, f.value)
		}
	}
	cfg, err := parseServeFlags(serveArgs, lookupEnv, io.Discard)
	if err != nil {
		return serveConfig{}, nil, err
	}
	if !given["log-level"] {
		if _, ok := lookupEnv(envName("log-level")); !ok {
			cfg.LogLevel = *logLevel
		}
	}
	return cfg, fs.Args(), nil
}

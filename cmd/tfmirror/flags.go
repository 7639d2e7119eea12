package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/tfmirror/tfmirror/cmd/tfmirror/internal/settings"
)

// parseServeFlags parses args, then fills every flag not given on the
// command line from its TFMIRROR_* environment variable. Every flag is a
// setting of the table settings.
func parseServeFlags(args []string, lookupEnv func(string) (string, bool), out io.Writer) (settings.Config, error) {
	var c settings.Config
	fs := flag.NewFlagSet("tfmirror serve", flag.ContinueOnError)
	fs.SetOutput(out)
	for _, s := range settings.Table {
		s.Register(fs, &c)
	}
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: tfmirror serve [flags]\n\nEvery flag may also be set by an environment variable, e.g. --data-dir by %s.\n\nFlags:\n", settings.EnvName("data-dir"))
		fs.PrintDefaults()
	}

	if err := settings.ParseWithEnv(fs, args, lookupEnv); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return c, c.Validate()
}

// addEngineFlags registers on fs, bound to c, the settings of every
// command that opens the engine on a data directory (serve, sync): the
// data directory, the cache limits, the origin settings and logging.
func addEngineFlags(fs *flag.FlagSet, c *settings.Config) {
	settings.AddTakenBy(fs, c, settings.Sync)
}

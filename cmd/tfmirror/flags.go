package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// parseServeFlags is parseServeConfig's configuration.
func parseServeFlags(args []string, lookupEnv func(string) (string, bool), out io.Writer) (settings.Config, error) {
	e, err := parseServeConfig(args, lookupEnv, out)
	if err != nil {
		return settings.Config{}, err
	}
	return e.Config, nil
}

// parseServeConfig parses args, then fills every flag not given on the
// command line from its TFMIRROR_* environment variable, then from the
// configuration file --config (or TFMIRROR_CONFIG) names, and checks the
// values. Every flag but --config is a setting of the table settings.
func parseServeConfig(args []string, lookupEnv func(string) (string, bool), out io.Writer) (*settings.Effective, error) {
	var e settings.Effective
	fs := serveFlags(&e, out)
	l, err := settings.Load(fs, args, lookupEnv, settings.AllNames())
	if err != nil {
		return nil, err
	}
	e.Loaded = l
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return &e, l.Locate(e.Config.Validate())
}

// reloadServeConfig is what a reload of serve reads: the configuration
// as parseServeConfig reads it at start, with the files it names that
// only a start reads (a TLS certificate, keys, credentials, CA files)
// read as serve reads them then (checkNamedFiles, as config check reads
// them). The settings naming them need a restart (but origin_ca_file,
// whose files the reload reads again itself), so a reload puts none in
// force; but a file named that is missing or refused would fail that
// restart, so the reload is refused now, saying which, with the
// configuration in force kept, rather than the change said to be kept
// for a restart that cannot start. The client tokens and trusted keys
// files serve started with (start's) are read again by the reload itself
// (its parts), which reports their errors; others named in their place
// are checked here, as they wait for the restart, and so is the AWS
// configuration a start loads for a shared_store (checkNamedFiles'
// checkSharedAWS: an AWS_CA_BUNDLE that is not there, an AWS config file
// or AWS_PROFILE the SDK refuses). So are the proxy
// variables of lookupEnv when the file sets no upstream proxy, which a
// start then reads (originProxy), as config check judges them.
func reloadServeConfig(args []string, lookupEnv func(string) (string, bool), start settings.Config) func() (*settings.Effective, error) {
	return func() (*settings.Effective, error) {
		e, err := parseServeConfig(args, lookupEnv, io.Discard)
		if err != nil {
			return nil, err
		}
		startOnly := e.Config
		if startOnly.AuthTokensFile == start.AuthTokensFile {
			startOnly.AuthTokensFile = ""
		}
		if slices.Equal(startOnly.TrustedExportKeys, start.TrustedExportKeys) {
			startOnly.TrustedExportKeys = nil
		}
		if slices.Equal(startOnly.TrustedPublisherKeys, start.TrustedPublisherKeys) {
			startOnly.TrustedPublisherKeys = nil
		}
		if err := checkNamedFiles(startOnly, lookupEnv); err != nil {
			return nil, fmt.Errorf("a restart would refuse a file it names: %w", e.Locate(err))
		}
		// With the tokens file unchanged, checkNamedFiles did not judge
		// the URL-signing key a restart reads in the data directory (one
		// --url-signing-key-file dropped leaves it to be read there).
		if startOnly.AuthTokensFile == "" {
			if err := checkDataDirKey(e.Config); err != nil {
				return nil, fmt.Errorf("a restart would refuse a file it reads: %w", e.Locate(fmt.Errorf("--data-dir: %w", err)))
			}
		}
		// Without upstream_proxy a start reads the proxy variables of
		// this environment (originProxy), which a start with it did
		// not: a file that drops it is refused where they would be.
		if e.Config.UpstreamProxy == "" {
			if _, err := originProxy("", lookupEnv); err != nil {
				return nil, fmt.Errorf("a restart would refuse the proxy variables of this environment, which it reads without --upstream-proxy: %w", err)
			}
		}
		return e, nil
	}
}

// checkServeConfig is parseServeConfig for config check: every error of
// the file, its values' (Config.Validate, as serve and a reload check
// them), those of the files it names (checkNamedFiles, when files) and
// those of hooks (the policy block) at once (settings.Check). values,
// when not nil, is given the configuration read when files (and the
// file was read far enough for its values to be judged).
func checkServeConfig(args []string, lookupEnv func(string) (string, bool), hooks []settings.Hook, files bool, values func(settings.Config)) (*settings.Effective, error) {
	var e settings.Effective
	fs := serveFlags(&e, io.Discard)
	validate := func() error {
		err := e.Config.Validate()
		if !files {
			return err
		}
		if values != nil {
			values(e.Config)
		}
		return errors.Join(err, checkNamedFiles(e.Config, lookupEnv))
	}
	l, err := settings.Check(fs, args, lookupEnv, settings.AllNames(), validate, hooks)
	if err != nil {
		return nil, err
	}
	e.Loaded = l
	return &e, nil
}

// serveFlags is serve's flag set, bound to e's configuration.
func serveFlags(e *settings.Effective, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("tfmirror serve", flag.ContinueOnError)
	fs.SetOutput(out)
	for _, s := range settings.Table {
		s.Register(fs, &e.Config)
	}
	var path string
	settings.AddConfigFlag(fs, &path)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: tfmirror serve [flags]\n\nEvery flag may also be set by an environment variable, e.g. --data-dir by %s, and by an attribute of the --config file, e.g. data_dir.\n\nFlags:\n", settings.EnvName("data-dir"))
		settings.PrintDefaults(fs)
	}
	return fs
}

// addEngineFlags registers on fs, bound to c, the settings of every
// command that opens the engine on a data directory (serve, sync): the
// data directory, the cache limits, the origin settings and logging, and
// --config; it returns their names.
func addEngineFlags(fs *flag.FlagSet, c *settings.Config, path *string) []string {
	settings.AddConfigFlag(fs, path)
	return settings.AddTakenBy(fs, c, settings.Sync)
}

// argumentsError says that a command got other positional arguments than
// it takes (want, as its usage names them: "one OUT ..."). Flags go
// before them, as Go's flag parsing stops at the first one: a flag among
// them is named, with where to put it, rather than counted.
func argumentsError(want string, rest []string) error {
	for _, a := range rest {
		if len(a) > 1 && strings.HasPrefix(a, "-") {
			return fmt.Errorf("want %s, got %d arguments: %q is read as an argument, as everything after the first one is; give flags before the arguments", want, len(rest), a)
		}
	}
	return fmt.Errorf("want %s, got %d arguments", want, len(rest))
}

// usageOutput is where a command's flag set writes: stdout when its
// command line asks for the usage (-h or --help), as the usage of
// tfmirror and of its command groups goes there, so that it can be paged
// or searched; otherwise stderr, where a flag that does not parse is
// said, with the usage after it.
func usageOutput(args []string, stdout, stderr io.Writer) io.Writer {
	for _, a := range args {
		switch a {
		case "--":
			return stderr
		case "-h", "-help", "--h", "--help":
			return stdout
		}
	}
	return stderr
}

// warnEnvIgnored says on stderr which of the TFMIRROR_ variables of the
// settings names are set, and so ignored, by command working through the
// serve holding its data directory, which works with its own settings:
// the serve's own variables, where the command runs in its environment
// (kubectl exec), or the operator's, meant for a command on its own.
func warnEnvIgnored(stderr io.Writer, lookupEnv func(string) (string, bool), command, does string, names ...string) {
	for _, name := range names {
		if v, ok := lookupEnv(settings.EnvName(name)); ok && v != "" { // empty is unset
			fmt.Fprintf(stderr, "tfmirror %s: %s is ignored: the tfmirror serving this data directory %s with its own settings\n", command, settings.EnvName(name), does)
		}
	}
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

const reloadUsage = "tfmirror reload [--data-dir DIR] [--config FILE]"

// runReload is `tfmirror reload`: it asks the tfmirror serving the data
// directory, through its admin socket, to read its configuration file
// (client tokens file and trusted keys files) again, as SIGHUP does, and
// prints what changed: the settings (and those that wait for a restart)
// and the policy's rules added and removed. It needs no shell tools in the serving process's
// image (kubectl exec … -- tfmirror reload) and is the systemd unit's
// ExecReload. Exit status 0 when the files were read and put in force, 1
// when one was refused (what it configures stays as it was; the reason is
// printed, and whether the configuration file was put in force) or no
// tfmirror serves the directory, 2 on a usage error.
func runReload(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	dataDir, configPath, err := reloadDataDir(args, lookupEnv, stdout, stderr)
	if errors.Is(err, settings.ErrHelp) {
		return 0
	}
	var usageErr usageError
	if errors.As(err, &usageErr) {
		fmt.Fprintf(stderr, "tfmirror reload: %v\nUsage: %s\n", err, reloadUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror reload: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := admin.Dial(ctx, dataDir)
	if errors.Is(err, admin.ErrNoServer) && err != admin.ErrNoServer {
		// Why none can serve there (a socket path too long): a serve
		// on it runs without its admin socket.
		fmt.Fprintf(stderr, "tfmirror reload: %v; a tfmirror serving it has no admin socket: send it SIGHUP\n", err)
		return 1
	}
	if errors.Is(err, admin.ErrNoServer) {
		fmt.Fprintf(stderr, "tfmirror reload: no tfmirror serves the data directory %s (nothing listens on %s); name the serving process's with --data-dir or TFMIRROR_DATA_DIR\n",
			dataDir, admin.SocketPath(dataDir))
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror reload: %v\n", err)
		return 1
	}
	defer c.Close()
	res, err := c.Reload(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror reload: %v\n", err)
		return 1
	}
	printReloaded(stdout, res)
	warnOtherConfig(stderr, configPath, res.File)
	return 0
}

// warnOtherConfig says that --config named, for the data directory, a
// file other than the one the serve read again (its own, given to serve):
// a reload never puts another file in force, and an operator who meant
// to would take the serve's own file reloaded for it.
func warnOtherConfig(stderr io.Writer, configPath, served string) {
	if configPath == "" {
		return
	}
	named, err := filepath.Abs(configPath)
	if err != nil || named == served {
		return
	}
	if a, err := filepath.EvalSymlinks(named); err == nil {
		if b, err := filepath.EvalSymlinks(served); err == nil && a == b {
			return
		}
	}
	if served == "" {
		fmt.Fprintf(stderr, "tfmirror reload: warning: the tfmirror serving this data directory runs without a configuration file; --config %s named only its data directory, and is not put in force (give it to tfmirror serve)\n", configPath)
		return
	}
	fmt.Fprintf(stderr, "tfmirror reload: warning: the tfmirror serving this data directory reads its own configuration file %s again; --config %s named only its data directory, and is not put in force (give it to tfmirror serve, and restart it)\n", served, configPath)
}

// usageError is a command line that does not parse.
type usageError struct{ error }

// reloadDataDir is the data directory of the serve to reload: --data-dir,
// else TFMIRROR_DATA_DIR, else the data_dir of the configuration file
// (--config or TFMIRROR_CONFIG), else serve's default. The file is read
// only when neither names it: a broken file is for the serving process to
// refuse, with its reason, not a reason to leave it alone.
func reloadDataDir(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) (dataDir, configPath string, err error) {
	fs := flag.NewFlagSet("tfmirror reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDirFlag := fs.String("data-dir", "", "data directory of the running tfmirror serve (default: TFMIRROR_DATA_DIR, else the configuration file's data_dir, else ./tfmirror-data)")
	// Not settings.AddConfigFlag: this file is read for its data_dir
	// alone, never put in force (the serve reads its own file again).
	fs.StringVar(&configPath, settings.ConfigFlag, "", "configuration file whose data_dir names the data directory, when --data-dir and TFMIRROR_DATA_DIR do not (default TFMIRROR_CONFIG); the serve reads its own configuration file again, whatever this names")
	// The usage goes where usageOutput says, as every command's; the
	// flag package's error line about a flag that does not parse stays
	// on stderr.
	out := usageOutput(args, stdout, stderr)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: %s\n\nAsks the tfmirror serving the data directory, through its admin socket, to read\nits configuration file (client tokens file, trusted keys files) again, as SIGHUP\ndoes, and prints what changed. Exit status 1 when a file is refused: what it configures stays\nas it was, and the error says what the other files put in force.\n\nFlags:\n", reloadUsage)
		fs.SetOutput(out)
		settings.PrintDefaults(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", "", settings.ErrHelp
		}
		return "", "", usageError{err}
	}
	if fs.NArg() > 0 {
		return "", "", usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if *dataDirFlag != "" {
		return *dataDirFlag, configPath, nil
	}
	if v, ok := lookupEnv("TFMIRROR_DATA_DIR"); ok && v != "" {
		return v, configPath, nil
	}
	var serveArgs []string
	if configPath != "" {
		serveArgs = append(serveArgs, "--"+settings.ConfigFlag, configPath)
	}
	e, err := parseServeConfig(serveArgs, lookupEnv, io.Discard)
	if err != nil {
		return "", "", fmt.Errorf("the data directory is named by the configuration file, which does not read: %w", err)
	}
	return e.Config.DataDir, configPath, nil
}

// printReloaded writes what a reload put in force, for an operator.
func printReloaded(w io.Writer, res admin.Reloaded) {
	if res.File != "" {
		fmt.Fprintf(w, "%s: reloaded\n", res.File)
	} else {
		fmt.Fprintln(w, "reloaded (no configuration file)")
	}
	changed := false
	for _, s := range res.Settings {
		if s.Restart {
			fmt.Fprintf(w, "  %s: %s -> %s (takes effect after a restart; %s stays in force)\n", s.Attribute, shownValue(s.Old), shownValue(s.New), shownValue(s.Old))
			continue
		}
		changed = true
		fmt.Fprintf(w, "  %s: %s -> %s\n", s.Attribute, shownValue(s.Old), shownValue(s.New))
	}
	for _, p := range res.Parts {
		changed = true
		fmt.Fprintf(w, "  %s: %s added, %s removed\n", p.Name, counted(len(p.Added), "rule"), counted(len(p.Removed), "rule"))
		for _, r := range p.Removed {
			fmt.Fprintf(w, "    - %s\n", r)
		}
		for _, r := range p.Added {
			fmt.Fprintf(w, "    + %s\n", r)
		}
	}
	if !changed && res.File != "" {
		fmt.Fprintln(w, "  nothing changed in force")
	}
	for _, warning := range res.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	if res.Tokens != nil {
		fmt.Fprintf(w, "client tokens: %d in force\n", *res.Tokens)
	}
	if res.TrustedKeys != nil {
		fmt.Fprintf(w, "keys imports trust: %d in force\n", *res.TrustedKeys)
	}
	switch {
	case res.Certificate != nil && res.CertificateNew:
		fmt.Fprintf(w, "TLS certificate: a new one in force, expires %s\n", res.Certificate.UTC().Format(time.RFC3339))
	case res.Certificate != nil:
		fmt.Fprintf(w, "TLS certificate: unchanged, expires %s\n", res.Certificate.UTC().Format(time.RFC3339))
	}
	switch {
	case res.OriginCAs != nil && res.OriginCAsNew:
		fmt.Fprintf(w, "origin CAs: new ones in force, %s\n", strings.Join(res.OriginCAs, "; "))
	case res.OriginCAs != nil:
		fmt.Fprintf(w, "origin CAs: unchanged, %s in force\n", counted(len(res.OriginCAs), "CA"))
	}
}

// shownValue quotes a setting's value, so that an empty one shows.
func shownValue(v string) string { return strconv.Quote(v) }

// Command tfmirror runs the tfmirror provider network mirror.
//
//	tfmirror serve [flags]   run the mirror
//	tfmirror sync [flags] PATH...   fill the cache from manifests, lock files or configuration directories
//	tfmirror export OUT      write the cache as a static mirror directory or tar file
//	tfmirror import IN       load such an export into the cache
//	tfmirror export-key      print the public key that signs exports
//	tfmirror cache prune     list or apply the retention rules, or remove named versions
//	tfmirror cache verify    check every cached package against its stored evidence or sha256
//	tfmirror config check FILE   check a configuration file and print the configuration in effect
//	tfmirror policy explain ADDRESS [VERSION]   say which rule of the package policy decides, and why
//	tfmirror reload          make the running serve read its configuration file again
//	tfmirror version         print the version
//
// Every flag of serve can also be set with an environment variable named
// TFMIRROR_ followed by the flag name in upper snake case (--data-dir is
// TFMIRROR_DATA_DIR), and so can those of sync; and by an attribute of
// the configuration file that --config (or TFMIRROR_CONFIG) names, named
// as the flag in snake case (data_dir). A flag given on the command line
// wins, then the environment, then the file. The settings, their flags,
// variables, attributes and checks are one table, in internal/settings;
// this package parses, wires and runs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		e, err := parseServeConfig(args[1:], os.LookupEnv, usageOutput(args[1:], stdout, stderr))
		if errors.Is(err, settings.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(stderr, "tfmirror serve: %v\n", err)
			return 2
		}
		keepHangups()
		ctx, hurry, stop := stopSignals()
		defer stop()
		if err := serve(ctx, hurry, e, reloadServeConfig(args[1:], os.LookupEnv, e.Config), stderr); err != nil {
			fmt.Fprintf(stderr, "tfmirror: %v\n", err)
			return 1
		}
		return 0
	case "sync":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runSync(ctx, args[1:], os.LookupEnv, stdout, stderr, overrides{})
	case "export":
		return runExport(args[1:], stdout, stderr)
	case "import":
		return runImport(args[1:], stdout, stderr)
	case "export-key":
		return runExportKey(args[1:], stdout, stderr)
	case "cache":
		return runCache(args[1:], stdout, stderr)
	case "config":
		return runConfig(args[1:], os.LookupEnv, stdout, stderr)
	case "policy":
		return runPolicy(args[1:], os.LookupEnv, stdout, stderr)
	case "reload":
		return runReload(args[1:], os.LookupEnv, stdout, stderr)
	case "version", "--version", "-version":
		if len(args) == 2 && (args[1] == "-h" || args[1] == "--help" || args[1] == "-help") {
			fmt.Fprintln(stdout, "Usage: tfmirror version\n\nPrints the version, the commit and the Go version tfmirror was built with, and its platform.")
			return 0
		}
		if len(args) > 1 {
			// A flag or argument it does not take (a script's typo) is
			// said, not passed over.
			fmt.Fprintf(stderr, "tfmirror version takes no flags or arguments, got %q\n", args[1:])
			return 2
		}
		fmt.Fprintln(stdout, thisBuild().Line())
		return 0
	case "help", "-h", "--help", "-help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "tfmirror: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

// keepHangups catches SIGHUP for the rest of the process, beyond the
// time serve reloads on it: one that comes as serve stops (a
// configuration manager's reload during a rollout) is dropped, where the
// signal's default would end the process before the shutdown's last log
// lines are written. It returns the channel it is caught on (buffered;
// nothing need read it).
func keepHangups() <-chan os.Signal {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}

// stopSignals is how serve is stopped: the first SIGINT or SIGTERM ends
// ctx (the graceful shutdown), the second closes hurry (the shutdown
// waits no longer) and gives the signals their default back, so that a
// third ends the process at once should the shutdown not end (a cache
// whose disk hangs), as kill -9 would. stop lets go of the signals.
func stopSignals() (ctx context.Context, hurry <-chan struct{}, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan struct{})
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for _, step := range []func(){cancel, func() { signal.Stop(sigs); close(second) }} {
			select {
			case <-sigs:
				step()
			case <-quit:
				return
			}
		}
	}()
	return ctx, second, func() {
		signal.Stop(sigs)
		close(quit)
		<-done
		cancel()
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `tfmirror: a caching pull-through network mirror for Terraform and OpenTofu providers

Usage:
  tfmirror serve [flags]   run the mirror (tfmirror serve -h lists the flags)
  tfmirror sync [flags] PATH...
                           fill the cache from sync manifests, lock files or
                           Terraform configuration directories (tfmirror sync -h)
  tfmirror export [flags] OUT
                           write the cache as a static mirror (directory, or
                           .tar/.tar.gz/.tgz), or as OCI image layouts
                           (--format oci-layout; tfmirror export -h)
  tfmirror import [flags] IN
                           load an export (directory or tar file) into the cache
  tfmirror export-key [flags]
                           print the public key that signs this mirror's exports
  tfmirror cache prune [flags] [HOST/NAMESPACE/TYPE VERSION...]
                           list (--dry-run) or remove what the retention rules
                           would remove now, or the versions named
  tfmirror cache verify [flags]
                           check every cached package against its stored evidence
                           or sha256, asking no origin; exit 1 when any is damaged
  tfmirror config check FILE
                           check a configuration file (serve --config FILE) and
                           print the configuration in effect
  tfmirror policy explain [--config FILE] ADDRESS [VERSION]
                           say which rule of the package policy decides on a
                           provider or module (or one version of it), and why
  tfmirror reload [--data-dir DIR] [--config FILE]
                           make the tfmirror serving DIR read its configuration
                           file (client tokens and trusted keys files) again,
                           as SIGHUP does, and print what changed
  tfmirror version         print the version
`)
}

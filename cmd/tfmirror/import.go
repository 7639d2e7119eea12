package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/policy"
)

const importUsage = "tfmirror import [--data-dir DIR] [--trusted-export-keys FILE,...] [--trusted-publisher-keys HOST/NAMESPACE=FILE,...] [--allow-unsigned [--allow-unsigned-hosts HOST,...]] [--releases-hashicorp-keys FILE] [--releases-opentofu-keys FILE] IN"

// trustFlags are the flags of what an import trusts: keys, and the
// origin hosts that take versions without signature. Through a running
// serve, the serve's apply.
var trustFlags = []string{"trusted-export-keys", "trusted-publisher-keys", "allow-unsigned-hosts"}

// runImport is `tfmirror import`. When a tfmirror serve runs on the data
// directory, that process does the import (and reads IN) with the keys
// it trusts, and trust flags given here are an error; otherwise this one
// opens the cache, sealed, and trusts the keys its flags name.
func runImport(args []string, stdout, stderr io.Writer) int {
	var (
		allowUnsigned bool
		own           settings.Config // the trust flags, as serve takes them
		ifs           *flag.FlagSet
	)
	e, rest, err := parseCacheCommandConfig("import", args, os.LookupEnv, usageOutput(args, stdout, stderr), importUsage, func(fs *flag.FlagSet) {
		ifs = fs
		settings.BoolVar(fs, &allowUnsigned, "allow-unsigned", "also import packages without signature from a directory without manifest (one terraform providers mirror wrote, of in-house builds): checked against the h1: hashes of VERSION.json where present and recorded as imported without signature")
		settings.Add(fs, &own, trustFlags...)
		settings.Add(fs, &own, releasesFlags...)
	})
	if errors.Is(err, settings.ErrHelp) {
		return 0
	}
	var given []string
	var cfg settings.Config
	var pol *policy.Policy
	if err == nil {
		cfg = e.Config
		// What the policy holds back is stored, and listed as held.
		pol, err = readPolicy(e.File)
	}
	if err == nil {
		given = settings.TakeGiven(ifs, own, &cfg, slices.Concat(trustFlags, releasesFlags)...)
		if len(given) > 0 {
			err = cfg.Validate()
		}
	}
	if err == nil && len(rest) != 1 {
		err = argumentsError("one IN (a directory, or a tar file)", rest)
	}
	req := admin.ImportRequest{AllowUnsigned: allowUnsigned}
	if err == nil {
		req.Shown = rest[0]
		req.In, err = filepath.Abs(rest[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror import: %v\nUsage: %s\n", err, importUsage)
		return 2
	}
	if _, err := os.Stat(req.In); err != nil {
		fmt.Fprintf(stderr, "tfmirror import: %v\n", err)
		return 1
	}
	// A file that is no tar file is refused before the data directory
	// is made or opened.
	if err := airgap.CheckTar(req.In); err != nil {
		fmt.Fprintf(stderr, "tfmirror import: %s refused: %v\n", req.Shown, err)
		return 1
	}
	viaServer := func() error {
		if len(given) > 0 {
			return fmt.Errorf("%s given, but the tfmirror serving this data directory does the import, with the keys it trusts and the hosts it allows unsigned versions under: give them to tfmirror serve (neither is ever sent over the admin socket)", strings.Join(given, " and "))
		}
		warnEnvIgnored(stderr, os.LookupEnv, "import", "imports", append(slices.Clone(trustFlags), releasesFlags...)...)
		return nil
	}
	return runSealed("import", cfg, pol, stdout, stderr, viaServer, func(ctx context.Context, ops engineOps) (airGapResult, error) {
		res, err := ops.Import(ctx, req)
		if err != nil && ctx.Err() != nil {
			// Not a fault of the bundle: the operator stopped it.
			err = errors.New("import interrupted: what it imported is cached (through a running serve, its log line \"admin request failed\" says what); run tfmirror import again to import the rest")
		}
		if err != nil && res.Imported+res.Present+res.Failed+res.Ignored+res.Modules+res.ModulesPresent+res.CLIArchives+res.CLIPresent == 0 {
			return airGapResult{failures: res.Failures}, err // nothing done: no summary
		}
		summary := fmt.Sprintf("imported %d packages (%d bytes), %d already present, %d failed, %d files ignored",
			res.Imported, res.Bytes, res.Present, res.Failed, res.Ignored)
		if res.Modules+res.ModulesPresent > 0 {
			summary += fmt.Sprintf("\nmodules: %d packages imported (%d bytes), %d already present", res.Modules, res.ModuleBytes, res.ModulesPresent)
		}
		if res.CLIArchives+res.CLIPresent > 0 {
			summary += fmt.Sprintf("\ncli releases: %d archives imported (%d bytes), %d already present", res.CLIArchives, res.CLIBytes, res.CLIPresent)
		}
		if res.CLIHeld > 0 {
			summary += fmt.Sprintf("\n%d CLI versions imported are held back by the package policy, and not served until it allows them (listed on stderr)", res.CLIHeld)
		}
		return airGapResult{
			summary:  summary,
			failures: res.Failures, failed: res.Failed,
		}, err
	})
}

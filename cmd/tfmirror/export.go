package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/policy"
)

const exportUsage = "tfmirror export [--data-dir DIR] [--format bundle|oci-layout] [--allowed-origins HOST,...] [--export-key FILE] [--provider HOST/NAMESPACE/TYPE,...] [--version V,...] [--platforms os_arch,...] [--releases-hashicorp-keys FILE] [--releases-opentofu-keys FILE] OUT"

// runExport is `tfmirror export`. What the package policy refuses is left
// out, and listed (the --config file's policy; through a running serve,
// that process's). When a tfmirror serve runs on the data
// directory, that process does the export (and writes OUT) and signs it
// with its export key and names the OCI repositories by its prefixes,
// and --export-key or an OCI prefix given here is an error;
// otherwise this one opens the cache, sealed, and signs with the key
// --export-key names or the data directory's.
func runExport(args []string, stdout, stderr io.Writer) int {
	var providers, versionList, platforms settings.List
	var own settings.Config // export-key and the OCI prefixes, as serve takes them
	var format string
	var ifs *flag.FlagSet
	e, rest, err := parseCacheCommandConfig("export", args, os.LookupEnv, usageOutput(args, stdout, stderr), exportUsage, func(fs *flag.FlagSet) {
		ifs = fs
		fs.Var(&providers, "provider", "comma-separated providers to export, HOST/NAMESPACE/TYPE or NAMESPACE/TYPE (registry.terraform.io); default all, and every cached registry module and CLI release (with --provider or --version, no module is exported, and a CLI release only when its address is named: releases.hashicorp.com/hashicorp/PRODUCT, get.opentofu.org/opentofu/tofu)")
		fs.Var(&versionList, "version", "comma-separated provider (and CLI) versions to export; default all")
		fs.Var(&platforms, "platforms", "comma-separated os_arch platforms to export, of providers and CLI releases; default all. A --provider, --version or platform named that selects nothing the cache holds fails the export (exit 1, naming it) before anything is written")
		fs.StringVar(&format, "format", admin.FormatBundle, "what OUT is: bundle (an air-gap bundle for tfmirror import, signed) or oci-layout (a directory of OCI image layouts, one per repository with the OCI front door's names and digests, and push.sh to copy them into an OCI registry with oras)")
		settings.Add(fs, &own, "export-key", "oci-provider-prefix", "oci-module-prefix", "allowed-origins")
		settings.Add(fs, &own, releasesFlags...)
	})
	if errors.Is(err, settings.ErrHelp) {
		return 0
	}
	var cfg settings.Config
	var pol *policy.Policy
	if err == nil {
		cfg = e.Config
		pol, err = readPolicy(e.File)
	}
	keyGiven := err == nil && flagGiven(ifs, "export-key")
	var releasesGiven, prefixesGiven, originsGiven []string
	if err == nil {
		settings.TakeGiven(ifs, own, &cfg, "export-key")
		prefixesGiven = settings.TakeGiven(ifs, own, &cfg, "oci-provider-prefix", "oci-module-prefix")
		originsGiven = settings.TakeGiven(ifs, own, &cfg, "allowed-origins")
		releasesGiven = settings.TakeGiven(ifs, own, &cfg, releasesFlags...)
		if len(originsGiven) > 0 {
			err = cfg.Validate() // as serve checks them
		}
	}
	if err == nil && len(rest) != 1 {
		err = argumentsError("one OUT (a directory, or a file ending in .tar or .tar.gz)", rest)
	}
	var req admin.ExportRequest
	if err == nil {
		for _, n := range []string{"oci-provider-prefix", "oci-module-prefix"} {
			if flagGiven(ifs, n) && format != admin.FormatOCILayout {
				err = fmt.Errorf("--%s is for --format %s", n, admin.FormatOCILayout)
			}
		}
	}
	switch {
	case err != nil:
	case format == admin.FormatOCILayout:
		req.Format = format
		if keyGiven {
			err = errors.New("--export-key: an OCI layout export is not signed (OCI registries check digests, not signatures)")
		} else if airgap.IsTarName(rest[0]) {
			err = errors.New("an OCI layout export is a directory: OUT must not end in .tar, .tar.gz or .tgz")
		}
	case format != admin.FormatBundle:
		err = fmt.Errorf("--format %q: want %s or %s", format, admin.FormatBundle, admin.FormatOCILayout)
	}
	for _, s := range providers {
		if err != nil {
			break
		}
		var p addrs.Provider
		p, err = addrs.ParseProvider(s)
		req.Providers = append(req.Providers, p.String())
	}
	for _, s := range versionList {
		if err != nil {
			break
		}
		var v versions.Version
		v, err = addrs.ParseSemver(s)
		req.Versions = append(req.Versions, v.String())
	}
	for _, s := range platforms {
		if err != nil {
			break
		}
		_, err = addrs.ParsePlatform(s)
		req.Platforms = append(req.Platforms, s)
	}
	if err == nil {
		req.Out, err = filepath.Abs(rest[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror export: %v\nUsage: %s\n", err, exportUsage)
		return 2
	}
	if err := existingDataDir(cfg.DataDir, "export"); err != nil {
		fmt.Fprintf(stderr, "tfmirror export: %v\n", err)
		return 1
	}
	viaServer := func() error {
		if keyGiven {
			return errors.New("--export-key given, but the tfmirror serving this data directory does the export and signs it with its own export key: give --export-key to tfmirror serve")
		}
		if len(prefixesGiven) > 0 {
			return fmt.Errorf("%s given, but the tfmirror serving this data directory does the export, with the repository names of its OCI front door: give them to tfmirror serve", strings.Join(prefixesGiven, " and "))
		}
		if len(originsGiven) > 0 {
			return errors.New("--allowed-origins given, but the tfmirror serving this data directory does the export, of the origins it serves: give it to tfmirror serve")
		}
		if len(releasesGiven) > 0 {
			return fmt.Errorf("%s given, but the tfmirror serving this data directory does the export, with the CLI products and publisher keys it is configured with: give them to tfmirror serve", strings.Join(releasesGiven, " and "))
		}
		warnEnvIgnored(stderr, os.LookupEnv, "export", "exports", append([]string{"export-key", "oci-provider-prefix", "oci-module-prefix", "allowed-origins"}, releasesFlags...)...)
		return nil
	}
	return runSealed("export", cfg, pol, stdout, stderr, viaServer, exportOp(req))
}

// exportOp is the export req, as runSealed runs it: its summary (none
// when it failed before it exported or checked anything), and the error
// that stopped it, said so that the operator knows what is left
// at OUT when it was interrupted.
func exportOp(req admin.ExportRequest) func(context.Context, engineOps) (airGapResult, error) {
	return func(ctx context.Context, ops engineOps) (airGapResult, error) {
		res, err := ops.Export(ctx, req)
		if err != nil && ctx.Err() != nil {
			// Not a fault of the cache: the operator stopped it.
			if req.Format != admin.FormatOCILayout && airgap.IsTarName(req.Out) {
				err = fmt.Errorf("export interrupted: nothing was written to %s (its temporary files are removed); run tfmirror export again", req.Out)
			} else {
				last := "a new signed manifest"
				if req.Format == admin.FormatOCILayout {
					last = "push.sh (removed until an export finishes)"
				}
				err = fmt.Errorf("export interrupted: the directory %s is incomplete, without %s; run the same tfmirror export again to finish it (what it wrote is not written again)", req.Out, last)
			}
		}
		if l := res.Layout; l != nil {
			if err != nil && l.Repositories+l.Tags+l.Blobs+l.BlobsPresent+l.Packages+l.PackagesPresent+l.Partial+l.Held+l.LongNames+l.Failed == 0 {
				return airGapResult{failures: res.Failures}, err // nothing done: no summary
			}
			summary := fmt.Sprintf("OCI layouts: %d repositories, %d tags; %d blobs written (%d bytes), %d already present; %d versions with fewer platforms than the front door's index, %d failed",
				l.Repositories, l.Tags, l.Blobs, l.Bytes, l.BlobsPresent, l.Partial, l.Failed)
			if l.Held > 0 {
				summary += fmt.Sprintf("\nleft out %d versions the package policy holds back (listed on stderr)", l.Held)
			}
			if l.LongNames > 0 {
				summary += fmt.Sprintf("\nleft out %d versions whose repository names are longer than the %d bytes a registry takes (listed on stderr)", l.LongNames, oci.MaxRegistryNameLen)
			}
			if l.Script != "" {
				summary += fmt.Sprintf("\npush every tag into an OCI registry with: sh %s REGISTRY[/PREFIX]", l.Script)
			}
			return airGapResult{summary: summary, failures: res.Failures, failed: l.Failed}, err
		}
		if err != nil && res.Written+res.Present+res.Modules+res.ModulesPresent+res.CLIArchives+res.CLIPresent+res.Held+res.Failed == 0 {
			return airGapResult{failures: res.Failures}, err // nothing done: no summary
		}
		summary := fmt.Sprintf("exported %d packages (%d bytes), %d already present, %d failed", res.Written, res.Bytes, res.Present, res.Failed)
		if res.Modules+res.ModulesPresent > 0 {
			summary += fmt.Sprintf("\nmodules: %d packages exported (%d bytes), %d already present", res.Modules, res.ModuleBytes, res.ModulesPresent)
		}
		if res.CLIArchives+res.CLIPresent > 0 {
			summary += fmt.Sprintf("\ncli releases: %d archives exported (%d bytes), %d already present", res.CLIArchives, res.CLIBytes, res.CLIPresent)
		}
		if res.Held > 0 {
			summary += fmt.Sprintf("\nleft out %d versions the package policy holds back (listed on stderr)", res.Held)
		}
		if res.Signer != "" && err == nil {
			summary += fmt.Sprintf("\nsigned the manifest with export key %s", res.Signer)
		}
		return airGapResult{summary: summary, failures: res.Failures, failed: res.Failed}, err
	}
}

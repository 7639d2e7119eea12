package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/dustin/go-humanize"

	"github.com/tfmirror/tfmirror/v2/manifest"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// cliSync is what a sync did of the manifests' cli blocks.
type cliSync struct {
	fetched, cached int
	bytes           int64
	failures        []string
	skipped         []string
}

// syncCLIs fetches, verified, the archives of the CLI versions the
// manifests' cli blocks select, for their platforms, through the releases
// side of the engine this sync opened.
func (r *syncRun) syncCLIs(ctx context.Context, spec *manifest.Spec) cliSync {
	var res cliSync
	if len(spec.CLIs) == 0 {
		return res
	}
	if r.cli == nil {
		res.failures = append(res.failures, "cli blocks: a running tfmirror serve holds this data directory, and CLI releases are synced only by a sync that opens it (stop the serve, or let runners pull them through /releases/)")
		return res
	}
	for _, c := range spec.CLIs {
		pub := releases.HashiCorp
		if c.Product == releases.TofuProduct {
			pub = releases.OpenTofu
		}
		list, _, err := r.cli.Versions(ctx, pub, c.Product)
		if err != nil {
			res.failures = append(res.failures, fmt.Sprintf("cli %s: %v", c.Product, err))
			continue
		}
		var available versions.List
		for _, l := range list.Versions {
			if v, err := versions.ParseVersion(l.Version); err == nil {
				available = append(available, v)
			}
		}
		chosen := map[string]bool{}
		for _, sel := range c.Selections {
			for _, v := range sel.Select(available) {
				chosen[v.String()] = true
			}
		}
		for _, v := range available {
			if !chosen[v.String()] {
				continue
			}
			for _, pl := range c.Platforms {
				r.syncCLIArchive(ctx, &res, pub, c.Product, v.String(), pl)
			}
		}
	}
	return res
}

// syncCLIArchive fetches one archive, unless the cache has it.
func (r *syncRun) syncCLIArchive(ctx context.Context, res *cliSync, pub releases.Publisher, product, version, platform string) {
	name := product + "_" + version + "_" + platform + ".zip"
	what := fmt.Sprintf("cli %s %s %s", product, version, platform)
	if r.cfg.DryRun {
		fmt.Fprintf(r.out, "would fetch %s (%s)\n", what, name)
		return
	}
	a, err := r.cli.OpenArchive(ctx, pub, product, version, name)
	var held *gate.PolicyError
	switch {
	case errors.As(err, &held):
		res.skipped = append(res.skipped, fmt.Sprintf("%s: %s", what, held.Verdict.Message()))
		return
	case errors.Is(err, releases.ErrNotFound):
		fmt.Fprintf(r.status, "not published by the origin: %s\n", what)
		return
	case err != nil:
		res.failures = append(res.failures, fmt.Sprintf("%s: %v", what, err))
		return
	}
	defer a.Close()
	if a.Content() != nil {
		res.cached++
		return
	}
	n, err := io.Copy(io.Discard, a) // the whole archive verified, then committed
	if err != nil {
		res.failures = append(res.failures, fmt.Sprintf("%s: %v", what, err))
		return
	}
	res.fetched++
	res.bytes += n
}

// report prints the CLI part of a sync's summary and says whether it all
// succeeded.
func (res cliSync) report(out io.Writer) bool {
	for _, sk := range res.skipped {
		fmt.Fprintf(out, "skipped: %s\n", sk)
	}
	if res.fetched+res.cached+len(res.failures)+len(res.skipped) == 0 {
		return true
	}
	fmt.Fprintf(out, "cli summary: %d archives fetched (%s), %d already cached, %d failed, %d held back by the package policy\n",
		res.fetched, humanize.IBytes(uint64(res.bytes)), res.cached, len(res.failures), len(res.skipped))
	for _, f := range res.failures {
		fmt.Fprintf(out, "  failed: %s\n", f)
	}
	return len(res.failures) == 0
}

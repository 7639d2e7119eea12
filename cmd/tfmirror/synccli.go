package main

import (
	"context"
	"fmt"
	"io"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/dustin/go-humanize"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/manifest"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// cliOps is what sync needs for CLI releases, part of engineOps: the
// same admin operations whether this process opened the data directory
// or a running serve holds it.
type cliOps interface {
	CLIVersions(ctx context.Context, req admin.CLIRequest) ([]string, error)
	EnsureCLI(ctx context.Context, req admin.CLIRequest) (admin.CLIEnsured, error)
	LookCLI(ctx context.Context, req admin.CLIRequest) (admin.CLIEnsured, error)
}

// cliSync is what a sync did of the manifests' cli blocks.
type cliSync struct {
	fetched, cached int
	bytes           int64
	failures        []string
	skipped         []string
	// notFetched counts the archives not fetched because the sync was
	// interrupted, and unread the products whose versions were not
	// listed because it was: neither failed.
	notFetched, unread int
	// dryRun says nothing was fetched: wouldFetch counts the archives a
	// sync would fetch (cached, those it would not).
	dryRun     bool
	wouldFetch int
}

// syncCLIs fetches, verified, the archives of the CLI versions the
// manifests' cli blocks select, for their platforms, through the releases
// side of the data directory's engine (admin.API.EnsureCLI); a dry run
// looks them up instead (admin.API.LookCLI).
func (r *syncRun) syncCLIs(ctx context.Context, spec *manifest.Spec) cliSync {
	res := cliSync{dryRun: r.cfg.DryRun}
	for _, c := range spec.CLIs {
		if ctx.Err() != nil {
			res.unread++
			continue
		}
		list, err := r.ops.CLIVersions(ctx, admin.CLIRequest{Product: c.Product})
		// What the policy holds back, once the list has left it out
		// (as a provider's: planProvider).
		held := r.heldBack(ctx, policy.Provider, releases.Address(releases.PublisherOf(c.Product), c.Product))
		if h, ok := held[""]; ok && err != nil {
			res.skipped = append(res.skipped, fmt.Sprintf("cli %s: %s", c.Product, heldMessage(h)))
			continue
		}
		if interrupted(ctx, err) {
			res.unread++
			continue
		}
		if err != nil {
			res.failures = append(res.failures, fmt.Sprintf("cli %s: %v", c.Product, err))
			continue
		}
		var available versions.List
		for _, l := range list {
			if v, err := versions.ParseVersion(l); err == nil {
				available = append(available, v)
			}
		}
		chosen := map[string]bool{}
		for _, sel := range c.Selections {
			got, skipped := selectServed(sel, available, held, "cli "+c.Product)
			res.skipped = appendMissing(res.skipped, skipped...)
			if len(got) == 0 && len(skipped) == 0 {
				res.failures = append(res.failures, fmt.Sprintf("cli %s: no version matches %s (%s)", c.Product, quotedConstraint(sel.Text), sel.Where))
			}
			for _, v := range got {
				chosen[v.String()] = true
			}
		}
		for _, v := range available {
			if !chosen[v.String()] {
				continue
			}
			for _, pl := range c.Platforms {
				if ctx.Err() != nil {
					res.notFetched++
					continue
				}
				r.syncCLIArchive(ctx, &res, c.Product, v.String(), pl)
			}
		}
	}
	return res
}

// syncCLIArchive fetches one archive, unless the cache has it; a dry run
// only looks (LookCLI), and lists the archive when it would fetch it. One
// that an interrupt (ctx done) stopped is counted as not fetched, not
// failed.
func (r *syncRun) syncCLIArchive(ctx context.Context, res *cliSync, product, version, platform string) {
	what := fmt.Sprintf("cli %s %s %s", product, version, platform)
	req := admin.CLIRequest{Product: product, Version: version, Platform: platform}
	ensure := r.ops.EnsureCLI
	if r.cfg.DryRun {
		ensure = r.ops.LookCLI
	}
	got, err := ensure(ctx, req)
	switch {
	case interrupted(ctx, err):
		res.notFetched++
	case err != nil:
		res.failures = append(res.failures, fmt.Sprintf("%s: %v", what, err))
	case got.Held != "":
		res.skipped = append(res.skipped, fmt.Sprintf("%s: %s", what, got.Held))
	case got.Unpublished:
		fmt.Fprintf(r.status, "not published by the origin: %s\n", what)
	case got.CachedAlready:
		res.cached++
	case r.cfg.DryRun:
		res.wouldFetch++
		fmt.Fprintf(r.out, "would fetch %s (%s)\n", what, got.Archive)
	default:
		res.fetched++
		res.bytes += got.Bytes
	}
}

// report prints the CLI part of a sync's summary and says whether it all
// succeeded (an interrupt is the caller's to report).
func (res cliSync) report(out io.Writer) bool {
	for _, sk := range res.skipped {
		fmt.Fprintf(out, "skipped: %s\n", shown(sk))
	}
	if res.fetched+res.wouldFetch+res.cached+len(res.failures)+len(res.skipped)+res.notFetched+res.unread == 0 {
		return true
	}
	if res.dryRun {
		fmt.Fprintf(out, "cli dry run: %d archives to fetch, %d already cached, %d failed, %d held back by the package policy",
			res.wouldFetch, res.cached, len(res.failures), len(res.skipped))
	} else {
		fmt.Fprintf(out, "cli summary: %d archives fetched (%s), %d already cached, %d failed, %d held back by the package policy",
			res.fetched, humanize.IBytes(uint64(res.bytes)), res.cached, len(res.failures), len(res.skipped))
	}
	if res.notFetched > 0 && res.dryRun {
		fmt.Fprintf(out, ", %d not looked up (interrupted)", res.notFetched)
	} else if res.notFetched > 0 {
		fmt.Fprintf(out, ", %d not fetched (interrupted)", res.notFetched)
	}
	if res.unread > 0 {
		fmt.Fprintf(out, ", %d products not looked up (interrupted)", res.unread)
	}
	fmt.Fprintln(out)
	for _, f := range res.failures {
		fmt.Fprintf(out, "  failed: %s\n", shown(f))
	}
	return len(res.failures) == 0
}

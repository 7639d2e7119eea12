package airgap

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// UnmatchedSelectionError is an export refused before it wrote anything,
// because a selector of its Selection selects nothing the cache holds.
type UnmatchedSelectionError struct {
	Out string
	// Unmatched names each such selector and says so ("--provider
	// registry.terraform.io/acme/nope: no cached package").
	Unmatched []string
}

func (e *UnmatchedSelectionError) Error() string {
	return fmt.Sprintf("nothing exported, nothing written to %s: the selection names what the cache does not hold: %s",
		e.Out, strings.Join(e.Unmatched, "; "))
}

// selectChecked returns the cached provider versions sel wants, listed
// once for the check of the selection and the export, once checkSelection
// found the selection sound.
func selectChecked(ctx context.Context, engine Engine, cli CLISide, sel Selection, out string) ([]mirror.CachedVersion, error) {
	listed, err := listCached(engine, sel.Providers)
	if err != nil {
		return nil, err
	}
	if err := checkSelection(ctx, cli, sel, listed, out); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(listed, func(cv mirror.CachedVersion) bool { return !sel.wants(cv) }), nil
}

// checkSelection is nil when sel names nothing (an export of everything,
// of an empty cache too, is an empty export, as before), or when each
// selector it names selects a package the cache holds (a cached archive
// of a provider version or, with cli (not nil), of a CLI version; or a CLI version
// whose stored SHA256SUMS the keys in force refuse, which the export
// reports): a provider, one of its versions; a version, a version of that
// number of the providers sel names (of any, when it names none); a
// platform, an archive for it of the versions the rest of sel selects.
// cached are the cached versions of the providers sel names (listCached).
// Otherwise it is an *UnmatchedSelectionError naming each one that
// selects nothing, so that an export naming what it wants fails where the
// operator sees it (a typo, a sync that did not run), before it writes
// anything to out; when it is nil, sel selects at least one package. The
// package policy is not asked: a cached version it holds back is the
// export's to report.
func checkSelection(ctx context.Context, cli CLISide, sel Selection, cached []mirror.CachedVersion, out string) error {
	if len(sel.Providers) == 0 && len(sel.Versions) == 0 && len(sel.Platforms) == 0 {
		return nil
	}
	matched := map[string]bool{}
	inSel := func(pl string) bool { return len(sel.Platforms) == 0 || slices.Contains(sel.Platforms, pl) }
	// mark records what a cached version of provider (a provider or CLI
	// address) with archives for platforms (not empty but for a CLI
	// version that fails) matches.
	mark := func(provider, version string, platforms []string) {
		matched["provider "+provider] = true
		if len(sel.Versions) > 0 && !slices.Contains(sel.Versions, version) {
			return
		}
		matched["version "+version] = true
		for _, pl := range platforms {
			matched["platforms "+pl] = true
		}
	}
	// Listed by the providers named alone: the versions and platforms
	// are judged here.
	for _, cv := range cached {
		var pls []string
		for _, cp := range cv.Platforms {
			if cp.Cached {
				pls = append(pls, cp.Platform)
			}
		}
		if len(pls) > 0 {
			mark(cv.Provider, cv.Version, slices.DeleteFunc(pls, func(pl string) bool { return !inSel(pl) }))
		}
	}
	if cli != nil && (len(sel.Providers) > 0 || len(sel.Versions) == 0) {
		// As wantsCLI: every CLI version when sel names no provider and
		// no version, else those of the addresses it names.
		err := cli.CLIReleases().Held(func(h releases.HeldVersion) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			addr := releases.Address(h.Publisher, h.Product)
			if len(sel.Providers) > 0 && !slices.ContainsFunc(sel.Providers, func(p addrs.Provider) bool { return p.String() == addr }) {
				return nil
			}
			var pls []string
			for _, b := range h.Cached {
				pls = append(pls, b.OS+"_"+b.Arch)
			}
			if len(pls) > 0 || h.Err != nil {
				mark(addr, h.Version, slices.DeleteFunc(pls, func(pl string) bool { return !inSel(pl) }))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("listing the cached CLI releases: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var unmatched []string
	say := func(flag, value, why string) {
		if !matched[flag+" "+value] {
			unmatched = append(unmatched, fmt.Sprintf("--%s %s: %s", flag, value, why))
		}
	}
	for _, p := range sel.Providers {
		say("provider", p.String(), "the cache holds no package of it")
	}
	of := ""
	if len(sel.Providers) > 0 {
		of = " of the providers named"
	}
	for _, v := range sel.Versions {
		say("version", v, "the cache holds no package of this version"+of)
	}
	switch {
	case len(sel.Providers) > 0 && len(sel.Versions) > 0:
		of = " of the providers and versions named"
	case len(sel.Versions) > 0:
		of = " of the versions named"
	}
	for _, pl := range sel.Platforms {
		say("platforms", pl, "the cache holds no package for this platform"+of)
	}
	if len(unmatched) == 0 {
		return nil
	}
	return &UnmatchedSelectionError{Out: out, Unmatched: unmatched}
}

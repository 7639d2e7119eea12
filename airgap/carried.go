package airgap

// The versions an export carries, and those an earlier one carried.
// Exports into the place of an earlier one are incremental: the bundle
// export signs again what the earlier export's manifest lists (exportFiles,
// writeManifest), the OCI layout export keeps the tags of the earlier
// index.json (writeIndex). Either carries what the mirror serves now: every
// version the earlier export carried is judged by the package policy as a
// cached one is, whether the cache still holds it or not (removed since by
// retention or `cache prune`, or the earlier export made from another
// mirror's cache). One the policy refuses, or that its layer cannot judge,
// is left out, reported and counted (leftOut), and withdrawn; one it lets
// through is kept, though the cache no longer holds it: that is what an
// incremental export is for. A minimum release age does not withdraw one
// whose release time the cache no longer knows (carried.stored).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// carriedKind is what a carried version is a version of.
type carriedKind int

const (
	carriedProvider carriedKind = iota + 1
	carriedModule
	carriedCLI
)

// carried names a version an export carries: its kind, the address the
// package policy judges it by (a provider's or module's normal form,
// releases.Address of a CLI product) and its version as the export's
// files spell it (a module's as its origin does).
type carried struct {
	kind    carriedKind
	address string
	version string
}

// providerCarried is the provider version of the provider address (its
// normal form) and the version (canonical).
func providerCarried(address, version string) carried {
	return carried{kind: carriedProvider, address: address, version: version}
}

// moduleCarried is the module version of the module address (in its
// normal form when it parses) and the version as its origin spells it.
func moduleCarried(address, version string) carried {
	if m, err := addrs.ParseModule(address); err == nil {
		address = m.String()
	}
	return carried{kind: carriedModule, address: address, version: version}
}

// cliCarried is the CLI version mr, by the address the package policy
// judges its product by.
func cliCarried(mr manifestRelease) carried {
	return carried{kind: carriedCLI, address: releases.Address(releases.Publisher(mr.Publisher), mr.Product), version: mr.Version}
}

// String names the version as an export's reports do: "ADDRESS VERSION"
// for a provider version, "module ADDRESS VERSION", "cli ADDRESS
// VERSION". It is also what exportFiles.judged knows it by.
func (c carried) String() string {
	switch c.kind {
	case carriedModule:
		return "module " + c.address + " " + c.version
	case carriedCLI:
		return "cli " + c.address + " " + c.version
	}
	return c.address + " " + c.version
}

// stored is the served layer's answer on c, which the cache may no longer
// hold (pkgs for provider and module versions, cli for CLI versions): nil
// when the package policy lets it be served now, its *gate.PolicyError
// when it refuses it, and another error when c cannot be judged (an
// address or version no door serves, no layer to ask).
//
// A minimum release age that holds c only because its release time is
// not known is no refusal here: what dated it (its SHA256SUMS, its
// record, its listing) may have left with it, and an export asks no
// origin. The export that carried it judged its age then; the rules that
// need no date (deny, allow, deny_version) and a release time that is
// known still refuse it.
func (c carried) stored(ctx context.Context, pkgs Served, cli ServedCLI) error {
	err := c.ask(ctx, pkgs, cli)
	var perr *gate.PolicyError
	if errors.As(err, &perr) && perr.Verdict.Rule == policy.RuleMinReleaseAge && perr.Verdict.AvailableAt.IsZero() {
		return nil
	}
	return err
}

// ask is the served layer's answer on c, as stored takes it.
func (c carried) ask(ctx context.Context, pkgs Served, cli ServedCLI) error {
	switch c.kind {
	case carriedProvider:
		p, perr := addrs.ParseProvider(c.address)
		v, verr := addrs.ParseSemver(c.version)
		if err := errors.Join(perr, verr); err != nil {
			return err
		}
		return pkgs.StoredVersion(ctx, p, v)
	case carriedModule:
		m, merr := addrs.ParseModule(c.address)
		v, verr := addrs.ParseModuleVersion(c.version)
		if err := errors.Join(merr, verr); err != nil {
			return err
		}
		return pkgs.StoredModuleVersion(ctx, m, v)
	case carriedCLI:
		mr, ok := c.release()
		if !ok {
			return fmt.Errorf("%s is not a CLI version this release serves", c)
		}
		return storedCLI(cli, mr)
	}
	return fmt.Errorf("%s: a version of no kind an export carries", c)
}

// release is the CLI version c names, when it can name a directory.
func (c carried) release() (manifestRelease, bool) {
	pub, product, ok := releases.ParseAddress(c.address)
	mr := manifestRelease{Publisher: string(pub), Product: product, Version: c.version}
	return mr, ok && mr.valid()
}

// carriedBy is the version whose file rel (relative to a bundle export's
// top, with slashes) is in the layout an export writes: a provider
// version's archives, SHA256SUMS, signatures, evidence and VERSION.json
// (HOST/NAMESPACE/TYPE/...), a module version's package and record
// (modules.go), a CLI version's files (releases.go). A file of no version
// (a provider's index.json, one put there by hand) names none.
func carriedBy(rel string) (carried, bool) {
	parts := strings.Split(rel, "/")
	switch {
	case parts[0] == modulesDir:
		if len(parts) != 6 {
			return carried{}, false
		}
		m, err := addrs.ParseModule(strings.Join(parts[1:5], "/"))
		version, ok := strings.CutSuffix(parts[5], ".tar.gz")
		if !ok {
			version, ok = strings.CutSuffix(parts[5], ".json")
		}
		if err != nil || !ok || !safeVersion(version) {
			return carried{}, false
		}
		return moduleCarried(m.String(), version), true
	case parts[0] == releasesDir:
		mr := manifestRelease{}
		if len(parts) == 5 {
			mr = manifestRelease{Publisher: parts[1], Product: parts[2], Version: parts[3]}
		}
		return cliCarried(mr), mr.valid()
	case len(parts) == 4:
		p, err := addrs.ParseProvider(strings.Join(parts[:3], "/"))
		if err != nil {
			return carried{}, false
		}
		version, ok := strings.CutSuffix(parts[3], ".json")
		if rest, named := strings.CutPrefix(parts[3], "terraform-provider-"+p.Type+"_"); named {
			version, _, ok = strings.Cut(rest, "_")
		}
		if v, err := addrs.ParseSemver(version); !ok || err != nil || v.String() != version {
			return carried{}, false
		}
		return providerCarried(p.String(), version), true
	}
	return carried{}, false
}

// earlier lists the versions whose files the manifest of the earlier
// export into out by the same key lists (ef.prior) and are still there,
// each once, in order.
func (ef *exportFiles) earlier() []carried {
	byName := map[string]carried{}
	for rel := range ef.prior {
		if c, ok := carriedBy(rel); ok && ef.dir.exists(filepath.Join(ef.out, filepath.FromSlash(rel))) {
			byName[c.String()] = c
		}
	}
	out := make([]carried, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[name])
	}
	return out
}

// judge settles the served layer's answer err on version c: c is noted
// as judged (judgeCarried leaves it be) and, when leftOut leaves it out
// (reported and counted: refused by the package policy, or not judged),
// the files an earlier export into out wrote of it are withdrawn. It
// reports whether c is left out; the error is the withdrawal's.
func (ef *exportFiles) judge(c carried, err error, report func(string), sum *ExportSummary) (bool, error) {
	ef.judged[c.String()] = true
	if !leftOut(err, c.String(), report, sum) {
		return false, nil
	}
	if err := ef.withdrawCarried(c); err != nil {
		return true, fmt.Errorf("withdrawing %s: %w", c, err)
	}
	return true, nil
}

// judgeCarried judges every version the manifest of the earlier export
// into out by the same key lists files of that this export has not
// judged: one the cache no longer holds, or that this export's selection
// leaves out. As for a cached one (exportFiles.judge), one the package
// policy refuses, or that its layer cannot judge, is reported, counted
// and withdrawn; one it lets through is kept, its files signed again by
// writeManifest. pkgs judges provider and module versions, cli CLI
// versions (nil on an engine without CLI releases side, which cannot
// judge them: they are withdrawn).
func judgeCarried(ctx context.Context, pkgs Served, cli ServedCLI, files *exportFiles, report func(string), sum *ExportSummary) error {
	for _, c := range files.earlier() {
		if files.judged[c.String()] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := files.judge(c, c.stored(ctx, pkgs, cli), report, sum); err != nil {
			return err
		}
	}
	return nil
}

// withdrawCarried withdraws the files of version c (withdraw): a provider
// version's archives, SHA256SUMS, signatures, evidence and VERSION.json,
// and the provider's index.json when no archive of another version is left
// (it is written again from those that are, writeIndexes); a module
// version's package and record; every file of a CLI version's directory.
// A version that cannot name files has none to withdraw.
func (ef *exportFiles) withdrawCarried(c carried) error {
	switch c.kind {
	case carriedProvider:
		p, err := addrs.ParseProvider(c.address)
		if err != nil {
			return nil
		}
		dir := filepath.Join(ef.out, p.Hostname.ForDisplay(), p.Namespace, p.Type)
		prefix := "terraform-provider-" + p.Type + "_" + c.version + "_"
		if err := ef.withdraw(dir, func(name string) bool { return name == c.version+".json" || strings.HasPrefix(name, prefix) }); err != nil {
			return err
		}
		return ef.withdrawIndex(dir, p.Type)
	case carriedModule:
		m, err := addrs.ParseModule(c.address)
		if err != nil || !safeVersion(c.version) {
			return nil
		}
		return ef.withdraw(moduleDir(ef.out, m), func(name string) bool { return name == c.version+".tar.gz" || name == c.version+".json" })
	case carriedCLI:
		if mr, ok := c.release(); ok {
			return ef.withdraw(filepath.Join(ef.out, filepath.FromSlash(mr.dir())), func(string) bool { return true })
		}
	}
	return nil
}

package retention

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// PruneRequest asks Prune what to remove.
type PruneRequest struct {
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
	// Provider, Module or CLI, with Versions, name versions to remove:
	// then only those are removed, whatever the rules say,
	// including versions that cannot be fetched again, or that have an
	// archive that cannot be (which leave the version list; a CLI
	// version, its SHA256SUMS), and a withheld import set aside in a
	// version's record; but a pinned version is not removed: the prune is
	// refused (ErrPinned) and removes nothing. None: the rules (Config)
	// decide.
	Provider *addrs.Provider
	Module   *addrs.Module
	// CLI is a CLI product's address (Pins.CLIs).
	CLI      string
	Versions []string
}

// isNamed says whether req names versions.
func (req PruneRequest) isNamed() bool {
	return req.Provider != nil || req.Module != nil || req.CLI != ""
}

// ErrPinned is Prune's answer for a named version that is pinned: a
// pinned version is kept until its pin is removed.
var ErrPinned = errors.New("a pinned version is kept until its pin is removed")

// errNothingNamed is Prune's answer for a version the cache does not hold.
func errNothingNamed(what, version string) error {
	return fmt.Errorf("%w: the cache holds no version %s of %s", records.ErrVersionNotFound, version, what)
}

// Prune removes (or with DryRun, lists) what the retention rules would
// remove now, or the versions req names. An archive is removed only when
// no version kept needs it, and never while a client reads it (it is then
// left for the next pass, and not listed as removed). It returns the
// removals made, or that would be made. The rules remove nothing while
// the pins have never been read: they would not know what is pinned.
// It reads the pins first: a version pinned since their last check is
// kept (and, once a rebuild ran, kept from the size limit too). With
// Config.Evictions, a prune lists too what the size limit evicted
// (RuleSizeLimit), once a pass of it ended; a dry run, what a pass would
// evict once the removals listed were made.
func (r *Retainer) Prune(ctx context.Context, req PruneRequest) ([]Removal, error) {
	r.pins.first(r.log)
	if r.pins.read(r.log) {
		r.changed() // a dry run rebuilds nothing itself
	}
	if err := r.pins.unread(); err != nil && !req.isNamed() {
		return nil, fmt.Errorf("the retention rules remove nothing until the pins can be read: %w", err)
	}
	r.passMu.Lock()
	defer r.passMu.Unlock()
	read := r.prot.generation()
	hs, err := r.holdings()
	if err != nil {
		return nil, err
	}
	var removed map[*held]string
	if req.isNamed() {
		removed, err = named(hs, req)
	} else {
		removed = r.byRules(hs)
	}
	if err != nil {
		return nil, err
	}
	p := plan(hs, removed)
	if req.DryRun {
		if r.cfg.Evictions != nil {
			// What the size limit may evict, read now, as the prune's
			// own rebuild reads it before its pass.
			r.rebuild()
		}
		return append(p, r.cfg.Evictions.predict(r.store, r.log, hs, p, r.mayEvict)...), nil
	}
	if !req.isNamed() {
		r.mu.Lock()
		r.status.LastPass = r.now().UTC()
		r.mu.Unlock()
	}
	done, err := r.remove(ctx, p, read)
	r.beforePrune.Store(false) // the size limit evicts what is still over it
	r.rebuild()
	if err == nil {
		var evicted []Removal
		evicted, err = r.cfg.Evictions.list(ctx, r.store, r.log, hs)
		done = append(done, evicted...)
	}
	return done, err
}

// plan is the removal of the versions removed (with their rule): of
// their cached archives, those no version kept needs.
func plan(hs []*held, removed map[*held]string) []Removal {
	var plan []Removal
	// What kept versions need stays, and what cannot be fetched again of
	// the versions the rules remove (the withheld imports set aside in
	// their records, the packages an import added to them): only a prune
	// naming the version removes them.
	needed := map[string]bool{}
	for _, h := range hs {
		rule, gone := removed[h]
		if !gone {
			for _, sha := range h.Archives {
				needed[sha] = true
			}
		}
		if !gone || rule != RuleNamed {
			for _, sha := range slices.Concat(h.SetAside, h.Unfetchable) {
				needed[sha] = true
			}
		}
	}
	taken := map[string]bool{}
	for _, h := range hs {
		rule, gone := removed[h]
		if !gone {
			continue
		}
		// Named, a version with an archive that cannot be fetched again
		// goes whole: it would stay listed without it.
		rm := Removal{Kind: h.Kind, Address: h.Address, Version: h.Raw, Rule: rule, Archives: []string{},
			Unlisted: rule == RuleNamed && (!h.Refetch || len(h.Unfetchable) > 0), Withheld: rule == RuleNamed && len(h.SetAside) > 0}
		archives := h.Archives
		if rm.Withheld {
			archives = slices.Concat(h.Archives, h.SetAside)
		}
		for _, sha := range archives {
			size, cached := h.cached[sha]
			if !cached {
				size, cached = h.keptCached[sha]
			}
			if !cached {
				// Held but found damaged: not served, and gone with the
				// version that named it (its size is known once removed).
				cached = h.damaged[sha]
			}
			if !cached || needed[sha] || taken[sha] {
				continue
			}
			taken[sha] = true
			rm.Archives = append(rm.Archives, sha)
			rm.Bytes += size
		}
		if len(rm.Archives) == 0 && !rm.Unlisted && !rm.Withheld {
			continue
		}
		plan = append(plan, rm)
	}
	slices.SortFunc(plan, func(a, b Removal) int {
		return strings.Compare(a.Kind+" "+a.Address+" "+a.Version, b.Kind+" "+b.Address+" "+b.Version)
	})
	return plan
}

// beyondNewest returns the versions of g (newest first) older than the k
// newest it keeps: the k newest served releases, or, when fewer are
// served, those and the newest served prereleases (which Terraform and
// OpenTofu pick only when named exactly). The refused versions and the
// prereleases newer than the oldest kept stay too; none goes while fewer
// than k are served.
func (r *Retainer) beyondNewest(g []*held, k int) []*held {
	var releases, prereleases []*held // served, newest first
	for _, h := range g {
		switch {
		case r.cfg.Refused != nil && r.cfg.Refused(h.Kind, h.Address, h.Raw):
		case h.Version.Prerelease != "":
			prereleases = append(prereleases, h)
		default:
			releases = append(releases, h)
		}
	}
	kept := slices.Concat(releases, prereleases)
	if len(kept) < k {
		return nil
	}
	keep := map[*held]bool{}
	for _, h := range kept[:k] {
		keep[h] = true
	}
	oldest := 0 // the place of the oldest kept
	for i, h := range g {
		if keep[h] {
			oldest = i
		}
	}
	return g[oldest+1:]
}

// byRules picks the versions the rules remove, with the rule.
func (r *Retainer) byRules(hs []*held) map[*held]string {
	out := map[*held]string{}
	if k := r.cfg.KeepVersions; k > 0 {
		groups := map[string][]*held{}
		for _, h := range hs {
			if len(h.cached) == 0 {
				continue
			}
			g := h.Kind + " " + h.Address
			if r.cfg.KeepPerMajor {
				g += fmt.Sprintf(" %d", h.Version.Major)
			}
			groups[g] = append(groups[g], h)
		}
		for _, g := range groups {
			// Newest first; of the same precedence (builds of a
			// version, 1.2.0+a and 1.2.0+b, which semver does not
			// order), the greater spelling first: the cache's pass and
			// the bucket's keep the same whatever order they read.
			slices.SortFunc(g, func(a, b *held) int {
				switch {
				case a.Version.GreaterThan(b.Version):
					return -1
				case b.Version.GreaterThan(a.Version):
					return 1
				}
				return strings.Compare(b.Raw, a.Raw)
			})
			for _, h := range r.beyondNewest(g, k) {
				if h.Refetch && h.pinnedBy == "" {
					out[h] = RuleKeepVersions
				}
			}
		}
	}
	if d := r.cfg.UnusedAfter; d > 0 {
		last, unread, err := r.lastUses()
		if err != nil { // a version whose use was not read would count from when it was cached
			r.log.Warn("the last use of versions could not be read; the unused rule removes nothing in this pass", "error", err)
			return out
		}
		now := r.now()
		unanswered, notRead, rejectedKept := 0, 0, 0
		for _, h := range hs {
			if _, ok := out[h]; ok || len(h.cached) == 0 || !h.Refetch || h.pinnedBy != "" {
				continue
			}
			// From its last download, or from when it was cached, when
			// later (never downloaded, or cached again since by a sync).
			at := h.newest
			if used, ok := last[h.Key]; ok && used.After(at) {
				at = used
			}
			if now.Sub(at) < d {
				continue
			}
			if unread[h.Key] { // when it was last used is not known
				notRead++
				continue
			}
			if r.shared != nil { // a download on another replica counts
				ctx, cancel := context.WithTimeout(context.Background(), sharedUseTimeout)
				theirs, ok, rejected, err := r.sharedUse(ctx, h.Key)
				cancel()
				if errors.Is(err, errUseUnread) {
					notRead++
					continue
				}
				if err != nil {
					unanswered++ // not known: a later pass decides
					continue
				}
				if ok && now.Sub(theirs) < d {
					continue
				}
				// One that does not authenticate (a replica's of the
				// earlier release, during a rolling upgrade) counts from
				// when the store wrote it.
				if rejectedUseCounts(rejected, now, d) {
					rejectedKept++
					continue
				}
			}
			out[h] = RuleUnused
		}
		if notRead > 0 {
			r.log.Warn("the last use of versions does not read (damaged, or written by a newer release); the unused rule removes none of them until a download writes it again",
				"versions", notRead)
		}
		if rejectedKept > 0 {
			r.log.Warn("the last use of versions in the shared store does not authenticate (written by release 2.0.0, or without the key); the unused rule counts each from when the store wrote it",
				"versions", rejectedKept)
		}
		if unanswered > 0 {
			r.log.Warn("the shared store did not answer for the last use of versions; the unused rule removes none of them until it does",
				"versions", unanswered)
		}
	}
	return out
}

// named picks the versions req names.
func named(hs []*held, req PruneRequest) (map[*held]string, error) {
	var kind, addr string
	switch {
	case req.Provider != nil:
		kind, addr = "provider", req.Provider.String()
	case req.Module != nil:
		kind, addr = "module", req.Module.String()
	default:
		kind, addr = "cli", req.CLI
	}
	if len(req.Versions) == 0 {
		return nil, errNothingNamed(kind+" "+addr, "(none named)")
	}
	out := map[*held]string{}
	for _, want := range req.Versions {
		// One version, in any spelling ("v1.1.0" is 1.1.0, as a module
		// registry spells it): not the other builds of its release
		// (1.1.0+a is a version of its own). One that does not parse
		// names the version stored under that very string, if any.
		wv, werr := addrs.ParseModuleVersion(want)
		found := false
		for _, h := range hs {
			if h.Kind != kind || h.Address != addr {
				continue
			}
			if werr == nil && wv == h.Version || want == h.Raw {
				if h.pinnedBy != "" {
					return nil, fmt.Errorf("%s %s version %s is pinned by %s: %w; nothing was removed",
						kind, addr, h.Raw, h.pinnedBy, ErrPinned)
				}
				out[h] = RuleNamed
				found = true
			}
		}
		if !found {
			return nil, errNothingNamed(kind+" "+addr, want)
		}
	}
	return out, nil
}

// remove applies plan: deletes its archives (not those a client has
// open: a version that can be fetched again loses the others, and the
// rest goes in a later pass), and unlists the versions that cannot be
// fetched again with their archives, whole or not at all (removeWhole).
// It returns what was removed; read is the generation of what is kept
// from the size limit when the records were read (removeUnkept).
func (r *Retainer) remove(ctx context.Context, plan []Removal, read uint64) ([]Removal, error) {
	var done []Removal
	for _, rm := range plan {
		if ctx.Err() != nil {
			break
		}
		if rm.Unlisted || rm.Withheld {
			if got, ok := r.removeWhole(rm); ok {
				done = append(done, got)
			}
			continue
		}
		got := rm
		got.Archives, got.Bytes = []string{}, 0
		busy := false
		for _, sha := range rm.Archives {
			var info cache.BlobInfo
			kept, err := r.prot.removeUnkept(sha, read, func() (err error) {
				info, err = r.store.EvictBlob(sha)
				return err
			})
			switch {
			case kept:
				// An import since the records were read names it: it
				// cannot be fetched again for that version.
			case err == nil:
				got.Archives = append(got.Archives, sha)
				got.Bytes += info.Size
			case errors.Is(err, cache.ErrNotFound):
			case errors.Is(err, cache.ErrInUse):
				busy = true
			default:
				r.log.Warn("removing an archive", "sha256", sha, "error", err)
				busy = true
			}
		}
		if busy {
			r.log.Info("an archive of a version being removed is in use; it is removed by a later pass",
				"kind", rm.Kind, "address", rm.Address, "version", rm.Version)
		}
		if len(got.Archives) == 0 {
			continue
		}
		done = append(done, got)
		r.log.Info("removed the packages of a version", "rule", rm.Rule, "kind", rm.Kind, "address", rm.Address,
			"version", rm.Version, "bytes", got.Bytes, "unlisted", false, "withheld_import", false)
	}
	if r.cfg.Metrics != nil {
		countRemovals(done, r.cfg.Metrics.RetentionRemoved)
	}
	return done, ctx.Err()
}

// countRemovals gives record (a Metrics method: the cache's removals or
// the bucket's) the versions and bytes of done, by rule.
func countRemovals(done []Removal, record func(rule string, versions int, bytes int64)) {
	type tally struct {
		versions int
		bytes    int64
	}
	byRule := map[string]*tally{}
	for _, rm := range done {
		t := byRule[rm.Rule]
		if t == nil {
			t = &tally{}
			byRule[rm.Rule] = t
		}
		t.versions++
		t.bytes += rm.Bytes
	}
	for rule, t := range byRule {
		record(rule, t.versions, t.bytes)
	}
}

// removeWhole applies rm, a removal of what cannot be fetched again (a
// version unlisted with its record, or the withheld import set aside in a
// record): the record (or what it sets aside) and the archives go
// together, or nothing does. An archive removed while a record still
// named it could never be had again, and the version would stay listed
// without it; so while a client reads one of them (cache.ErrInUse), or
// the record cannot be changed, nothing is removed, and the version stays
// whole for a prune naming it again. An archive that an import names
// since the plan (byte for byte the package of another version) stays,
// kept from the size limit: once the record is removed, the records are
// read again (the engine, and the CLI releases, remove it under their
// import lock, so the imports that began before have ended), and the
// imports since are watched. It
// returns what was removed, and false when nothing was.
func (r *Retainer) removeWhole(rm Removal) (Removal, bool) {
	attrs := []any{"kind", rm.Kind, "address", rm.Address, "version", rm.Version}
	var ran bool // the record's removal was tried: err is its error
	removeRecord := func() error {
		ran = true
		if rm.Unlisted {
			// The record goes, with the import set aside in it.
			return r.removeVersion(rm.Kind, rm.Address, rm.Version)
		}
		return r.eng.DropSetAside(rm.Address, rm.Version)
	}
	r.prot.watch()
	defer r.prot.unwatch()
	err := r.store.UnlessInUse(rm.Archives, removeRecord)
	switch {
	case errors.Is(err, cache.ErrInUse):
		r.log.Info("a package of a version that cannot be fetched again is being read; nothing of the version was removed: name it in a prune again once the download ended", attrs...)
		return Removal{}, false
	case ran && err != nil:
		msg := "removing a version from the version list; nothing of it was removed"
		if !rm.Unlisted {
			msg = "removing the withheld import from a version's record; nothing of it was removed"
		}
		r.log.Warn(msg, append(attrs, "error", err)...)
		return Removal{}, false
	case err != nil:
		r.log.Warn("removing the packages of a version that cannot be fetched again; nothing of it was removed", append(attrs, "error", err)...)
		return Removal{}, false
	}
	// The record went. Its archives go but those a record names now
	// without being able to fetch them again.
	named, err := r.namedUnfetchable(rm.Archives)
	if err != nil {
		r.log.Warn("reading the cache's records once a version was removed; its packages are left behind (the removal of the archives no record names takes those)", append(attrs, "error", err)...)
		named = map[string]bool{}
		for _, sha := range rm.Archives {
			named[sha] = true
		}
	}
	got := rm
	got.Archives, got.Bytes = []string{}, 0
	var errs []error
	kept := r.prot.removeUnnamed(rm.Archives, named, func(sha string) {
		// Named by no record now: one left behind goes with the
		// archives no record names (sweepUnnamed).
		info, err := r.store.EvictBlob(sha)
		switch {
		case err == nil:
			got.Archives = append(got.Archives, sha)
			got.Bytes += info.Size
		case !errors.Is(err, cache.ErrNotFound):
			errs = append(errs, err)
		}
	})
	if len(kept) > 0 {
		r.log.Info("packages of a version removed are kept: an import since names them", append(attrs, "sha256", kept)...)
	}
	if err := errors.Join(errs...); err != nil {
		// What is left of the archives is named by nothing, and served
		// by nothing: sweepUnnamed removes it later.
		r.log.Warn("removing an archive of a version taken off its version list; it is left behind, named by no record", append(attrs, "error", err)...)
	}
	r.log.Info("removed the packages of a version", append([]any{"rule", rm.Rule}, append(attrs, "bytes", got.Bytes,
		"unlisted", got.Unlisted, "withheld_import", got.Withheld)...)...)
	return got, true
}

// namedUnfetchable returns which of shas a version's record names and
// cannot fetch again (an archive rebuild keeps from the size limit, pins
// aside).
func (r *Retainer) namedUnfetchable(shas []string) (map[string]bool, error) {
	named := map[string]bool{}
	if len(shas) == 0 {
		return named, nil
	}
	err := r.scanHeld(false, func(h *held) {
		for i, sha := range slices.Concat(h.Archives, h.SetAside) {
			if (i >= len(h.Archives) || !h.Refetchable(sha)) && slices.Contains(shas, sha) {
				named[sha] = true
			}
		}
	})
	return named, err
}

// removeVersion removes a version that cannot be fetched again: of the
// engine's (providers, modules) or of Config.CLI.
func (r *Retainer) removeVersion(kind, address, version string) error {
	if kind == "cli" {
		if r.cfg.CLI == nil {
			return fmt.Errorf("retention: no CLI releases to remove %s %s from", address, version)
		}
		return r.cfg.CLI.RemoveVersion(kind, address, version)
	}
	return r.eng.RemoveVersion(kind, address, version)
}

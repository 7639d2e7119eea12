package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/providerlists"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// This file is the engine's API: what front doors (the HTTP mirror
// protocol today) and subcommands call, through the package policy's
// layer (mirror/served), which has decided, before a call reaches a
// method here, that the provider's host is served (CheckOrigin) and that
// the policy's address rules let it through; the methods judge what
// depends on the version. Every method takes the caller's
// context, which bounds only the caller's wait: work shared with other
// callers goes on when it ends.

// ListState says where a version list came from.
type ListState struct {
	// Stale says the cached list was served because the refresh failed.
	Stale bool
	// Fetched says the list was fetched from the origin for this call.
	Fetched bool
	// StoredAt is when the list was fetched from the origin.
	StoredAt time.Time
	// Stamp says, through Engine.Reuse, for how long the list may be
	// reused without calling Versions again.
	Stamp Stamp
}

// Versions returns p's version list: from the cache while it is younger
// than Config.VersionsTTL (or however old, offline, or for a local-only
// host of imported providers) and was stored by this release's schema,
// from the origin otherwise. A sealed mirror (Config.Offline) lists only
// the versions with at least one cached archive of a platform it serves,
// so that no client picks a version it cannot install. Versions withheld
// (see Withheld) are left out. When the refresh fails for any reason but the origin saying
// the provider does not exist (discovery.ErrNotFound), or has not ended
// within Config.StaleAfter (it goes on, for the next requests), the cached
// list is returned with ListState.Stale set. The list is shared and must
// not be modified.
func (s *Engine) Versions(ctx context.Context, p addrs.Provider) (*records.VersionList, ListState, error) {
	gen := s.records.generation()
	list, st, err := s.records.lists.Versions(ctx, records.KeysOf(p), false)
	if err != nil {
		return nil, ListState{}, err
	}
	if s.cfg.Offline || s.hosts.Local(p.Hostname) {
		// What cannot be fetched again is listed only while it is held.
		list = s.records.sealedList(ctx, p, list)
	}
	list = s.withholding.WithholdFrom(p, list)
	list, next, err := s.gate.FilterProviders(ctx, p, list)
	if err != nil {
		return nil, ListState{}, err
	}
	return list, ListState{Stale: st.Stale, Fetched: st.Fetched, StoredAt: st.StoredAt, Stamp: gated(s.records.stamp(gen, st, stampVersions), next)}, nil
}

// Package is the verified package metadata of one version for a set of
// platforms.
type Package struct {
	// Archives has one entry for each platform asked for that has a
	// package, in the order asked.
	Archives []PlatformArchive
	// Stale says the version list that named the version's platforms was
	// served from the cache because the origin failed, or that Unasked is
	// set.
	Stale bool
	// Unasked, for an answer of every platform, is why the origin could
	// not be asked for the platforms the cache lacks, which the answer
	// leaves out (its platforms are those the cache holds); nil when it
	// answers every platform. A caller that must have them all (an OCI
	// index, sync) takes it for the error.
	Unasked error
	// Stamp says, through Engine.Reuse, for how long the package may be
	// reused (with the same platforms asked for) without calling Package
	// again.
	Stamp Stamp
}

// PlatformArchive is the verified package of one platform.
type PlatformArchive struct {
	Platform string // os_arch
	records.ArchiveRecord
	// H1 is the archive's h1: hash when the archive is cached, else "".
	H1 string
}

// Package returns the verified package metadata of version v of p for
// platforms, fetching and verifying what the cache lacks (concurrent
// callers for one version share one origin fetch). A nil platforms means
// every platform the version list offers: when the origin cannot be
// asked for those the cache lacks (it fails, or the engine is sealed),
// the answer is of the platforms the cached record holds, Stale.
// Platforms the engine does not serve (Config.Platforms) are left out. Errors:
// discovery.ErrHostNotAllowed, records.ErrVersionNotFound, verify.ErrIntegrity,
// records.ErrOffline, origin errors.
func (s *Engine) Package(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*Package, error) {
	gen := s.records.generation()
	k := records.KeysOf(p).Of(v)
	entry, st, err := s.allowedEntry(ctx, k)
	if err != nil {
		return nil, err
	}
	need := s.records.platformsFor(entry, platforms)
	rec, hit, err := s.records.packageFor(ctx, k, need, &entry, false)
	pkg := &Package{Archives: make([]PlatformArchive, 0, len(need)), Stale: st.Stale}
	if err != nil {
		if rec = s.records.heldWhenUnasked(ctx, k, platforms, err); rec == nil {
			return nil, err
		}
		pkg.Stale, pkg.Unasked = true, err
	}
	if hit {
		pkg.Stamp = s.records.stamp(gen, st, stampPackage)
		pkg.Stamp.until = s.records.missingUntil(rec, need, pkg.Stamp.until)
	}
	for _, pl := range need {
		if a, ok := rec.Archives[pl]; ok {
			pkg.Archives = append(pkg.Archives, PlatformArchive{Platform: pl, ArchiveRecord: a, H1: s.memo.H1(a.SHA256)})
		}
	}
	return pkg, nil
}

// allowedEntry returns the entry of the version k names in its version
// list, as the package policy allows it, for Package and Evidence: what
// the policy refuses whatever the version's release time is, refused
// before the list is read (which may ask the origin), then the version
// as dated by the list.
func (s *Engine) allowedEntry(ctx context.Context, k records.VersionKeys) (records.VersionEntry, providerlists.State, error) {
	if err := s.gate.CheckUndated(policy.Provider, k.Name, k.Version.String()); err != nil {
		return records.VersionEntry{}, providerlists.State{}, err
	}
	entry, list, st, err := s.records.lists.Entry(ctx, k)
	if err != nil {
		return records.VersionEntry{}, providerlists.State{}, err
	}
	if err := s.gate.CheckProviderIn(ctx, k.Provider, k.Version, list); err != nil {
		return records.VersionEntry{}, providerlists.State{}, err
	}
	return entry, st, nil
}

// OpenArchive opens the archive of version v of p for platform pl: from
// the cache, or else from the origin download of it under way, starting
// one if there is none. The download runs on the engine's context, so
// that no caller going away cancels it, and is committed to the cache
// only once its sha256 matched. OpenArchive waits until the download has
// begun (its size is known) or failed; ctx bounds that wait and the
// Reads. Errors: those of Package, and records.ErrPlatformNotFound.
func (s *Engine) OpenArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (*Archive, error) {
	k := records.KeysOf(p).Of(v)
	a, err := s.archiveFor(ctx, k, pl)
	if err != nil {
		return nil, err
	}
	n := s.life.Notifier()
	n.Used(k.Package)
	n.Serving("provider", k.Name, v, a.SHA256)
	arc, err := s.archives.Open(ctx, p, a, nil)
	if err == nil {
		return arc, nil
	}
	if moved, ok := relocated(ctx, s.origin, s.log, k, pl, a, err); ok {
		return s.archives.Open(ctx, p, moved, nil)
	}
	return nil, err
}

// EnsureArchive makes sure the archive of version v of p for platform pl
// is cached, without any client to stream it to: it fetches the metadata
// and the archive if need be, verifies them and waits for the commit. It
// returns where the archive came from. ctx bounds the wait only.
func (s *Engine) EnsureArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (records.Source, error) {
	k := records.KeysOf(p).Of(v)
	a, err := s.archiveFor(ctx, k, pl)
	if err != nil {
		return 0, err
	}
	// A pin keeps what a sync caches as it keeps what a client downloads.
	s.life.Notifier().Serving("provider", k.Name, v, a.SHA256)
	src, err := s.archives.Ensure(ctx, p, a)
	if err == nil {
		return src, nil
	}
	if moved, ok := relocated(ctx, s.origin, s.log, k, pl, a, err); ok {
		return s.archives.Ensure(ctx, p, moved)
	}
	return src, err
}

// archiveFor returns the verified archive record of the version k names
// for platform pl, for OpenArchive and EnsureArchive: a platform the
// engine serves, the version as the policy judges it (dated by the
// provider's version list when it must be), then its package record,
// found, or fetched and verified.
func (s *Engine) archiveFor(ctx context.Context, k records.VersionKeys, pl addrs.Platform) (records.ArchiveRecord, error) {
	p, v, name := k.Provider, k.Version, pl.String()
	if !s.platforms.serves(name) {
		return records.ArchiveRecord{}, fmt.Errorf("%w: %s is not served by this mirror", records.ErrPlatformNotFound, pl)
	}
	if err := s.records.lists.CheckVersion(ctx, k); err != nil {
		return records.ArchiveRecord{}, err
	}
	rec, _, err := s.records.packageFor(ctx, k, []string{name}, nil, false)
	if err != nil {
		return records.ArchiveRecord{}, err
	}
	a, ok := rec.Archives[name]
	if !ok {
		return records.ArchiveRecord{}, fmt.Errorf("%w: %s %s has no package for %s", records.ErrPlatformNotFound, p, v, pl)
	}
	return a, nil
}

// CachedSize returns the size of the cached archive whose sha256 is sha,
// and whether it is cached.
func (s *Engine) CachedSize(sha string) (int64, bool) {
	info, err := s.store.StatBlob(sha)
	if err != nil {
		return 0, false
	}
	return info.Size, true
}

// CachedVersion is a provider version the engine holds verified package
// metadata for.
type CachedVersion struct {
	// Provider is the provider's address, HOST/NAMESPACE/TYPE.
	Provider string
	// Version is the version, canonical.
	Version string
	// Platforms are the verified packages, by platform name.
	Platforms []CachedPlatform
	// HasEvidence says the origin's signed evidence is kept (see
	// Engine.Evidence); false for versions cached by an earlier release
	// and not fetched since, and for versions imported without signature.
	HasEvidence bool
	// records.Provenance says whether the version came from the origin or an
	// import, and whether with a signature.
	Provenance records.Provenance

	cursor string
}

// Cursor names the version for ListCachedAfter: the listing after it.
func (cv CachedVersion) Cursor() string { return cv.cursor }

// CachedPlatform is one verified package and whether its archive is cached.
type CachedPlatform struct {
	Platform string // os_arch
	Archive  records.ArchiveRecord
	Cached   bool
	Size     int64 // bytes, when cached
}

// ListCachedAfter calls fn for every provider version with verified
// package metadata in the cache whose address (HOST/NAMESPACE/TYPE)
// starts with prefix and that comes after the one whose Cursor is after
// ("": from the first), in key order, until fn returns an error (which
// ListCachedAfter returns). A listing can so be read a page at a time: a
// page costs what it holds, not what comes before it. ("", "") lists
// every version.
func (s *Engine) ListCachedAfter(prefix, after string, fn func(CachedVersion) error) error {
	if after != "" {
		after = "package/" + after
	}
	return s.store.ScanMetaAfter("package/"+prefix, after, func(key string, _ time.Time, raw json.RawMessage) error {
		var rec listedRecord
		if err := json.Unmarshal(raw, &rec); err != nil || !records.KnownSchema(rec.Schema) {
			return nil // not ours to judge here; skip
		}
		cv := CachedVersion{
			Provider:    strings.TrimSuffix(strings.TrimPrefix(key, "package/"), "/"+rec.Version),
			Version:     rec.Version,
			Platforms:   []CachedPlatform{},
			HasEvidence: rec.Schema >= records.EvidenceSchema && rec.Provenance != records.ProvenanceUnsigned,
			Provenance:  rec.Provenance,
			cursor:      strings.TrimPrefix(key, "package/"),
		}
		for _, pl := range sortedKeys(rec.Archives) {
			cp := CachedPlatform{Platform: pl, Archive: rec.Archives[pl]}
			if info, err := s.store.StatBlob(cp.Archive.SHA256); err == nil {
				cp.Cached, cp.Size = true, info.Size
			}
			cv.Platforms = append(cv.Platforms, cp)
		}
		return fn(cv)
	})
}

// listedRecord is the part of a records.PackageRecord that ListCachedAfter reads: the
// documents, signatures and keys (most of a record's bytes) are skipped.
type listedRecord struct {
	Schema     int                              `json:"schema"`
	Version    string                           `json:"version"`
	Archives   map[string]records.ArchiveRecord `json:"archives"`
	Provenance records.Provenance               `json:"provenance,omitempty"`
}

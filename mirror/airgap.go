package mirror

// The engine's side of carrying a cache across an air gap: what an export
// reads (Stored, OpenStored) and what an import loads (Import, verified
// by package mirror/imports through the engine's records and fetcher),
// and the version list of a sealed mirror.

import (
	"context"
	"fmt"
	"slices"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/notfound"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
)

// AirGap is the engine's side of carrying a cache across an air gap:
// what an export reads of provider versions (Stored, OpenStored) and
// what an import loads (Import), through the engine's records, fetcher
// and import lock. Engine.AirGap returns it; module packages are carried
// by Modules (ListCachedModules, ImportModule).
type AirGap struct {
	memo     *stored.Records // the stored package records
	archives *fetch.Fetcher  // opens the cached archives
	life     *lifetime.Lifetime
	store    Store
	imp      *imports.Importer
	notFound *notfound.Memory // the origins' not-found answers, forgotten for what is imported
}

// newAirGap returns the engine's AirGap.
func newAirGap(e *Engine) (*AirGap, error) {
	imp, err := imports.New(imports.Config{MaxArchiveBytes: e.cfg.MaxArchiveBytes, Now: e.cfg.Now, Logger: e.log},
		imports.Parts{Life: e.life, Records: e.memo, Source: e.source, Hosts: e.hosts, Withholding: e.withholding, Fetcher: e.archives}, e.store, e.metrics)
	if err != nil {
		return nil, err
	}
	return &AirGap{memo: e.memo, archives: e.archives, life: e.life, store: e.store, imp: imp, notFound: e.notFound}, nil
}

// Import verifies an imported version exactly as if it came from the
// origin and stores it: see imports.Importer.Import. What the origin was
// last heard to lack of the provider is forgotten once it is imported.
func (s *AirGap) Import(ctx context.Context, in imports.Imported) (imports.Result, error) {
	res, err := s.imp.Import(ctx, in)
	if err == nil {
		s.notFound.ForgetProvider(in.Provider)
	}
	return res, err
}

// Sync makes what imports stored so far durable: an import of what may
// not be had again (its medium taken away once it said it was done)
// survives a power loss after it returns (see cache.Records.Sync).
func (s *AirGap) Sync() error {
	return s.store.Sync()
}

// DiskHeadroom is how many bytes an import may still write to the cache's
// file system (unpacking a bundle beside it) before the cache's free space
// reaches its disk reserve, asked now (see cache.Store.Headroom); ok is
// false when the cache does not check free space.
func (s *AirGap) DiskHeadroom() (room int64, ok bool) {
	return s.store.Headroom()
}

// Stored returns what the cache holds of version v of p, every platform
// with verified package metadata, without asking any origin and for any
// host (what an export writes): the origin's evidence, or for a version
// imported without signature (records.Provenance records.ProvenanceUnsigned) the file
// names and sha256s only, with Document -1. Errors: records.ErrNotCached;
// records.ErrNoEvidence for a version cached by an earlier release.
func (s *AirGap) Stored(p addrs.Provider, v versions.Version) (*records.Evidence, error) {
	rec, ok := s.memo.CachedPackage(p, v)
	if !ok {
		return nil, fmt.Errorf("%w: package metadata of %s %s", records.ErrNotCached, p, v)
	}
	if !rec.HasEvidence() {
		return nil, fmt.Errorf("%w: %s %s was cached by an earlier release", records.ErrNoEvidence, p, v)
	}
	return records.EvidenceOf(p, rec, sortedKeys(rec.Archives)), nil
}

// OpenStored opens the cached archive whose sha256 is sha (from Stored),
// without asking any origin. Errors: records.ErrNotCached; records.ErrShutDown.
func (s *AirGap) OpenStored(sha string) (*Archive, error) {
	arc, err := s.archives.OpenCached(sha)
	if err != nil {
		return nil, err
	}
	if arc == nil {
		return nil, fmt.Errorf("%w: archive %s", records.ErrNotCached, sha)
	}
	return arc, nil
}

// sealedList returns list without the versions of which neither the cache
// nor the shared tier (Config.Shared; see recordSource.Installable)
// holds an archive of a served platform; list itself when it lacks none.
func (s *providerRecords) sealedList(ctx context.Context, p addrs.Provider, list *records.VersionList) *records.VersionList {
	var (
		keep    []records.VersionEntry
		dropped bool
	)
	for i, e := range list.Versions {
		installable := false
		if v, err := addrs.ParseSemver(e.Version); err == nil {
			rec, ok := s.memo.CachedPackage(p, v)
			if ok {
				for pl, a := range rec.Archives {
					if !s.platforms.serves(pl) {
						continue
					}
					if _, err := s.store.StatBlob(a.SHA256); err == nil {
						installable = true
						break
					}
				}
			}
			if !installable {
				installable = s.source.Installable(ctx, p, v, rec)
			}
		}
		switch {
		case !installable && !dropped:
			keep, dropped = slices.Clone(list.Versions[:i]), true
		case installable && dropped:
			keep = append(keep, e)
		}
	}
	if !dropped {
		return list
	}
	return list.WithVersions(keep)
}

package sharedtier

// The provider records the engine takes from the tier: version lists,
// and package records whose evidence verifies.

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// Versions returns the version list under key: the cache's, else the
// tier's, with when it was stored there, remembered in the engine's memo
// (not in the cache, so that its age stays the tier's copy's).
// Remembering it changes what the engine answers from, as a write to the
// cache would: the memo's generation advances, so that no answer stamped
// before holds on.
func (s *Shared) Versions(ctx context.Context, key string) (*records.VersionList, time.Time, bool) {
	if list, at, ok := s.recs.Versions(ctx, key); ok {
		return list, at, true
	}
	if s.tier == nil {
		return nil, time.Time{}, false
	}
	_, _, gen, _ := s.recs.Remembered(key)
	var list records.VersionList
	storedAt, ok := s.peek(ctx, key, &list)
	if !ok || !records.KnownSchema(list.Schema) {
		return nil, time.Time{}, false
	}
	s.recs.Adopt(key, gen, &list, storedAt)
	return &list, storedAt, true
}

// Package returns the package record of v: the cache's, else the tier's
// (sharedPackage).
func (s *Shared) Package(ctx context.Context, k records.VersionKeys) (*records.PackageRecord, bool) {
	if rec, ok := s.recs.CachedPackageAt(k); ok {
		return rec, true
	}
	return s.sharedPackage(ctx, k)
}

// sharedPackage copies the package record of v from the tier to the
// cache, if the tier has one (which the tier authenticated as a
// replica's, see Tier) with evidence that still verifies: a copy that
// does not is left where it is, so that the version is fetched and
// verified anew, as when the cached record fails, and its record then
// replaces the tier's.
func (s *Shared) sharedPackage(ctx context.Context, k records.VersionKeys) (*records.PackageRecord, bool) {
	if s.tier == nil {
		return nil, false
	}
	p, v, key := k.Provider, k.Version, k.Package
	var rec records.PackageRecord
	if _, ok := s.peek(ctx, key, &rec); !ok || !records.KnownSchema(rec.Schema) || !rec.HasEvidence() {
		return nil, false
	}
	if err := rec.VerifyEvidence(p.Type, v); err != nil {
		reason := records.ReasonOf(err)
		s.metrics.VerificationFailed(reason)
		s.log.Error("the shared store's package record failed verification; fetching the version from the origin",
			"provider", p.String(), "version", v.String(), "reason", reason, "error", err)
		return nil, false
	}
	rec.MarkEvidenceChecked()
	// A withheld import set aside in it is another replica's, which an
	// earlier release shared: imported records stay local.
	rec.Withheld = nil
	return s.keepPackage(ctx, k, &rec)
}

// maxKeepRounds bounds the rounds keepPackage waits for other writers of
// the version's record.
const maxKeepRounds = 4

// keepPackage stores rec, the tier's package record of a version the
// cache had none of, in the cache, and returns it; unless a record of
// the version was stored while the tier was asked (an import's, whose
// packages may not be fetched again, or a fetch's with more platforms):
// that one is kept, and returned. Every writer of a version's record
// stores it through the version's coalesced fetch
// (lifetime.Lifetime.Coalesce under k.Package), one at a time, each
// reading what the one before stored; so does this copy. When another
// writer's step was under way, the record it stored is taken.
func (s *Shared) keepPackage(ctx context.Context, k records.VersionKeys, rec *records.PackageRecord) (*records.PackageRecord, bool) {
	for range maxKeepRounds {
		ran := false
		res, err := s.life.Coalesce(ctx, "package", k.Package, func(context.Context) (any, error) {
			ran = true
			if cur, ok := s.recs.CachedPackageAt(k); ok {
				return cur, nil
			}
			err := s.store.PutMeta(k.Package, rec)
			s.recs.Forget(k.Package)
			if err != nil {
				s.metrics.CacheWriteFailed()
				s.log.Log(context.Background(), cache.WriteFailureLevel(err), "storing package metadata",
					"provider", k.Provider.String(), "version", k.Version.String(), "error", err)
			}
			return rec, nil
		})
		switch {
		case err != nil:
			return nil, false // the caller's context ended, or the engine shuts down
		case ran:
			return res.(*records.PackageRecord), true
		}
		if cur, ok := s.recs.CachedPackageAt(k); ok {
			return cur, true
		}
	}
	return nil, false
}

// Installable reports whether a sealed mirror can serve version v of p
// from the tier: the version's package record (rec, the cached one, if
// any; else the tier's, copied into the cache) has an archive of a served
// platform that the tier holds and that this replica trusts it for. What
// the tier answered is remembered for SeenTTL, so that a warm version list
// asks it nothing.
func (s *Shared) Installable(ctx context.Context, p addrs.Provider, v versions.Version, rec *records.PackageRecord) bool {
	if s.tier == nil {
		return false
	}
	now := s.cfg.Now()
	if rec == nil {
		k := records.KeysOf(p).Of(v)
		key := "package/" + k.Package
		if has, ok := s.seen.get(key, now); ok && !has {
			return false
		}
		var ok bool
		if rec, ok = s.sharedPackage(ctx, k); !ok {
			s.seen.put(key, false, now)
			return false
		}
	}
	for _, pl := range slices.Sorted(maps.Keys(rec.Archives)) {
		a := rec.Archives[pl]
		if !s.served(pl) || !s.Trusts(a.SHA256) {
			continue
		}
		key := "archive/" + a.SHA256
		if has, ok := s.seen.get(key, now); ok {
			if has {
				return true
			}
			continue
		}
		body, _, err := s.tier.OpenArchive(ctx, a.SHA256)
		if err != nil {
			return false // a failing tier is gone around: not listed
		}
		s.seen.put(key, body != nil, now)
		if body != nil {
			body.Close()
			return true
		}
	}
	return false
}

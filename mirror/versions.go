package mirror

import (
	"context"
	"errors"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// listState says where a version list came from.
type listState struct {
	stale    bool      // cached copy served because the refresh failed
	fetched  bool      // fetched from the origin for this call
	storedAt time.Time // when the list was fetched from the origin
	err      error     // why the refresh failed, when stale
}

// versions returns p's version list, from the cache while it is fresh and
// from the origin otherwise. When the refresh fails for any reason but the
// origin saying the provider does not exist, a cached list is returned
// marked stale. force refreshes a fresh list too.
func (s *providerRecords) versions(ctx context.Context, p addrs.Provider, force bool) (*records.VersionList, listState, error) {
	key := records.VersionsKey(p)
	cached, storedAt, err := s.memo.CachedVersions(key)
	haveCached := err == nil
	if err != nil && !errors.Is(err, cache.ErrNotFound) {
		s.log.Warn("reading cached version list", "provider", p.String(), "error", err)
	}
	if !haveCached {
		cached, storedAt, haveCached = s.shared.Versions(ctx, key)
	}
	fresh := !force && cached != nil && cached.Schema >= records.EvidenceSchema && !cached.Imported && s.cfg.Now().Sub(storedAt) < s.cfg.VersionsTTL
	if haveCached && (s.cfg.Offline || fresh || s.hosts.Local(p.Hostname)) {
		s.metrics.CacheLookup("versions", true)
		return cached, listState{storedAt: storedAt}, nil
	}
	s.metrics.CacheLookup("versions", false)

	res, err := s.life.Coalesce(ctx, "versions", key, func(ctx context.Context) (any, error) {
		return s.refreshVersions(ctx, p)
	})
	if err == nil {
		return res.(*records.VersionList), listState{fetched: true, storedAt: s.cfg.Now()}, nil
	}
	if haveCached && !errors.Is(err, discovery.ErrNotFound) && ctx.Err() == nil {
		s.metrics.StaleServed("versions")
		s.log.Warn("origin failed, serving cached version list", "provider", p.String(), "stored_at", storedAt, "error", err)
		return cached, listState{stale: true, storedAt: storedAt, err: err}, nil
	}
	return nil, listState{}, err
}

func (s *providerRecords) refreshVersions(ctx context.Context, p addrs.Provider) (*records.VersionList, error) {
	infos, err := s.origin.Versions(ctx, p)
	if err != nil {
		return nil, err
	}
	list := records.TranslateVersions(infos, func(raw string, err error) {
		s.log.Warn("origin lists an invalid version; skipped", "provider", p.String(), "version", raw, "error", err)
	})
	list.ListedAt = s.cfg.Now().UTC()
	prev, prevAt := s.previousListing(ctx, p)
	s.gate.NoteListing(ctx, "provider", p.String(), prev.Names(), prevAt, list.Names())
	err = s.store.PutMeta(records.VersionsKey(p), list)
	s.memo.Forget(records.VersionsKey(p))
	if err != nil {
		s.metrics.CacheWriteFailed()
		s.log.Error("storing version list", "provider", p.String(), "error", err)
	}
	s.shared.Put(records.VersionsKey(p), list)
	return list, nil
}

// previousListing returns the listing of p taken before the one being
// stored, and when it was taken: the cached list, or the shared tier's
// when it is newer (another replica listed since); nil when p was never
// listed.
func (s *providerRecords) previousListing(ctx context.Context, p addrs.Provider) (*records.VersionList, time.Time) {
	prev, prevAt, err := s.memo.CachedVersions(records.VersionsKey(p))
	if err != nil {
		prev = nil
	}
	if prev != nil && !prev.ListedAt.IsZero() {
		prevAt = prev.ListedAt
	}
	if shared, at, ok := s.shared.Versions(ctx, records.VersionsKey(p)); ok {
		if !shared.ListedAt.IsZero() {
			at = shared.ListedAt
		}
		if prev == nil || at.After(prevAt) {
			prev, prevAt = shared, at
		}
	}
	return prev, prevAt
}

package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
)

// recordSchema is the layout of the stored records (VersionList,
// PackageRecord) this engine writes. A record of a later schema (written
// by a newer tfmirror sharing the cache) is treated as absent.
//
//   - 0 (records stored before the field existed) and 1: no evidence.
//   - 2: a PackageRecord keeps the origin's signed evidence (its
//     SHA256SUMS documents with their signatures and signing keys, and
//     every platform's package metadata), and a VersionEntry the
//     version's protocols.
//
// Records of an earlier schema are still read and served, but are
// refreshed from the origin on first use (see evidenceSchema).
const recordSchema = 2

// evidenceSchema is the first schema whose records hold the origin's
// evidence. An older version list is refreshed as if it had expired, an
// older package record is fetched and verified again (see packageFor);
// either is served as it is when that fails, and offline.
const evidenceSchema = 2

// knownSchema reports whether a stored record of schema n can be read.
func knownSchema(n int) bool { return n <= recordSchema }

// VersionList is a provider's version list as cached: refreshed after
// VersionsTTL, served stale when a refresh fails. Lists handed out by the
// engine are shared and must not be modified.
type VersionList struct {
	// Schema is the record's layout (recordSchema when written).
	Schema   int            `json:"schema"`
	Versions []VersionEntry `json:"versions"`
	// Imported says Import added versions to the list: it is refreshed
	// from the origin on next use (when the host is an origin and the
	// mirror is not sealed), as the origin's list may have more.
	Imported bool `json:"imported,omitempty"`
	// ListedAt is when the origin was asked for the list, by
	// Config.Now; zero in lists stored before it was kept (their time
	// of storing tells).
	ListedAt time.Time `json:"listed_at,omitzero"`
	// Held says, for the people who asked, why versions the package
	// policy holds back are left out of the list (never stored).
	Held []string `json:"-"`
}

// VersionEntry is one version of a provider and the platforms the origin
// lists for it.
type VersionEntry struct {
	// Version is the canonical form clients use.
	Version string `json:"version"`
	// Origin is the string the origin used, when it differs ("1.2").
	Origin string `json:"origin,omitempty"`
	// Aliases are the origin's other spellings of the version, to ask
	// for a platform the first has no package for ("1.0" beside "1.0.0").
	Aliases []string `json:"aliases,omitempty"`
	// Protocols are the plugin protocol versions the origin lists for the
	// version ("5.0"), in its order (those of every spelling, each once).
	// Nil in lists stored before schema 2.
	Protocols []string `json:"protocols,omitempty"`
	Platforms []string `json:"platforms"`
}

// Find returns the entry of version v, if the list has it.
func (l *VersionList) Find(v versions.Version) (VersionEntry, bool) {
	want := v.String()
	for _, e := range l.Versions {
		if e.Version == want {
			return e, true
		}
	}
	return VersionEntry{}, false
}

// originVersion is the version string to use in origin requests.
func (e VersionEntry) originVersion() string {
	if e.Origin != "" {
		return e.Origin
	}
	return e.Version
}

func versionsKey(p addrs.Provider) string { return "versions/" + p.String() }

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
func (s *providerRecords) versions(ctx context.Context, p addrs.Provider, force bool) (*VersionList, listState, error) {
	key := versionsKey(p)
	cached, storedAt, err := s.cachedVersions(key)
	haveCached := err == nil
	if err != nil && !errors.Is(err, cache.ErrNotFound) {
		s.log.Warn("reading cached version list", "provider", p.String(), "error", err)
	}
	if !haveCached {
		cached, storedAt, haveCached = s.e.shared.sharedVersions(ctx, key)
	}
	fresh := !force && cached != nil && cached.Schema >= evidenceSchema && !cached.Imported && s.cfg.Now().Sub(storedAt) < s.cfg.VersionsTTL
	if haveCached && (s.cfg.Offline || fresh || s.e.local(p.Hostname)) {
		s.metrics.CacheLookup("versions", true)
		return cached, listState{storedAt: storedAt}, nil
	}
	s.metrics.CacheLookup("versions", false)

	res, err := s.e.coalesce(ctx, "versions", key, func(ctx context.Context) (any, error) {
		return s.refreshVersions(ctx, p)
	})
	if err == nil {
		return res.(*VersionList), listState{fetched: true, storedAt: s.cfg.Now()}, nil
	}
	if haveCached && !errors.Is(err, discovery.ErrNotFound) && ctx.Err() == nil {
		s.metrics.StaleServed("versions")
		s.log.Warn("origin failed, serving cached version list", "provider", p.String(), "stored_at", storedAt, "error", err)
		return cached, listState{stale: true, storedAt: storedAt, err: err}, nil
	}
	return nil, listState{}, err
}

func (s *providerRecords) refreshVersions(ctx context.Context, p addrs.Provider) (*VersionList, error) {
	infos, err := s.origin.Versions(ctx, p)
	if err != nil {
		return nil, err
	}
	list := TranslateVersions(infos, func(raw string, err error) {
		s.log.Warn("origin lists an invalid version; skipped", "provider", p.String(), "version", raw, "error", err)
	})
	list.ListedAt = s.cfg.Now().UTC()
	prev, prevAt := s.previousListing(ctx, p)
	s.e.releases.noteListing(ctx, "provider", p.String(), prev.versionNames(), prevAt, list.versionNames())
	err = s.store.PutMeta(versionsKey(p), list)
	s.memo.forget(versionsKey(p))
	if err != nil {
		s.metrics.CacheWriteFailed()
		s.log.Error("storing version list", "provider", p.String(), "error", err)
	}
	s.e.shared.putShared(versionsKey(p), list)
	return list, nil
}

// cachedVersions returns the stored version list under key, from memory
// when it was read before. The list must not be modified.
func (s *providerRecords) cachedVersions(key string) (*VersionList, time.Time, error) {
	val, storedAt, gen, ok := s.memo.get(key)
	if ok {
		return val.(*VersionList), storedAt, nil
	}
	var list VersionList
	storedAt, err := s.store.GetMeta(key, &list)
	if err != nil {
		return nil, time.Time{}, err
	}
	if !knownSchema(list.Schema) {
		return nil, time.Time{}, fmt.Errorf("%w: version list of schema %d", cache.ErrNotFound, list.Schema)
	}
	s.memo.put(key, gen, &list, storedAt)
	return &list, storedAt, nil
}

// coalesce runs fn once for all concurrent callers with the same key, on a
// context detached from any one of them (the engine's). A caller whose own
// context ends stops waiting; the work goes on for the others.
func (s *Engine) coalesce(ctx context.Context, kind, key string, fn func(context.Context) (any, error)) (any, error) {
	var led atomic.Bool
	ch := s.meta.DoChan(key, func() (any, error) {
		led.Store(true)
		ctx, done, err := s.detached(s.cfg.OriginTimeout)
		if err != nil {
			return nil, err
		}
		defer done()
		return fn(ctx)
	})
	select {
	case res := <-ch:
		if !led.Load() {
			s.metrics.Coalesced(kind)
		}
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the origin: %w", ctx.Err())
	}
}

// previousListing returns the listing of p taken before the one being
// stored, and when it was taken: the cached list, or the shared tier's
// when it is newer (another replica listed since); nil when p was never
// listed.
func (s *providerRecords) previousListing(ctx context.Context, p addrs.Provider) (*VersionList, time.Time) {
	prev, prevAt, err := s.cachedVersions(versionsKey(p))
	if err != nil {
		prev = nil
	}
	if prev != nil && !prev.ListedAt.IsZero() {
		prevAt = prev.ListedAt
	}
	if shared, at, ok := s.e.shared.sharedVersions(ctx, versionsKey(p)); ok {
		if !shared.ListedAt.IsZero() {
			at = shared.ListedAt
		}
		if prev == nil || at.After(prevAt) {
			prev, prevAt = shared, at
		}
	}
	return prev, prevAt
}

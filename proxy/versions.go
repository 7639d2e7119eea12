package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
)

// versionList is a provider's version list as cached: refreshed after
// VersionsTTL, served stale when a refresh fails.
type versionList struct {
	Versions []versionEntry `json:"versions"`

	// index is the rendered index.json, made on first use: a list is not
	// modified once built or read, and remembered lists serve many requests.
	index struct {
		once sync.Once
		doc  document
	}
}

// indexJSON returns the list's index.json document.
func (l *versionList) indexJSON() document {
	l.index.once.Do(func() { l.index.doc = newDocument(renderJSON(newIndexDocument(l))) })
	return l.index.doc
}

type versionEntry struct {
	// Version is the canonical form clients use.
	Version string `json:"version"`
	// Origin is the string the origin used, when it differs ("1.2").
	Origin string `json:"origin,omitempty"`
	// Aliases are the origin's other spellings of the version, to ask
	// for a platform the first has no package for ("1.0" beside "1.0.0").
	Aliases   []string `json:"aliases,omitempty"`
	Platforms []string `json:"platforms"`
}

func (l *versionList) find(v versions.Version) (versionEntry, bool) {
	want := v.String()
	for _, e := range l.Versions {
		if e.Version == want {
			return e, true
		}
	}
	return versionEntry{}, false
}

// originVersion is the version string to use in origin requests.
func (e versionEntry) originVersion() string {
	if e.Origin != "" {
		return e.Origin
	}
	return e.Version
}

func versionsKey(p discovery.Provider) string { return "versions/" + p.String() }

// listState says where a version list came from.
type listState struct {
	stale    bool      // cached copy served because the refresh failed
	fetched  bool      // fetched from the origin for this call
	storedAt time.Time // when the list was fetched from the origin
}

// versions returns p's version list, from the cache while it is fresh and
// from the origin otherwise. When the refresh fails for any reason but the
// origin saying the provider does not exist, a cached list is returned
// marked stale. force refreshes a fresh list too.
func (s *Server) versions(ctx context.Context, p discovery.Provider, force bool) (*versionList, listState, error) {
	key := versionsKey(p)
	cached, storedAt, err := s.cachedVersions(key)
	haveCached := err == nil
	if err != nil && !errors.Is(err, cache.ErrNotFound) {
		s.log.Warn("reading cached version list", "provider", p.String(), "error", err)
	}
	if haveCached && (s.cfg.Offline || (!force && s.cfg.Now().Sub(storedAt) < s.cfg.VersionsTTL)) {
		s.metrics.CacheLookup("versions", true)
		return cached, listState{storedAt: storedAt}, nil
	}
	s.metrics.CacheLookup("versions", false)

	res, err := s.coalesce(ctx, "versions", key, func(ctx context.Context) (any, error) {
		return s.refreshVersions(ctx, p)
	})
	if err == nil {
		return res.(*versionList), listState{fetched: true, storedAt: s.cfg.Now()}, nil
	}
	if haveCached && !errors.Is(err, discovery.ErrNotFound) && ctx.Err() == nil {
		s.metrics.StaleServed("versions")
		s.log.Warn("origin failed, serving cached version list", "provider", p.String(), "stored_at", storedAt, "error", err)
		return cached, listState{stale: true, storedAt: storedAt}, nil
	}
	return nil, listState{}, err
}

func (s *Server) refreshVersions(ctx context.Context, p discovery.Provider) (*versionList, error) {
	infos, err := s.origin.Versions(ctx, p)
	if err != nil {
		return nil, err
	}
	list := translateVersions(infos, func(raw string, err error) {
		s.log.Warn("origin lists an invalid version; skipped", "provider", p.String(), "version", raw, "error", err)
	})
	err = s.store.PutMeta(versionsKey(p), list)
	s.memo.forget(versionsKey(p))
	if err != nil {
		s.metrics.CacheWriteFailed()
		s.log.Error("storing version list", "provider", p.String(), "error", err)
	}
	return list, nil
}

// cachedVersions returns the stored version list under key, from memory
// when it was read before. The list must not be modified.
func (s *Server) cachedVersions(key string) (*versionList, time.Time, error) {
	val, storedAt, gen, ok := s.memo.get(key)
	if ok {
		return val.(*versionList), storedAt, nil
	}
	var list versionList
	storedAt, err := s.store.GetMeta(key, &list)
	if err != nil {
		return nil, time.Time{}, err
	}
	s.memo.put(key, gen, &list, storedAt)
	return &list, storedAt, nil
}

// coalesce runs fn once for all concurrent callers with the same key, on a
// context detached from any one of them. A caller whose own context ends
// stops waiting; the work goes on for the others.
func (s *Server) coalesce(ctx context.Context, kind, key string, fn func(context.Context) (any, error)) (any, error) {
	var led atomic.Bool
	ch := s.meta.DoChan(key, func() (any, error) {
		led.Store(true)
		ctx, cancel := s.detached(ctx, s.cfg.OriginTimeout)
		defer cancel()
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

// Package providerlists keeps the providers' version lists: from the
// cache while they are fresh, from the tier shared with other replicas
// when the cache has none (on a sealed mirror, where the tier's is the
// later listing: mirror/sharedtier), and from the origin otherwise, one refresh at
// a time per provider, with the cached list served stale when the origin
// fails. Each listing taken is noted for the release times the package
// policy dates versions by (mirror/gate.Gate.NoteListing).
//
// It is a component the engine's provider records and the OCI documents
// take as a field: the version list that dates a version for the gate
// (Lists.CheckVersion) is read here, so that neither calls the engine
// back for it.
package providerlists

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/originguard"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// Origin is what the lists ask origin registries: a provider's versions.
type Origin interface {
	Versions(ctx context.Context, p addrs.Provider) (discovery.VersionList, error)
}

// Metrics receives what the lists observe (mirror.Metrics).
type Metrics interface {
	CacheLookup(kind string, hit bool)
	StaleServed(kind string)
	CacheWriteFailed()
}

// Config is the engine's settings the lists use (mirror.Config's,
// defaults filled in); all are required.
type Config struct {
	// Offline says the mirror is sealed: a cached list is served however
	// old (with a shared tier, the later listing of the cache's and the
	// tier's, which Parts.Records reads).
	Offline bool
	// VersionsTTL is how long a list is served before it is refreshed.
	VersionsTTL time.Duration
	// StaleAfter is how long a caller waits for a refresh when the cache
	// holds a list: then the cached list is served, stale, and the
	// refresh goes on for the next callers (mirror.Config.StaleAfter).
	StaleAfter time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
	// UnsignedHosts are the allowed origins whose in-house versions the
	// lists served hold (Parts.Withholding), in comparison form: the
	// lists of other hosts are served as stored, without asking.
	UnsignedHosts []string
}

// Parts are the engine's components the lists take; all are required.
type Parts struct {
	Life    *lifetime.Lifetime // coalescing of refreshes
	Hosts   *originguard.Hosts // the local-only hosts, never refreshed
	Records stored.Source      // the stored lists, read through the memo (and the lists other replicas took, when the engine composes the shared tier over it)
	Gate    *gate.Gate         // told of every listing taken; judges versions by the lists
	// Withholding adds the in-house versions of a host that takes
	// them to every list served (unsigned.Withholding.AddInHouse).
	Withholding *unsigned.Withholding
}

// Lists are the providers' version lists. Its methods are safe for
// concurrent use.
type Lists struct {
	cfg     Config
	parts   Parts
	origin  Origin
	metrics Metrics
}

// New returns the version lists of the providers.
func New(cfg Config, parts Parts, origin Origin, metrics Metrics) (*Lists, error) {
	if parts.Life == nil || parts.Hosts == nil || parts.Records == nil || parts.Gate == nil || parts.Withholding == nil ||
		origin == nil || metrics == nil || cfg.Now == nil || cfg.Logger == nil || cfg.VersionsTTL <= 0 || cfg.StaleAfter <= 0 {
		return nil, errors.New("providerlists: the engine's parts, an origin, metrics, a clock, a logger, a time to live and a wait for a refresh are required")
	}
	return &Lists{cfg: cfg, parts: parts, origin: origin, metrics: metrics}, nil
}

// State says where a version list came from.
type State struct {
	Stale    bool      // cached copy served because the refresh failed
	Fetched  bool      // fetched from the origin for this call
	StoredAt time.Time // when the list was fetched from the origin
	Err      error     // why the refresh failed, when stale
}

// Versions returns p's version list, from the cache while it is fresh and
// from the origin otherwise. When the refresh fails for any reason but the
// origin saying the provider does not exist, or has not ended within
// StaleAfter (clients give up on a JSON answer after 10 seconds), a cached
// list is returned marked stale; a refresh that goes on stores what it
// fetches for the next callers. force refreshes a fresh list too, and
// waits for the refresh as long as ctx lets it. k are the provider's
// keys, spelled once by the caller for its request. The list served
// holds the provider's in-house versions too (Parts.Withholding), which
// no listing of the origin names: those alone when the origin does not
// have the provider.
func (s *Lists) Versions(ctx context.Context, k records.ProviderKeys, force bool) (*records.VersionList, State, error) {
	list, st, err := s.versions(ctx, k, force)
	if !slices.Contains(s.cfg.UnsignedHosts, k.Provider.Hostname.String()) {
		return list, st, err
	}
	if errors.Is(err, discovery.ErrNotFound) {
		// An in-house provider the origin does not have: its versions.
		if l := s.parts.Withholding.AddInHouse(k.Provider, &records.VersionList{Schema: records.Schema}); len(l.Versions) > 0 {
			return l, State{Fetched: true, StoredAt: s.cfg.Now()}, nil
		}
	}
	if err != nil {
		return nil, st, err
	}
	return s.parts.Withholding.AddInHouse(k.Provider, list), st, nil
}

// versions is Versions, the list as stored.
func (s *Lists) versions(ctx context.Context, k records.ProviderKeys, force bool) (*records.VersionList, State, error) {
	p, key := k.Provider, k.Versions
	cached, storedAt, haveCached := s.parts.Records.Versions(ctx, key)
	fresh := !force && cached != nil && cached.Schema >= records.EvidenceSchema && !cached.Imported && records.Fresh(s.cfg.Now(), storedAt, s.cfg.VersionsTTL)
	if haveCached && (s.cfg.Offline || fresh || s.parts.Hosts.Local(p.Hostname)) {
		s.metrics.CacheLookup("versions", true)
		return cached, State{StoredAt: storedAt}, nil
	}
	s.metrics.CacheLookup("versions", false)

	// With nothing to serve instead, as long as ctx lets it; so too for a
	// refresh forced because the cached list lacks what was asked for,
	// which the cached list cannot answer.
	var wait time.Duration
	if haveCached && !force {
		wait = s.cfg.StaleAfter
	}
	var res any
	var err error
	for range maxWrites {
		res, err = s.parts.Life.CoalesceWithin(ctx, wait, "versions", key, func(ctx context.Context) (any, error) {
			// Again: a refresh that ended just before this one began
			// may have stored the origin's answer since.
			l, answers, none := s.refreshedSince(ctx, key, storedAt)
			if answers {
				return l, nil
			}
			return s.refresh(ctx, k, !none)
		})
		if !errors.Is(err, lifetime.ErrWritten) {
			break
		}
		// A write of the list in turn with its refreshes (an import's
		// addition, a removal's) was under way, and joined: what it
		// stored is no answer of the origin's (a version published
		// since is not in it). Refresh it now.
	}
	if err == nil {
		return res.(*records.VersionList), State{Fetched: true, StoredAt: s.cfg.Now()}, nil
	}
	if haveCached && !errors.Is(err, discovery.ErrNotFound) && ctx.Err() == nil {
		s.metrics.StaleServed("versions")
		s.parts.Life.LogStale(s.cfg.Logger, lifetime.StaleMessage(err, "version list"), "provider", k.Name, "stored_at", storedAt, "error", err)
		return cached, State{Stale: true, StoredAt: storedAt, Err: err}, nil
	}
	return nil, State{}, err
}

// maxWrites bounds how often a refresh joins a write of the list.
const maxWrites = 32

// refreshedSince reads the version list under key again, and returns it
// with answers set when a refresh stored it after seen, when the caller
// read the list it found expired, or lacking what it asked for (zero when
// it found none), and it is fresh: the origin's answer to a listing taken
// after the caller's read, which answers the caller's refresh, forced or
// not. A list an import wrote is no answer of the origin's (Imported);
// one a removal wrote keeps the time of storing of the list it took the
// version off, so it is taken only where that list would be. none says
// the cache holds no list under key, and nothing is stored beyond it: the
// refresh has no listing before it to read (previousListing).
func (s *Lists) refreshedSince(ctx context.Context, key string, seen time.Time) (l *records.VersionList, answers, none bool) {
	l, at, ok := s.parts.Records.Versions(ctx, key)
	if !ok {
		return nil, false, !s.parts.Records.Beyond()
	}
	answers = at.After(seen) && l.Schema >= records.EvidenceSchema && !l.Imported && records.Fresh(s.cfg.Now(), at, s.cfg.VersionsTTL)
	return l, answers, false
}

// refresh lists k's provider at its origin and stores the list. listed
// says a list may be stored that the listing follows (previousListing);
// false, the refresh found none as it began, and none is stored while it
// is under way (the list's other writers write in turn with it), so none
// is read again.
func (s *Lists) refresh(ctx context.Context, k records.ProviderKeys, listed bool) (*records.VersionList, error) {
	p := k.Provider
	answer, err := s.origin.Versions(ctx, p)
	if err != nil {
		return nil, err
	}
	// One line per listing, however many it skips (an origin's list may
	// hold a million), naming the first few, each cut short.
	var (
		skipped int
		such    []string
		first   string
	)
	list := records.TranslateVersions(answer.Versions, func(raw string, err error) {
		if skipped++; len(such) < 3 {
			such = append(such, shortened(raw))
		}
		if first == "" {
			first = shortened(err.Error())
		}
	})
	if skipped > 0 {
		s.cfg.Logger.Warn("origin lists invalid versions or platforms, or more than a version keeps; skipped", "provider", k.Name, "skipped", skipped, "such as", such, "error", first)
	}
	list.Warnings = answer.Warnings
	list.ListedAt = s.cfg.Now().UTC()
	var (
		prev   *records.VersionList
		prevAt time.Time
	)
	if listed {
		prev, prevAt = s.previousListing(ctx, k.Versions)
	}
	named, names := prev.Named(), list.Names()
	var prevDates map[string]time.Time
	if prev != nil {
		prevDates = prev.Dates
	}
	list.Lacked = records.Lacking(named, names)
	s.parts.Gate.NoteListing(ctx, "provider", k.Name, k.Versions, named, prevDates, prevAt, names)
	list.Dates = s.parts.Gate.ListingDates("provider", k.Name, list.Named())
	if err := s.parts.Records.Put(k.Versions, list); err != nil {
		s.metrics.CacheWriteFailed()
		s.cfg.Logger.Log(context.Background(), cache.WriteFailureLevel(err), "storing version list", "provider", k.Name, "error", err)
	}
	return list, nil
}

// previousListing returns the listing taken before the one being stored
// under key, and when it was taken: the newest of the stored lists (the
// cached one, or the shared tier's when another replica listed since);
// nil when the provider was never listed.
//
// It reads the stored list again rather than take the one Versions read
// before the refresh: the refresh is coalesced, so the list its caller
// read may be older than one another refresh stored since, and with a
// shared tier the tier's may be newer than the cache's, which Versions
// does not ask when the cache has one.
func (s *Lists) previousListing(ctx context.Context, key string) (*records.VersionList, time.Time) {
	prev, at, ok := s.parts.Records.Newest(ctx, key, new(records.VersionList))
	if !ok {
		return nil, time.Time{}
	}
	return prev.(*records.VersionList), at
}

// MinForcedRefresh keeps a client asking for unknown versions from
// making the mirror refetch a version list more often than this (Entry).
const MinForcedRefresh = time.Minute

// Entry finds the version k names in its version list, returns the list
// (it dates the version for the package policy) and says where it came
// from, refreshing a list that lacks it (a release newer than the cached
// list) when the list is at least MinForcedRefresh old. Only a list that
// the origin answered lately says that the version does not exist
// (records.ErrVersionNotFound): when the list could not be refreshed the
// error is why, and offline it is records.ErrOffline.
//
// Its caller asked the package policy first what it refuses whatever the
// version's release time is (gate.Gate.CheckUndated), as the list may be
// read from the origin: the engine's API, CheckVersion, or for the fetch
// of a package record, the caller that started it.
func (s *Lists) Entry(ctx context.Context, k records.VersionKeys) (records.VersionEntry, *records.VersionList, State, error) {
	p, v := k.Provider, k.Version
	list, st, err := s.Versions(ctx, k.ProviderKeys, false)
	if err != nil {
		return records.VersionEntry{}, nil, State{}, err
	}
	if e, ok := list.Find(v); ok {
		return e, list, st, nil
	}
	if !st.Stale && !st.Fetched && s.cfg.Now().Sub(st.StoredAt) >= MinForcedRefresh {
		list, st, err = s.Versions(ctx, k.ProviderKeys, true)
		if err != nil {
			return records.VersionEntry{}, nil, State{}, err
		}
		if e, ok := list.Find(v); ok {
			return e, list, st, nil
		}
	}
	switch {
	case st.Stale:
		return records.VersionEntry{}, nil, State{}, fmt.Errorf("%s has no version %s in its cached version list, which could not be refreshed: %w", p, v, st.Err)
	case s.cfg.Offline:
		return records.VersionEntry{}, nil, State{}, fmt.Errorf("%w: %s has no version %s in its cached version list", records.ErrOffline, p, v)
	}
	return records.VersionEntry{}, nil, State{}, fmt.Errorf("%w: %s has no version %s", records.ErrVersionNotFound, p, v)
}

// CheckVersion is the package policy's verdict on the version k names
// (gate.Gate.CheckProviderIn), with the version found in the provider's
// version list first (Entry) when the policy dates its versions
// (gate.Gate.DatesProvider): a version the list does not name is not
// found, not held as one whose release time is not known. The policy is
// asked once for a version it does not date: its verdict then needs no
// release time.
func (s *Lists) CheckVersion(ctx context.Context, k records.VersionKeys) error {
	var list *records.VersionList
	if s.parts.Gate.DatesProvider(k.Provider) {
		// What needs no release time decides before the list is read,
		// which may ask the origin (gate.Gate.CheckUndated).
		if err := s.parts.Gate.CheckUndated(policy.Provider, k.Name, k.Version.String()); err != nil {
			return err
		}
		_, l, _, err := s.Entry(ctx, k)
		if err != nil {
			return err
		}
		list = l
	}
	return s.parts.Gate.CheckProviderIn(ctx, k.Provider, k.Version, list)
}

// shortened is s cut to its first 128 bytes: what a log line keeps of a
// string an origin sent, which its answer's bounds let be megabytes.
func shortened(s string) string {
	if len(s) <= 128 {
		return s
	}
	return strings.ToValidUTF8(s[:128], "") + "..."
}

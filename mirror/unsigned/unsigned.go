// Package unsigned keeps unsigned imports in their lane. A version imported
// without any signature (an in-house build) is served under its address
// and checked against nothing; under an allowed origin's host it would
// be served as that origin's provider, shadowing it. So Import refuses
// such a version under an allowed origin unless the engine's
// configuration (mirror.Config.UnsignedHosts, the serving process's,
// never the caller's) names the host; and versions imported so by an earlier
// release, found at start, are withheld: not served, but kept, and
// listed by Withheld for the operator.
//
// A withheld import never takes a version away from the clients: the
// origin's own version of the same number is served as if the import
// were not there (listed as the origin lists it, its package metadata
// fetched and verified, its archives pulled through). The first fetch
// of it sets the import aside inside the origin's record
// (records.PackageRecord.Withheld), where it is kept, since it cannot be fetched
// again, and never served: retention and the size limit never evict its
// archives, and only a prune naming the version removes them (with the
// origin's, as the operator asked), leaving the origin's record without
// it. The set-aside import stays in this mirror's cache: it never goes
// to the shared store's bucket (mirror.Config.Shared), where imported records
// never go, and none is taken from there. Only a version the origin
// cannot give (a sealed mirror, a cached list that the import changed
// and that the origin has not answered since) is left out of version
// lists, and its package metadata answers records.ErrVersionNotFound.
//
// It holds the hosts whose unsigned imports are served, the versions
// imported so under them (in-house builds, which no listing of the
// origin names: added to every version list served, AddInHouse), and
// the versions withheld under the others; package mirror asks it on every answer and
// import, and lists what it withholds (with what the package policy
// holds back) in mirror.Engine.Withheld. It fetches nothing and stores
// nothing.
package unsigned

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
)

// ErrUnsignedOrigin: a version without signature under an allowed origin
// host that Config.UnsignedHosts does not name.
var ErrUnsignedOrigin = errors.New("version without signature under an allowed origin host")

// Version is a version the engine keeps, or would fetch, but
// does not serve: imported without signature under an allowed origin
// host that Config.UnsignedHosts does not name, or held back by the
// package policy (Rule set).
type Version struct {
	// Provider is the address: HOST/NAMESPACE/TYPE, or for a module
	// (Kind "module") HOST/NAMESPACE/NAME/SYSTEM.
	Provider string `json:"provider"`
	// Version is "" for an address the policy refuses whole.
	Version   string   `json:"version"`
	Platforms []string `json:"platforms"`
	// Kind is "module" for a module; "" for a provider.
	Kind string `json:"kind,omitempty"`
	// Rule is the policy's rule that holds it back (policy.Rule*), with
	// Reason for the people who hit it and, for the minimum release age,
	// AvailableAt when it becomes available; empty for a version
	// withheld as an unsigned import.
	Rule        string    `json:"rule,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	AvailableAt time.Time `json:"available_at,omitzero"`
}

// Withholding keeps unsigned imports in their lane (see the package
// doc): the allowed origins whose unsigned imports are served, and the
// versions withheld under the others. Its methods are safe for
// concurrent use once Find has returned.
type Withholding struct {
	cfg     Config
	recs    *stored.Records // the stored package records
	allowed map[svchost.Hostname]bool
	store   Store
	hosts   []string // Config.UnsignedHosts, canonical and sorted
	// unsigned are the allowed origins of Config.UnsignedHosts; withheld
	// the versions imported without signature under the others, found
	// at start and forgotten when a prune removes them, under withheldMu.
	unsigned map[svchost.Hostname]bool
	withheld map[string][]Version // by provider
	// inHouse are the versions imported without signature under the
	// allowed origins of Config.UnsignedHosts, by provider: served
	// beside the origin's versions (AddInHouse), which the origin's
	// list lacks. Under withheldMu.
	inHouse    map[string][]records.VersionEntry
	withheldMu sync.RWMutex
}

// Config is what Withholding reads of the engine's configuration
// (mirror.Config), its hosts canonical.
type Config struct {
	// AllowedOrigins are the allowed origin hosts; UnsignedHosts those
	// of them whose unsigned imports are served.
	AllowedOrigins []string
	UnsignedHosts  []string
	// Offline says the mirror is sealed: no origin gives a withheld
	// version's number in its place.
	Offline bool
	Logger  *slog.Logger
}

// Store is what Withholding reads of the cache. *cache.Store implements
// it.
type Store interface {
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
}

// New returns the withholding of an engine whose allowed origins are
// cfg.AllowedOrigins; each of cfg.UnsignedHosts must be one of them
// (hosts that are not take unsigned imports unnamed). Call Find before
// using it.
func New(cfg Config, recs *stored.Records, store Store) (*Withholding, error) {
	if recs == nil || store == nil || cfg.Logger == nil {
		return nil, errors.New("unsigned: the stored records, a store and a logger are required")
	}
	s := &Withholding{cfg: cfg, recs: recs, store: store, allowed: map[svchost.Hostname]bool{}, unsigned: map[svchost.Hostname]bool{}, inHouse: map[string][]records.VersionEntry{}}
	for _, h := range cfg.AllowedOrigins {
		s.allowed[svchost.Hostname(h)] = true
	}
	for _, h := range cfg.UnsignedHosts {
		host, err := addrs.ParseHost(strings.TrimSpace(h))
		if err != nil {
			return nil, fmt.Errorf("mirror: unsigned host %q: %w", h, err)
		}
		if !s.allowed[host] {
			return nil, fmt.Errorf("mirror: unsigned host %s is not an allowed origin (hosts that are not origins take imports without signature anyway)", host)
		}
		if !s.unsigned[host] {
			s.unsigned[host] = true
			s.hosts = append(s.hosts, host.String())
		}
	}
	slices.Sort(s.hosts)
	return s, nil
}

// UnsignedHosts are Config.UnsignedHosts in canonical form, sorted,
// each once.
func (s *Withholding) UnsignedHosts() []string { return slices.Clone(s.hosts) }

// UnsignedAllowed says whether versions without signature of providers
// of host may be imported and served.
func (s *Withholding) UnsignedAllowed(host svchost.Hostname) bool {
	return !s.allowed[host] || s.unsigned[host]
}

// Refused is Import's refusal of an unsigned version of p.
func Refused(p addrs.Provider) error {
	return fmt.Errorf("%w: %s is an allowed origin, and a version of %s imported without signature would be served as the origin's provider; to keep in-house builds under this host, name it in the serving tfmirror's --allow-unsigned-hosts",
		ErrUnsignedOrigin, p.Hostname, p)
}

// IsWithheld says rec, p's record of a version, is an import without
// signature that is withheld.
func (s *Withholding) IsWithheld(p addrs.Provider, rec *records.PackageRecord) bool {
	return rec.Provenance == records.ProvenanceUnsigned && !s.UnsignedAllowed(p.Hostname)
}

// Error is the answer for a version that is withheld.
func Error(p addrs.Provider, version string) error {
	return fmt.Errorf("%w: %w: %s %s was imported without signature under %s, an allowed origin, and is withheld (see --allow-unsigned-hosts)",
		records.ErrVersionNotFound, ErrUnsignedOrigin, p, version, p.Hostname)
}

// Find finds, once at start, the versions imported without
// signature under allowed origins that Config.UnsignedHosts does not
// name (Import refuses new ones, so the set does not grow), and logs
// them; and those under the allowed origins it names, the in-house
// versions (added to by InHouse).
func (s *Withholding) Find() error {
	s.withheldMu.Lock()
	defer s.withheldMu.Unlock()
	s.withheld = map[string][]Version{}
	s.inHouse = map[string][]records.VersionEntry{}
	for _, host := range s.cfg.AllowedOrigins {
		named := s.unsigned[svchost.Hostname(host)]
		prefix := "package/" + host + "/"
		err := s.store.ScanMeta(prefix, func(key string, _ time.Time, raw json.RawMessage) error {
			var rec records.PackageRecord
			if json.Unmarshal(raw, &rec) != nil || !records.KnownSchema(rec.Schema) {
				return nil
			}
			provider := strings.TrimSuffix(key, "/"+rec.Version)[len("package/"):]
			w := &rec
			switch {
			case rec.Withheld != nil:
				// Set aside for the origin's version, which is served
				// whatever the host's setting now.
				w = rec.Withheld
			case rec.Provenance != records.ProvenanceUnsigned:
				return nil
			case named:
				s.noteInHouse(provider, &rec)
				return nil
			}
			s.withheld[provider] = append(s.withheld[provider],
				Version{Provider: provider, Version: w.Version, Platforms: slices.Sorted(maps.Keys(w.Archives))})
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, vs := range s.withheld {
		for _, w := range vs {
			s.cfg.Logger.Warn("withholding a version imported without signature under an allowed origin host, which would shadow the origin's provider; to serve it, name the host in --allow-unsigned-hosts",
				"provider", w.Provider, "version", w.Version, "platforms", w.Platforms)
		}
	}
	return nil
}

// List returns the versions withheld, sorted by provider and version.
func (s *Withholding) List() []Version {
	var out []Version
	s.withheldMu.RLock()
	for _, vs := range s.withheld {
		out = append(out, vs...)
	}
	s.withheldMu.RUnlock()
	slices.SortFunc(out, func(a, b Version) int {
		if c := strings.Compare(a.Provider, b.Provider); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
	return out
}

// WithholdFrom returns list without p's withheld versions that the
// origin cannot give in their place; list itself when it has none. A
// list the origin gave (not changed by an import since) is the origin's:
// it keeps all its versions. Otherwise a version is left out while its
// record is still the import's (the origin's verified version of that
// number has not replaced it).
func (s *Withholding) WithholdFrom(p addrs.Provider, list *records.VersionList) *records.VersionList {
	s.withheldMu.RLock()
	vs := s.withheld[p.String()]
	s.withheldMu.RUnlock()
	if len(vs) == 0 || !list.Imported && !s.cfg.Offline {
		return list
	}
	keep := slices.DeleteFunc(slices.Clone(list.Versions), func(e records.VersionEntry) bool {
		if !slices.ContainsFunc(vs, func(w Version) bool { return w.Version == e.Version }) {
			return false
		}
		v, err := addrs.ParseSemver(e.Version)
		if err != nil {
			return true
		}
		rec, ok := s.recs.CachedPackage(p, v)
		return !ok || s.IsWithheld(p, rec)
	})
	if len(keep) == len(list.Versions) {
		return list
	}
	return list.WithVersions(keep)
}

// InHouse notes rec, p's record of a version just imported without
// signature, when p's host is an allowed origin of Config.UnsignedHosts:
// AddInHouse serves it from then on, whatever the origin lists.
func (s *Withholding) InHouse(p addrs.Provider, rec *records.PackageRecord) {
	if rec.Provenance != records.ProvenanceUnsigned || !s.allowed[p.Hostname] || !s.unsigned[p.Hostname] {
		return
	}
	s.withheldMu.Lock()
	defer s.withheldMu.Unlock()
	s.noteInHouse(p.String(), rec)
}

// noteInHouse adds rec's version to provider's in-house versions, or
// replaces the one noted before; under withheldMu, held for writing.
func (s *Withholding) noteInHouse(provider string, rec *records.PackageRecord) {
	e := records.VersionEntry{Version: rec.Version, Platforms: slices.Sorted(maps.Keys(rec.Archives))}
	vs := slices.DeleteFunc(slices.Clone(s.inHouse[provider]), func(have records.VersionEntry) bool { return have.Version == e.Version })
	s.inHouse[provider] = append(vs, e)
}

// AddInHouse returns list with p's in-house versions (InHouse) it lacks
// added, and every in-house version it holds named in its InHouse;
// list itself when p has none. The origin's list never names them (a
// listing of the origin replaces the list an import added them to), and
// they are served all the same: the operator named the host in
// Config.UnsignedHosts.
func (s *Withholding) AddInHouse(p addrs.Provider, list *records.VersionList) *records.VersionList {
	s.withheldMu.RLock()
	es := s.inHouse[p.String()]
	s.withheldMu.RUnlock()
	if len(es) == 0 {
		return list
	}
	vs := slices.Clone(list.Versions)
	named := make([]string, 0, len(es))
	for _, e := range es {
		named = append(named, e.Version)
		if !slices.ContainsFunc(list.Versions, func(have records.VersionEntry) bool { return have.Version == e.Version }) {
			vs = append(vs, e)
		}
	}
	out := list.WithVersions(vs)
	records.SortVersions(out.Versions)
	slices.Sort(named)
	out.InHouse = named
	return out
}

// Forget forgets p's withheld or in-house version v (as the origin
// spells it), once a prune naming it removed it.
func (s *Withholding) Forget(p addrs.Provider, version string) {
	s.withheldMu.Lock()
	defer s.withheldMu.Unlock()
	if es := slices.DeleteFunc(slices.Clone(s.inHouse[p.String()]), func(e records.VersionEntry) bool { return e.Version == version }); len(es) > 0 {
		s.inHouse[p.String()] = es
	} else {
		delete(s.inHouse, p.String())
	}
	vs := slices.DeleteFunc(slices.Clone(s.withheld[p.String()]), func(w Version) bool { return w.Version == version })
	if len(vs) == 0 {
		delete(s.withheld, p.String())
		return
	}
	s.withheld[p.String()] = vs
}

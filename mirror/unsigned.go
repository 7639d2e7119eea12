package mirror

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/mirror/records"
)

// This file keeps unsigned imports in their lane. A version imported
// without any signature (an in-house build) is served under its address
// and checked against nothing; under an allowed origin's host it would
// be served as that origin's provider, shadowing it. So Import refuses
// such a version under an allowed origin unless the engine's
// configuration (Config.UnsignedHosts, the serving process's, never the
// caller's) names the host; and versions imported so by an earlier
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
// to the shared store's bucket (Config.Shared), where imported records
// never go, and none is taken from there. Only a version the origin
// cannot give (a sealed mirror, a cached list that the import changed
// and that the origin has not answered since) is left out of version
// lists, and its package metadata answers records.ErrVersionNotFound.

// ErrUnsignedOrigin: a version without signature under an allowed origin
// host that Config.UnsignedHosts does not name.
var ErrUnsignedOrigin = errors.New("version without signature under an allowed origin host")

// WithheldVersion is a version imported without signature under an
// allowed origin host that Config.UnsignedHosts does not name: the engine
// keeps it but does not serve it.
type WithheldVersion struct {
	Provider  string   `json:"provider"` // HOST/NAMESPACE/TYPE
	Version   string   `json:"version"`
	Platforms []string `json:"platforms"`
}

// withholding keeps unsigned imports in their lane (see above): the
// allowed origins whose unsigned imports are served, and the versions
// withheld under the others.
type withholding struct {
	e       *Engine // its log and cached records
	cfg     *Config // the engine's
	allowed map[svchost.Hostname]bool
	store   Store
	// unsigned are the allowed origins of Config.UnsignedHosts; withheld
	// the versions imported without signature under the others, found
	// at start and forgotten when a prune removes them, under withheldMu.
	unsigned   map[svchost.Hostname]bool
	withheld   map[string][]WithheldVersion // by provider
	withheldMu sync.RWMutex
}

// setUnsignedHosts sets Config.UnsignedHosts; each must be an allowed
// origin (hosts that are not take unsigned imports unnamed).
func (s *withholding) setUnsignedHosts(hosts []string) error {
	s.unsigned = map[svchost.Hostname]bool{}
	s.cfg.UnsignedHosts = nil
	for _, h := range hosts {
		host, err := svchost.ForComparison(strings.TrimSpace(h))
		if err != nil {
			return fmt.Errorf("mirror: unsigned host %q: %w", h, err)
		}
		if !s.allowed[host] {
			return fmt.Errorf("mirror: unsigned host %s is not an allowed origin (hosts that are not origins take imports without signature anyway)", host)
		}
		if !s.unsigned[host] {
			s.unsigned[host] = true
			s.cfg.UnsignedHosts = append(s.cfg.UnsignedHosts, host.String())
		}
	}
	slices.Sort(s.cfg.UnsignedHosts)
	return nil
}

// unsignedAllowed says whether versions without signature of providers
// of host may be imported and served.
func (s *withholding) unsignedAllowed(host svchost.Hostname) bool {
	return !s.allowed[host] || s.unsigned[host]
}

// unsignedRefused is Import's refusal of an unsigned version of p.
func unsignedRefused(p addrs.Provider) error {
	return fmt.Errorf("%w: %s is an allowed origin, and a version of %s imported without signature would be served as the origin's provider; to keep in-house builds under this host, name it in the serving tfmirror's --allow-unsigned-hosts",
		ErrUnsignedOrigin, p.Hostname, p)
}

// isWithheld says rec, p's record of a version, is an import without
// signature that is withheld.
func (s *withholding) isWithheld(p addrs.Provider, rec *records.PackageRecord) bool {
	return rec.Provenance == records.ProvenanceUnsigned && !s.unsignedAllowed(p.Hostname)
}

// withheldError is the answer for a version that is withheld.
func withheldError(p addrs.Provider, version string) error {
	return fmt.Errorf("%w: %w: %s %s was imported without signature under %s, an allowed origin, and is withheld (see --allow-unsigned-hosts)",
		records.ErrVersionNotFound, ErrUnsignedOrigin, p, version, p.Hostname)
}

// findWithheld finds, once at start, the versions imported without
// signature under allowed origins that Config.UnsignedHosts does not
// name (Import refuses new ones, so the set does not grow), and logs
// them.
func (s *withholding) findWithheld() error {
	s.withheldMu.Lock()
	defer s.withheldMu.Unlock()
	s.withheld = map[string][]WithheldVersion{}
	for _, host := range s.cfg.AllowedOrigins {
		named := s.unsigned[svchost.Hostname(host)]
		prefix := "package/" + host + "/"
		err := s.store.ScanMeta(prefix, func(key string, _ time.Time, raw json.RawMessage) error {
			var rec records.PackageRecord
			if json.Unmarshal(raw, &rec) != nil || !records.KnownSchema(rec.Schema) {
				return nil
			}
			w := &rec
			switch {
			case rec.Withheld != nil:
				// Set aside for the origin's version, which is served
				// whatever the host's setting now.
				w = rec.Withheld
			case named || rec.Provenance != records.ProvenanceUnsigned:
				return nil
			}
			provider := strings.TrimSuffix(key, "/"+rec.Version)[len("package/"):]
			s.withheld[provider] = append(s.withheld[provider],
				WithheldVersion{Provider: provider, Version: w.Version, Platforms: sortedKeys(w.Archives)})
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, vs := range s.withheld {
		for _, w := range vs {
			s.e.log.Warn("withholding a version imported without signature under an allowed origin host, which would shadow the origin's provider; to serve it, name the host in --allow-unsigned-hosts",
				"provider", w.Provider, "version", w.Version, "platforms", w.Platforms)
		}
	}
	return nil
}

// Withheld returns the versions the engine keeps but does not serve:
// imported without signature (by an earlier release) under an allowed
// origin host that Config.UnsignedHosts does not name. Sorted by
// provider and version.
func (s *Engine) Withheld() []WithheldVersion { return s.withholding.list() }

// list is Engine.Withheld.
func (s *withholding) list() []WithheldVersion {
	var out []WithheldVersion
	s.withheldMu.RLock()
	for _, vs := range s.withheld {
		out = append(out, vs...)
	}
	s.withheldMu.RUnlock()
	slices.SortFunc(out, func(a, b WithheldVersion) int {
		if c := strings.Compare(a.Provider, b.Provider); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
	return out
}

// withholdFrom returns list without p's withheld versions that the
// origin cannot give in their place; list itself when it has none. A
// list the origin gave (not changed by an import since) is the origin's:
// it keeps all its versions. Otherwise a version is left out while its
// record is still the import's (the origin's verified version of that
// number has not replaced it).
func (s *withholding) withholdFrom(p addrs.Provider, list *records.VersionList) *records.VersionList {
	s.withheldMu.RLock()
	vs := s.withheld[p.String()]
	s.withheldMu.RUnlock()
	if len(vs) == 0 || !list.Imported && !s.cfg.Offline {
		return list
	}
	keep := slices.DeleteFunc(slices.Clone(list.Versions), func(e records.VersionEntry) bool {
		if !slices.ContainsFunc(vs, func(w WithheldVersion) bool { return w.Version == e.Version }) {
			return false
		}
		v, err := addrs.ParseSemver(e.Version)
		if err != nil {
			return true
		}
		rec, ok := s.e.records.cachedPackage(p, v)
		return !ok || s.isWithheld(p, rec)
	})
	if len(keep) == len(list.Versions) {
		return list
	}
	return &records.VersionList{Schema: list.Schema, Versions: keep, Imported: list.Imported}
}

// forgetWithheld forgets p's withheld version v (as the origin spells
// it), once a prune naming it removed it.
func (s *withholding) forgetWithheld(p addrs.Provider, version string) {
	s.withheldMu.Lock()
	defer s.withheldMu.Unlock()
	vs := slices.DeleteFunc(slices.Clone(s.withheld[p.String()]), func(w WithheldVersion) bool { return w.Version == version })
	if len(vs) == 0 {
		delete(s.withheld, p.String())
		return
	}
	s.withheld[p.String()] = vs
}

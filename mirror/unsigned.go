package mirror

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/discovery"
)

// This file keeps unsigned imports in their lane. A version imported
// without any signature (an in-house build) is served under its address
// and checked against nothing; under an allowed origin's host it would
// be served as that origin's provider, shadowing it. So Import refuses
// such a version under an allowed origin unless the engine's
// configuration (Config.UnsignedHosts, the serving process's, never the
// caller's) names the host; and versions imported so by an earlier
// release, found at start, are withheld: left out of version lists and
// not served, but kept, and listed by Withheld for the operator.

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

// setUnsignedHosts sets Config.UnsignedHosts; each must be an allowed
// origin (hosts that are not take unsigned imports unnamed).
func (s *Engine) setUnsignedHosts(hosts []string) error {
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
func (s *Engine) unsignedAllowed(host svchost.Hostname) bool {
	return !s.allowed[host] || s.unsigned[host]
}

// unsignedRefused is Import's refusal of an unsigned version of p.
func unsignedRefused(p discovery.Provider) error {
	return fmt.Errorf("%w: %s is an allowed origin, and a version of %s imported without signature would be served as the origin's provider; to keep in-house builds under this host, name it in the serving tfmirror's --allow-unsigned-hosts",
		ErrUnsignedOrigin, p.Hostname, p)
}

// withheldError is the answer for a version that is withheld.
func withheldError(p discovery.Provider, version string) error {
	return fmt.Errorf("%w: %w: %s %s was imported without signature under %s, an allowed origin, and is withheld (see --allow-unsigned-hosts)",
		ErrVersionNotFound, ErrUnsignedOrigin, p, version, p.Hostname)
}

// findWithheld finds, once at start, the versions imported without
// signature under allowed origins that Config.UnsignedHosts does not
// name (Import refuses new ones, so the set does not grow), and logs
// them.
func (s *Engine) findWithheld() error {
	s.withheld = map[string][]WithheldVersion{}
	for _, host := range s.cfg.AllowedOrigins {
		if s.unsigned[svchost.Hostname(host)] {
			continue
		}
		prefix := "package/" + host + "/"
		err := s.store.ScanMeta(prefix, func(key string, _ time.Time, raw json.RawMessage) error {
			var rec PackageRecord
			if json.Unmarshal(raw, &rec) != nil || !knownSchema(rec.Schema) || rec.Provenance != ProvenanceUnsigned {
				return nil
			}
			provider := strings.TrimSuffix(key, "/"+rec.Version)[len("package/"):]
			s.withheld[provider] = append(s.withheld[provider],
				WithheldVersion{Provider: provider, Version: rec.Version, Platforms: sortedKeys(rec.Archives)})
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, vs := range s.withheld {
		for _, w := range vs {
			s.log.Warn("withholding a version imported without signature under an allowed origin host, which would shadow the origin's provider; to serve it, name the host in --allow-unsigned-hosts",
				"provider", w.Provider, "version", w.Version, "platforms", w.Platforms)
		}
	}
	return nil
}

// Withheld returns the versions the engine keeps but does not serve:
// imported without signature (by an earlier release) under an allowed
// origin host that Config.UnsignedHosts does not name. Sorted by
// provider and version.
func (s *Engine) Withheld() []WithheldVersion {
	var out []WithheldVersion
	for _, vs := range s.withheld {
		out = append(out, vs...)
	}
	slices.SortFunc(out, func(a, b WithheldVersion) int {
		if c := strings.Compare(a.Provider, b.Provider); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
	return out
}

// withholdFrom returns list without p's withheld versions; list itself
// when it has none.
func (s *Engine) withholdFrom(p discovery.Provider, list *VersionList) *VersionList {
	vs := s.withheld[p.String()]
	if len(vs) == 0 {
		return list
	}
	keep := slices.DeleteFunc(slices.Clone(list.Versions), func(e VersionEntry) bool {
		return slices.ContainsFunc(vs, func(w WithheldVersion) bool { return w.Version == e.Version })
	})
	if len(keep) == len(list.Versions) {
		return list
	}
	return &VersionList{Schema: list.Schema, Versions: keep, Imported: list.Imported}
}

package mirror

// What the engine tells of the versions it holds, and lets go of, for the
// retention rules kept above it (package retention): the versions it has
// records of, with their archives and whether they can be fetched again;
// notifications of what it serves and imports; and the removal of a
// version that cannot be fetched again.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/cache"
)

// Notifier is told what the engine does with the versions it holds
// (Held.Notify; package retention implements it). Its methods are
// called on the request path: they must not block.
type Notifier interface {
	// Used says a client asked for a package of the version whose record
	// is keyed key (HeldVersion.Key).
	Used(key string)
	// Serving says the archive sha of version v of address (kind
	// "provider" or "module") is about to be served, and fetched first
	// when it is not cached.
	Serving(kind, address string, v versions.Version, sha string)
	// Importing says the archive sha is about to be committed by an
	// import: it cannot be fetched again.
	Importing(sha string)
	// Changed says an import ended: records of versions that cannot be
	// fetched again may have been written.
	Changed()
}

// notifier holds the engine's Notifier (none until Held.Notify).
type notifier struct{ n atomic.Pointer[Notifier] }

func (h *notifier) get() Notifier {
	if p := h.n.Load(); p != nil {
		return *p
	}
	return noNotifier{}
}

type noNotifier struct{}

func (noNotifier) Used(string)                                      {}
func (noNotifier) Serving(string, string, versions.Version, string) {}
func (noNotifier) Importing(string)                                 {}
func (noNotifier) Changed()                                         {}

// Held is what the engine tells of the versions it holds, and lets go
// of, for the retention rules kept above it: its listings (ScanVersions,
// VersionOfRecord), its notifications (Notify) and its removals
// (RemoveVersion, DropSetAside). Engine.Held returns it.
type Held struct {
	e     *Engine // the notifier, the import lock, records, withholding
	cfg   *Config // the engine's, defaults filled in
	store Store
	memo  *metaMemo
}

// Config returns the engine's configuration in effect (Engine.Config),
// which retention reads its clock, logger and tiers from.
func (s *Held) Config() Config { return s.e.Config() }

// Notify makes the engine tell n what it serves and imports from now on.
// An engine has one Notifier: Notify fails when it has one already.
func (s *Held) Notify(n Notifier) error {
	if n == nil {
		return errors.New("mirror: a nil Notifier")
	}
	if !s.e.notify.n.CompareAndSwap(nil, &n) {
		return errors.New("mirror: the engine has a Notifier already")
	}
	return nil
}

// HeldVersion is a version the engine has a record of.
type HeldVersion struct {
	Kind    string // "provider" or "module"
	Address string // HOST/NAMESPACE/TYPE or HOST/NAMESPACE/NAME/SYSTEM
	Version versions.Version
	// Raw is the version as keyed (modules: the origin's spelling).
	Raw string
	// Key is the record's key (package/ADDR/V or module/ADDR/V), as
	// Notifier.Used gives it.
	Key string
	// Archives are the sha256s of the version's packages, in platform
	// order.
	Archives []string
	// SetAside are the sha256s of the withheld import set aside in the
	// record (PackageRecord.Withheld), which cannot be fetched again.
	SetAside []string
	// Refetch says the version can be fetched again: not imported, not of
	// a local-only host or a module without origin location, not on a
	// sealed mirror.
	Refetch bool
}

// VersionRecordPrefixes are the key prefixes of the records of versions,
// of providers and of modules: in the cache, and in the shared store's
// bucket, whose keys are the cache's.
func VersionRecordPrefixes() []string { return []string{"package/", "module/"} }

// ScanVersions calls fn with every version the cache has a record of, of
// providers and then of modules.
func (s *Held) ScanVersions(fn func(HeldVersion)) error {
	for _, prefix := range VersionRecordPrefixes() {
		err := s.store.ScanMeta(prefix, func(key string, _ time.Time, raw json.RawMessage) error {
			if h, ok := s.VersionOfRecord(key, raw); ok {
				fn(h)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// VersionOfRecord is the version of the record raw stored under key, read
// from the cache or from the shared store's bucket (whose keys are the
// cache's); false for what is not a record of a version.
func (s *Held) VersionOfRecord(key string, raw json.RawMessage) (HeldVersion, bool) {
	switch {
	case strings.HasPrefix(key, "package/"):
		p, rec, ok := packageSummary(key, raw)
		if !ok {
			return HeldVersion{}, false
		}
		v, err := addrs.ParseSemver(rec.Version)
		if err != nil {
			return HeldVersion{}, false
		}
		h := HeldVersion{Kind: "provider", Address: p.String(), Version: v, Raw: rec.Version, Key: key}
		for _, pl := range sortedKeys(rec.Archives) {
			h.Archives = append(h.Archives, rec.Archives[pl].SHA256)
		}
		if rec.Withheld != nil {
			for _, pl := range sortedKeys(rec.Withheld.Archives) {
				h.SetAside = append(h.SetAside, rec.Withheld.Archives[pl].SHA256)
			}
		}
		imported := rec.Provenance != ProvenanceOrigin
		h.Refetch = !s.cfg.Offline && !imported && !s.e.local(p.Hostname)
		return h, true
	case strings.HasPrefix(key, "module/"):
		var rec ModuleRecord
		if json.Unmarshal(raw, &rec) != nil || !knownSchema(rec.Schema) || rec.SHA256 == "" {
			return HeldVersion{}, false
		}
		v, err := versions.ParseVersion(strings.TrimPrefix(rec.Version, "v"))
		if err != nil {
			return HeldVersion{}, false
		}
		// An imported module version (from a bundle, or a local module
		// without origin location) is not fetched again, as imported
		// providers are not.
		h := HeldVersion{Kind: "module", Address: rec.Module, Version: v, Raw: rec.Version, Key: key,
			Archives: []string{rec.SHA256}}
		h.Archives = append(h.Archives, s.moduleZipBlobs(rec)...)
		imported := rec.Provenance != ProvenanceOrigin
		h.Refetch = !s.cfg.Offline && !imported && rec.Location != ""
		return h, true
	}
	return HeldVersion{}, false
}

// recordSummary is what VersionOfRecord reads of a PackageRecord: not
// the evidence documents.
type recordSummary struct {
	Schema   int    `json:"schema"`
	Version  string `json:"version"`
	Archives map[string]struct {
		SHA256 string `json:"sha256"`
	} `json:"archives"`
	Provenance Provenance `json:"provenance,omitempty"`
	Withheld   *struct {
		Archives map[string]struct {
			SHA256 string `json:"sha256"`
		} `json:"archives"`
	} `json:"withheld,omitempty"`
}

// packageSummary decodes raw, the package record stored under key, and
// the provider the key names; false for what is not a package record of
// a known schema.
func packageSummary(key string, raw json.RawMessage) (addrs.Provider, recordSummary, bool) {
	var rec recordSummary
	if json.Unmarshal(raw, &rec) != nil || !knownSchema(rec.Schema) {
		return addrs.Provider{}, rec, false
	}
	p, ok := parseProviderKey(strings.TrimSuffix(strings.TrimPrefix(key, "package/"), "/"+rec.Version))
	return p, rec, ok
}

// RemoveVersion removes version (as HeldVersion.Raw gives it) of address
// (kind "provider" or "module") from its version list and deletes its
// record, with the withheld import set aside in it, so that it is no
// longer listed: for a version that cannot be fetched again, once its
// archives are removed.
func (s *Held) RemoveVersion(kind, address, version string) error {
	s.e.importMu.Lock() // not while an import writes the same list
	defer s.e.importMu.Unlock()
	if kind == "module" {
		m, err := addrs.ParseModule(address)
		if err != nil {
			return err
		}
		key := moduleRecordKey(m, version)
		err = s.store.DeleteMeta(key)
		s.memo.forget(key)
		if zerr := s.store.DeleteMeta(moduleZipKey(m, version)); err == nil && !errors.Is(zerr, cache.ErrNotFound) {
			err = zerr
		}
		return err
	}
	p, ok := parseProviderKey(address)
	if !ok {
		return fmt.Errorf("provider address %q", address)
	}
	v, err := addrs.ParseSemver(version)
	if err != nil {
		return err
	}
	key := versionsKey(p)
	if list, _, err := s.e.records.cachedVersions(key); err == nil {
		nl := &VersionList{Schema: list.Schema, Imported: list.Imported}
		for _, e := range list.Versions {
			if e.Version != v.String() {
				nl.Versions = append(nl.Versions, e)
			}
		}
		if nl.Versions == nil {
			nl.Versions = []VersionEntry{}
		}
		err := s.store.PutMeta(key, nl)
		s.memo.forget(key)
		if err != nil {
			return err
		}
	}
	pkey := packageKey(p, v)
	err = s.store.DeleteMeta(pkey)
	s.memo.forget(pkey)
	if err == nil {
		s.e.withholding.forgetWithheld(p, version)
	}
	return err
}

// DropSetAside removes the withheld import set aside in the record of
// version of the provider address (PackageRecord.Withheld), once its
// archives are removed: the record stays the origin's, without it.
func (s *Held) DropSetAside(address, version string) error {
	s.e.importMu.Lock() // as RemoveVersion
	defer s.e.importMu.Unlock()
	p, ok := parseProviderKey(address)
	if !ok {
		return fmt.Errorf("provider address %q", address)
	}
	v, err := addrs.ParseSemver(version)
	if err != nil {
		return err
	}
	key := packageKey(p, v)
	var rec PackageRecord
	if _, err := s.store.GetMeta(key, &rec); err != nil {
		return err
	}
	if rec.Withheld != nil {
		rec.Withheld = nil
		err = s.store.PutMeta(key, &rec)
		s.memo.forget(key)
		if err != nil {
			return err
		}
	}
	s.e.withholding.forgetWithheld(p, version)
	return nil
}

// parseProviderKey parses HOST/NAMESPACE/TYPE as the engine writes it in
// its keys.
func parseProviderKey(s string) (addrs.Provider, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return addrs.Provider{}, false
	}
	h, err := svchost.ForComparison(parts[0])
	if err != nil {
		return addrs.Provider{}, false
	}
	return addrs.Provider{Hostname: h, Namespace: parts[1], Type: parts[2]}, true
}

// Package inventory is what the engine tells of the versions it holds, and
// lets go of, for the retention rules kept above it (package retention):
// the versions it has records of, with their archives and whether they
// can be fetched again (ScanVersions, VersionOfRecord), what it does with
// them (Notifier), and the removal of a version that cannot be fetched
// again (RemoveVersion, DropSetAside), and the package policy's view of
// what it holds (Policy, KnownRelease, StoredVerdict).
//
// It decides nothing of what is kept: retention does, on
// mirror.Engine.Inventory, which adds the engine's configuration and Notify.
package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// Notifier is told what the engine does with the versions it holds
// (mirror.Inventory.Notify; package retention implements it): the
// engine's lifetime holds it (lifetime.Notifier).
type Notifier = lifetime.Notifier

// Record is a version the engine has a record of.
type Record struct {
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
	// record (records.PackageRecord.Withheld), which cannot be fetched again.
	SetAside []string
	// Refetch says the version can be fetched again: not imported, not of
	// a local-only host or a module without origin location, not on a
	// sealed mirror.
	Refetch bool
}

// Inventory lists the versions the engine holds, and removes them.
// mirror.Engine.Inventory returns the engine's, within a mirror.Inventory.
type Inventory struct {
	life  *lifetime.Lifetime // the import lock
	e     Engine
	store Store
}

// Engine is what Inventory uses of the engine. Package mirror implements it.
type Engine interface {
	// Offline says the mirror is sealed; Local that host is local-only
	// (its providers are imported, never fetched).
	Offline() bool
	Local(host svchost.Hostname) bool
	// CachedVersions reads a stored version list; Forget drops what the
	// engine's memo holds under key once it was written.
	CachedVersions(key string) (*records.VersionList, time.Time, error)
	Forget(key string)
	// ForgetWithheld forgets p's withheld version, once removed.
	ForgetWithheld(p addrs.Provider, version string)
	// RemoveOCI deletes the OCI records of version v of p, whose
	// archives' sha256s are archives (see mirror/ocistore.RemoveVersion).
	RemoveOCI(p addrs.Provider, v versions.Version, archives []string) error
	// Policy is the package policy in effect (nil: everything allowed);
	// KnownRelease what the engine knows of a version's release (see
	// Inventory.KnownRelease); Now the engine's clock.
	Policy() *policy.Policy
	KnownRelease(ctx context.Context, kind policy.Kind, address, version string, window time.Duration) (policy.Release, error)
	Now() time.Time
}

// Store is what Inventory reads and removes of the cache's records.
// *cache.Store implements it.
type Store interface {
	GetMeta(key string, v any) (time.Time, error)
	PutMeta(key string, v any) error
	DeleteMeta(key string) error
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
}

// New returns Inventory on the engine e and its store.
func New(life *lifetime.Lifetime, e Engine, store Store) (*Inventory, error) {
	if e == nil || store == nil {
		return nil, errors.New("held: the engine and its store are required")
	}
	return &Inventory{life: life, e: e, store: store}, nil
}

// VersionRecordPrefixes are the key prefixes of the records of versions,
// of providers and of modules: in the cache, and in the shared store's
// bucket, whose keys are the cache's.
func VersionRecordPrefixes() []string { return []string{"package/", "module/"} }

// ScanVersions calls fn with every version the cache has a record of, of
// providers and then of modules.
func (s *Inventory) ScanVersions(fn func(Record)) error {
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
func (s *Inventory) VersionOfRecord(key string, raw json.RawMessage) (Record, bool) {
	switch {
	case strings.HasPrefix(key, "package/"):
		p, rec, ok := records.PackageSummary(key, raw)
		if !ok {
			return Record{}, false
		}
		v, err := addrs.ParseSemver(rec.Version)
		if err != nil {
			return Record{}, false
		}
		h := Record{Kind: "provider", Address: p.String(), Version: v, Raw: rec.Version, Key: key}
		for _, pl := range sortedKeys(rec.Archives) {
			h.Archives = append(h.Archives, rec.Archives[pl].SHA256)
		}
		if rec.Withheld != nil {
			for _, pl := range sortedKeys(rec.Withheld.Archives) {
				h.SetAside = append(h.SetAside, rec.Withheld.Archives[pl].SHA256)
			}
		}
		imported := rec.Provenance != records.ProvenanceOrigin
		h.Refetch = !s.e.Offline() && !imported && !s.e.Local(p.Hostname)
		return h, true
	case strings.HasPrefix(key, "module/"):
		var rec records.ModuleRecord
		if json.Unmarshal(raw, &rec) != nil || !records.KnownSchema(rec.Schema) || rec.SHA256 == "" {
			return Record{}, false
		}
		v, err := versions.ParseVersion(strings.TrimPrefix(rec.Version, "v"))
		if err != nil {
			return Record{}, false
		}
		// An imported module version (from a bundle, or a local module
		// without origin location) is not fetched again, as imported
		// providers are not.
		h := Record{Kind: "module", Address: rec.Module, Version: v, Raw: rec.Version, Key: key,
			Archives: []string{rec.SHA256}}
		h.Archives = append(h.Archives, s.moduleZipBlobs(rec)...)
		imported := rec.Provenance != records.ProvenanceOrigin
		h.Refetch = !s.e.Offline() && !imported && rec.Location != ""
		return h, true
	}
	return Record{}, false
}

// moduleZipBlobs returns the sha256 of the zip made of the module
// version of rec (mirror/modules.Zips), when one was recorded: a blob of
// the version's, for retention, removed with it.
func (s *Inventory) moduleZipBlobs(rec records.ModuleRecord) []string {
	m, err := addrs.ParseModule(rec.Module)
	if err != nil {
		return nil
	}
	var zr records.ModuleZipRecord
	if _, err := s.store.GetMeta(records.ModuleZipKey(m, rec.Version), &zr); err != nil || !records.KnownSchema(zr.Schema) || zr.Package != rec.SHA256 {
		return nil
	}
	return []string{zr.SHA256}
}

// RemoveVersion removes version (as Version.Raw gives it) of address
// (kind "provider" or "module") from its version list and deletes its
// record, with the withheld import set aside in it (a module version's,
// with the record of its zip), so that it is no longer listed: for a
// version that cannot be fetched again, once its archives are removed. A
// provider version's OCI records (the documents handed out for it, by
// digest) go with it.
func (s *Inventory) RemoveVersion(kind, address, version string) error {
	s.life.Imports().Lock() // not while an import writes the same list
	defer s.life.Imports().Unlock()
	if kind == "module" {
		m, err := addrs.ParseModule(address)
		if err != nil {
			return err
		}
		key := records.ModuleRecordKey(m, version)
		err = s.store.DeleteMeta(key)
		s.e.Forget(key)
		if zerr := s.store.DeleteMeta(records.ModuleZipKey(m, version)); err == nil && !errors.Is(zerr, cache.ErrNotFound) {
			err = zerr
		}
		return err
	}
	p, v, err := parseProviderVersion(address, version)
	if err != nil {
		return err
	}
	key := records.VersionsKey(p)
	if list, _, err := s.e.CachedVersions(key); err == nil {
		nl := &records.VersionList{Schema: list.Schema, Imported: list.Imported}
		for _, e := range list.Versions {
			if e.Version != v.String() {
				nl.Versions = append(nl.Versions, e)
			}
		}
		if nl.Versions == nil {
			nl.Versions = []records.VersionEntry{}
		}
		err := s.store.PutMeta(key, nl)
		s.e.Forget(key)
		if err != nil {
			return err
		}
	}
	pkey := records.PackageKey(p, v)
	var rec records.PackageRecord
	if _, err := s.store.GetMeta(pkey, &rec); err != nil && !errors.Is(err, cache.ErrNotFound) {
		return err
	}
	var shas []string
	for _, pl := range sortedKeys(rec.Archives) {
		shas = append(shas, rec.Archives[pl].SHA256)
	}
	if err := s.e.RemoveOCI(p, v, shas); err != nil {
		return err
	}
	err = s.store.DeleteMeta(pkey)
	s.e.Forget(pkey)
	if err == nil {
		s.e.ForgetWithheld(p, version)
	}
	return err
}

// parseProviderVersion parses a provider address as the listings give it
// and a version.
func parseProviderVersion(address, version string) (addrs.Provider, versions.Version, error) {
	p, ok := records.ParseProviderKey(address)
	if !ok {
		return addrs.Provider{}, versions.Version{}, fmt.Errorf("provider address %q", address)
	}
	v, err := addrs.ParseSemver(version)
	return p, v, err
}

// DropSetAside removes the withheld import set aside in the record of
// version of the provider address (records.PackageRecord.Withheld), once its
// archives are removed: the record stays the origin's, without it.
func (s *Inventory) DropSetAside(address, version string) error {
	s.life.Imports().Lock() // as RemoveVersion
	defer s.life.Imports().Unlock()
	p, v, err := parseProviderVersion(address, version)
	if err != nil {
		return err
	}
	key := records.PackageKey(p, v)
	var rec records.PackageRecord
	if _, err := s.store.GetMeta(key, &rec); err != nil {
		return err
	}
	if rec.Withheld != nil {
		rec.Withheld = nil
		err = s.store.PutMeta(key, &rec)
		s.e.Forget(key)
		if err != nil {
			return err
		}
	}
	s.e.ForgetWithheld(p, version)
	return nil
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	return slices.Sorted(maps.Keys(m))
}

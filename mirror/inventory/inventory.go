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
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/ocistore"
	"github.com/tfmirror/tfmirror/v2/mirror/originguard"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
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
	// Refetch says the version can be fetched again: not imported, of a
	// host that is an allowed origin (not a local-only one, nor one taken
	// off the allowed origins since), not a module without origin
	// location, not on a sealed mirror. Some of its archives may still
	// not be: Unfetchable.
	Refetch bool
	// Unfetchable are the sha256s of Archives that cannot be fetched
	// again although the version can (Refetch): packages an import added
	// to a version the origin's record holds, which have no download URL.
	// Whether an archive can be fetched again is Refetchable's to say.
	Unfetchable []string
}

// Refetchable says whether the archive sha of the version can be fetched
// again once removed: the version can (Refetch), and sha is not one of
// its Unfetchable archives.
func (r Record) Refetchable(sha string) bool {
	return r.Refetch && !slices.Contains(r.Unfetchable, sha)
}

// Inventory lists the versions the engine holds, and removes them.
// mirror.Engine.Inventory returns the engine's, within a mirror.Inventory.
type Inventory struct {
	cfg   Config
	parts Parts
	store Store
}

// Config configures an Inventory.
type Config struct {
	// Offline says the mirror is sealed: nothing removed is fetched again.
	Offline bool
	// Now is the engine's clock. Required.
	Now func() time.Time
}

// Parts are the engine's components that Inventory reads and tells of
// removals; all are required.
type Parts struct {
	Life        *lifetime.Lifetime    // the import lock (no removal while an import writes), the coalescing of a list's refreshes (the removal writes in turn with them)
	Records     *stored.Records       // the memo of the stored records, forgotten after a write
	Source      stored.Source         // the version lists served: the cache's, else the shared tier's (when the engine composes it)
	Hosts       *originguard.Hosts    // the local-only hosts, whose versions are not fetched again
	Withholding *unsigned.Withholding // the withheld versions, forgotten once removed
	OCI         *ocistore.Sides       // the OCI records of a removed version
	Gate        *gate.Gate            // the package policy and the release times it judges by
}

// Store is what Inventory uses of the cache. *cache.Store implements it.
type Store interface {
	GetMeta(key string, v any) (time.Time, error)
	PutMeta(key string, v any) error
	PutMetaAt(key string, v any, at time.Time) error
	DeleteMeta(key string) error
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
}

// New returns the Inventory of an engine's parts and store.
func New(cfg Config, parts Parts, store Store) (*Inventory, error) {
	if parts.Life == nil || parts.Records == nil || parts.Source == nil || parts.Hosts == nil || parts.Withholding == nil || parts.OCI == nil ||
		parts.Gate == nil || store == nil || cfg.Now == nil {
		return nil, errors.New("inventory: the engine's parts, its store and a clock are required")
	}
	return &Inventory{cfg: cfg, parts: parts, store: store}, nil
}

// VersionRecordPrefixes are the key prefixes of the records of versions,
// of providers and of modules: in the cache, and in the shared store's
// bucket, whose keys are the cache's.
func VersionRecordPrefixes() []string { return []string{"package/", "module/"} }

// KindUnreadable is the Kind of a Record ScanVersions gives for a record
// of a version it cannot read: of a schema a newer release wrote (after a
// rollback), or damaged. Its Address is its key, it has no version, and
// its Archives are every sha256 its text holds: it may be the only record
// of packages that cannot be fetched again, so it is never taken as
// one that can (Refetch is false), and what it may name is kept.
const KindUnreadable = "unreadable"

// ScanVersions calls fn with every version the cache has a record of, of
// providers and then of modules, and with a KindUnreadable Record for
// every record under their prefixes that it cannot read.
func (s *Inventory) ScanVersions(fn func(Record)) error {
	for _, prefix := range VersionRecordPrefixes() {
		err := s.store.ScanMeta(prefix, func(key string, _ time.Time, raw json.RawMessage) error {
			if h, ok := s.VersionOfRecord(key, raw); ok {
				fn(h)
			} else {
				fn(Unreadable(key, raw))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Unreadable is the KindUnreadable Record of the record raw under key,
// which its lister cannot read: every sha256 its text holds is kept.
// Listers of other records of versions (CLI releases) give it too.
func Unreadable(key string, raw json.RawMessage) Record {
	return Record{Kind: KindUnreadable, Address: key, Key: key, Archives: sha256sIn(raw)}
}

// sha256sIn returns every sha256 (64 lowercase hex digits, no more) the
// text raw holds, once each.
func sha256sIn(raw []byte) []string {
	var out []string
	for _, run := range hexRun.FindAll(raw, -1) {
		if w := string(run); sha256hex.Valid(w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// hexRun is a run of hex digits, as long as it goes.
var hexRun = regexp.MustCompile(`[0-9a-fA-F]+`)

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
		// Nor is one of a host that is no longer an allowed origin (the
		// engine serves what it cached of it, and fetches nothing more),
		// nor of a local-only host, which is none either.
		imported := rec.Provenance != records.ProvenanceOrigin
		h.Refetch = !s.cfg.Offline && !imported && s.parts.Hosts.Allowed(p.Hostname)
		for _, pl := range sortedKeys(rec.Archives) {
			a := rec.Archives[pl]
			h.Archives = append(h.Archives, a.SHA256)
			// A package an import added to the origin's record has no
			// download URL (mirror/imports.Importer.storeImported): the
			// record's provenance is the origin's, not the package's.
			if h.Refetch && a.URL == "" {
				h.Unfetchable = append(h.Unfetchable, a.SHA256)
			}
		}
		if rec.Withheld != nil {
			for _, pl := range sortedKeys(rec.Withheld.Archives) {
				h.SetAside = append(h.SetAside, rec.Withheld.Archives[pl].SHA256)
			}
		}
		return h, true
	case strings.HasPrefix(key, "module/"):
		// A record today's rules refuse (records.ErrModuleRecordRefused)
		// is not served, and is the operator's to remove all the same.
		var rec records.ModuleRecord
		if err := json.Unmarshal(raw, &rec); (err != nil && !errors.Is(err, records.ErrModuleRecordRefused)) || !records.KnownSchema(rec.Schema) || rec.SHA256 == "" {
			return Record{}, false
		}
		v, err := addrs.ParseModuleVersion(rec.Version)
		if err != nil {
			return Record{}, false
		}
		// An imported module version (from a bundle, or a local module
		// without origin location) is not fetched again, as imported
		// providers are not; nor is one of a local-only host, which is
		// never contacted (mirror/modules.Modules.fetchable), or of a host
		// that is no longer an allowed origin.
		h := Record{Kind: "module", Address: rec.Module, Version: v, Raw: rec.Version, Key: key,
			Archives: []string{rec.SHA256}}
		h.Archives = append(h.Archives, s.moduleZipBlobs(rec, v)...)
		imported := rec.Provenance != records.ProvenanceOrigin
		m, err := addrs.ParseModule(rec.Module)
		h.Refetch = !s.cfg.Offline && !imported && rec.Location != "" && err == nil && s.parts.Hosts.Allowed(m.Hostname)
		return h, true
	}
	return Record{}, false
}

// moduleZipBlobs returns the sha256 of the zip made of the module
// version of rec, v (mirror/modules.Zips), when one was recorded: a blob
// of the version's, for retention, removed with it.
func (s *Inventory) moduleZipBlobs(rec records.ModuleRecord, v versions.Version) []string {
	m, err := addrs.ParseModule(rec.Module)
	if err != nil {
		return nil
	}
	var zr records.ModuleZipRecord
	if _, err := s.store.GetMeta(records.ModuleZipKey(m, v), &zr); err != nil || !records.KnownSchema(zr.Schema) || zr.Package != rec.SHA256 {
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
// digest) go with it. Its release dating (mirror/gate) stays as it was
// (see unlist).
func (s *Inventory) RemoveVersion(kind, address, version string) error {
	s.parts.Life.Imports().Lock() // not while an import writes the same list
	defer s.parts.Life.Imports().Unlock()
	if kind == "module" {
		m, err := addrs.ParseModule(address)
		if err != nil {
			return err
		}
		v, err := addrs.ParseModuleVersion(version)
		if err != nil {
			return err
		}
		// The zip's record first: a removal stopped between the two
		// leaves the version whole (its zip made again when asked), never
		// a zip record whose version is gone.
		if err := s.store.DeleteMeta(records.ModuleZipKey(m, v)); err != nil && !errors.Is(err, cache.ErrNotFound) {
			return err
		}
		key := records.ModuleRecordKey(m, v)
		err = s.store.DeleteMeta(key)
		s.parts.Records.Forget(key)
		return err
	}
	p, v, err := parseProviderVersion(address, version)
	if err != nil {
		return err
	}
	if err := s.unlist(p, v); err != nil {
		return err
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
	if err := s.parts.OCI.Remove(s.store, p, v, shas); err != nil {
		return err
	}
	err = s.store.DeleteMeta(pkey)
	s.parts.Records.Forget(pkey)
	if err == nil {
		s.parts.Withholding.Forget(p, version)
	}
	return err
}

// unlist takes version v of p off the version list served, the cache's
// (or the shared tier's, which the engine serves where the cache has
// none), leaving its release dating (mirror/gate) as it was, as an
// import leaves it (mirror/imports' listBefore): the list keeps v among
// the versions the listing behind it named (Lacked), so that the next
// listing, which the origin may still name it in, does not take it for
// one published since; it keeps its time of listing (a list of an
// earlier release, which did not keep it, its time of storing), and its
// time of storing, so that it is refreshed when it was due; and a list
// the cache held none of its own of, the tier's (another replica's
// listing), is stored as none of this replica's (ImportOnly), so that
// the next listing takes the tier's list for the one before it, as it
// did. A list that does not name v is left as it is.
//
// The list is written in turn with its refreshes (coalesced with them,
// as an import's addition is), so that a refresh under way is waited
// for and v taken off the list it stored, never the list it replaced
// stored again over it.
func (s *Inventory) unlist(p addrs.Provider, v versions.Version) error {
	ctx := s.parts.Life.Context()
	key := records.VersionsKey(p)
	if list, _, _, err := s.served(ctx, key); err != nil || list == nil {
		return err
	} else if _, ok := list.Find(v); !ok {
		return nil // nothing to take off: no refresh waited for
	}
	err := s.parts.Life.WriteInTurn(ctx, "versions", key, func(ctx context.Context) error {
		return s.unlistFrom(ctx, key, v)
	})
	if errors.Is(err, lifetime.ErrKeptFetching) {
		return fmt.Errorf("the version list of %s kept changing while %s was taken off it", p, v)
	}
	return err
}

// unlistFrom takes v off the list under key (see unlist), coalesced with
// its refreshes; a list gone meanwhile, or that no longer names v, is
// left as it is.
func (s *Inventory) unlistFrom(ctx context.Context, key string, v versions.Version) error {
	list, storedAt, own, err := s.served(ctx, key)
	if err != nil || list == nil {
		return err
	}
	if _, ok := list.Find(v); !ok {
		return nil
	}
	nl := list.WithVersions([]records.VersionEntry{})
	for _, e := range list.Versions {
		if e.Version != v.String() {
			nl.Versions = append(nl.Versions, e)
		}
	}
	nl.Lacked = records.Lacking(list.Named(), nl.Names())
	nl.ImportOnly = nl.ImportOnly || !own
	nl.ListedAt = list.ListingTime(storedAt)
	err = s.store.PutMetaAt(key, nl, storedAt)
	s.parts.Records.Forget(key)
	return err
}

// served reads the version list under key that the engine serves: the
// cache's (own), else the shared tier's, another replica's; on a sealed
// replica, the later listing of the two, with what imports added to the
// cache's (mirror/stored.Source.ServedVersions); read there rather than
// only when the engine remembers it, so that a removal takes the version
// off it whenever it is served, and off the listing a sealed replica
// takes from the tier, which a later one of the tier's then takes over
// only once it was listed after it; nil when there is none this release
// reads. A tier that does not answer fails the removal: the version
// would stay listed from it.
func (s *Inventory) served(ctx context.Context, key string) (list *records.VersionList, storedAt time.Time, own bool, err error) {
	list, storedAt, own, err = s.parts.Source.ServedVersions(ctx, key)
	switch {
	case errors.Is(err, stored.ErrUnanswered):
		return nil, time.Time{}, false, fmt.Errorf("reading the shared store's version list: %w", err)
	case err != nil || list == nil:
		return nil, time.Time{}, false, nil // none served
	}
	return list, storedAt, own, nil
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
	s.parts.Life.Imports().Lock() // as RemoveVersion
	defer s.parts.Life.Imports().Unlock()
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
		s.parts.Records.Forget(key)
		if err != nil {
			return err
		}
	}
	s.parts.Withholding.Forget(p, version)
	return nil
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	return slices.Sorted(maps.Keys(m))
}

// Package served is the package policy as a layer in front of the
// engine's package API: Packages is the one type through which every
// way in reaches packages (the network mirror, the provider and module
// registries, the OCI door by tag, digest and blob, sync, the exports,
// the status page). No front door or use case holds the engine beneath
// it for package access; cmd/tfmirror composes it over the engine and
// its OCI side and hands it to each of them.
//
// It is a decorator, as Terraform's getproviders composes its Sources:
// Packages holds the APIs it decorates through the interfaces declared
// here (Providers, Modules, Zips, OCI: what the front doors need of the
// engine), never the engine itself, and each method asks the policy
// before it hands the call down.
//
// Every method that names a provider or a module asks the policy's
// address rules (deny, allow) first, before anything below it may ask
// an origin, so that a refused address costs no origin request and
// answers at once, whatever the origin's state. The version rules
// (deny_version, the minimum release age) are applied where the version
// is known: for a method given one, by the engine's answer for it; for a
// method given a digest, by the part that resolves the digest to its
// version (mirror/ocistore, mirror/modules), whatever it kept from
// before the policy changed. A module version comes in parsed
// (addrs.ParseModuleVersion, at each door: "v1.1.0" is "1.1.0"), and is
// handed down as it is: its records, release times and the policy's
// rules are keyed by it; the engine asks the origin in the origin's own
// spelling.
// TestEveryMethodRefuses walks the method set of Packages by reflection
// and fails for a method with no case of a denied and an age-held
// version, so that a method added later cannot skip the layer.
//
// The exports ask it what they may carry: StoredVersion and
// StoredModuleVersion answer, for a version the cache holds, whether the
// policy in force lets it be served and, when not, why (the same
// *gate.PolicyError a door's refusal carries), with no origin request for
// the address rules and deny_version; an export leaves out what they
// refuse, so that an export carries what the mirror serves.
//
// Releases is the same layer over the CLI releases side (package
// releases, through CLIReleases): the releases door and sync reach the
// Terraform and OpenTofu releases through it, a product refused by its
// address before anything below may ask an origin, a version by its
// signature time and the listing rule; its StoredVersion is what the
// exports and imports ask of a CLI version the cache holds, from the
// cache alone. TestEveryReleasesMethodRefuses walks its method set.
//
// Every error either type returns passes mirror/failure.FromOrigin: the
// failures of origins and module source hosts cross the layer in the
// engine's kinds (failure.OriginError, wrapping the error it was made
// from, its message unchanged), so that the front doors map the engine's
// errors only.
//
// It does not decide (package policy and mirror/gate do), fetch, store,
// or speak HTTP.
package served

import (
	"context"
	"errors"
	"fmt"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// Providers is the engine's provider API that Packages decorates
// (*mirror.Engine implements it): the versions, packages, evidence and
// archives of providers, the address rules of the policy in force, and
// what the cache holds.
type Providers interface {
	Config() mirror.Config
	Reuse(st mirror.Stamp) bool
	CheckOrigin(p addrs.Provider) error
	CheckAddress(kind policy.Kind, address string) error
	Versions(ctx context.Context, p addrs.Provider) (*records.VersionList, mirror.ListState, error)
	Package(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*mirror.Package, error)
	Evidence(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*records.Evidence, error)
	OpenArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (*mirror.Archive, error)
	EnsureArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (records.Source, error)
	CachedSize(sha string) (int64, bool)
	Stats() (archives int, bytes int64)
	ListCachedAfter(prefix, after string, fn func(mirror.CachedVersion) error) error
	Withheld() []unsigned.Version
	CacheChecker() *cachecheck.Checker
}

// Modules is the engine's registry-module API that Packages decorates
// (*mirror/modules.Modules implements it): module versions, their
// packages, and what the cache holds of them.
type Modules interface {
	CheckModuleOrigin(m addrs.Module) error
	ModuleVersions(ctx context.Context, m addrs.Module) (*records.ModuleVersionList, modules.ListState, error)
	ModuleLocation(ctx context.Context, m addrs.Module, version versions.Version) (*records.ModuleRecord, error)
	OpenModule(ctx context.Context, m addrs.Module, version versions.Version) (*modules.Package, error)
	ListCachedModulesAfter(prefix, after string, fn func(modules.Cached) error) error
}

// Zips is the engine's module versions as OCI artifacts that Packages
// decorates (*mirror/modules.Zips implements it): their zips and OCI
// documents.
type Zips interface {
	OpenModuleZip(ctx context.Context, m addrs.Module, version versions.Version) (*modules.Zip, error)
	ModuleManifest(ctx context.Context, m addrs.Module, version versions.Version) (oci.Document, error)
	ModuleDocument(ctx context.Context, m addrs.Module, d digest.Digest) (oci.Document, error)
	ModuleBlob(ctx context.Context, m addrs.Module, d digest.Digest) (*modules.Zip, error)
}

var (
	_ Modules = (*modules.Modules)(nil)
	_ Zips    = (*modules.Zips)(nil)
)

// OCI is the engine's OCI side of providers that Packages decorates
// (*mirror.OCI implements it): image indexes, platform manifests and
// blobs.
type OCI interface {
	Index(ctx context.Context, p addrs.Provider, v versions.Version) (oci.Document, error)
	IndexAnswer(ctx context.Context, p addrs.Provider, v versions.Version) (oci.Document, func() bool, error)
	Manifest(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, error)
	ManifestAnswer(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, func() bool, error)
	Blob(ctx context.Context, p addrs.Provider, d digest.Digest) (*mirror.Archive, error)
}

// Stored is the package policy's view of the provider and module
// versions the cache holds (*mirror.Inventory implements it): the
// policy in force, and its verdict, now, on a stored version, dated by
// what the engine knows of its release.
type Stored interface {
	Policy() *policy.Policy
	StoredVerdict(ctx context.Context, kind policy.Kind, address, version string) policy.Verdict
}

var _ Stored = (*mirror.Inventory)(nil)

// Parts are the APIs a Packages decorates; cmd/tfmirror takes them from
// the engine.
type Parts struct {
	Providers Providers // required
	Modules   Modules   // required
	Zips      Zips      // required
	OCI       OCI       // nil without an OCI side: the OCI methods then fail
	Stored    Stored    // nil: StoredVersion and StoredModuleVersion fail
}

// Packages is the engine's package API behind the package policy. Its
// methods are safe for concurrent use.
type Packages struct {
	e    Providers
	mods Modules
	zips Zips
	oci  OCI // nil without an OCI side
	held Stored
}

// ErrNoOCI is returned by the OCI methods of a Packages made without an
// OCI side.
var ErrNoOCI = errors.New("served: no OCI side")

// ErrNoStored is returned by StoredVersion and StoredModuleVersion of a
// Packages made without the policy's view of the stored versions.
var ErrNoStored = errors.New("served: no view of the stored versions")

// New returns the package API of parts behind the package policy.
func New(parts Parts) (*Packages, error) {
	if parts.Providers == nil || parts.Modules == nil || parts.Zips == nil {
		return nil, errors.New("served: the engine's providers, modules and module zips are required")
	}
	return &Packages{e: parts.Providers, mods: parts.Modules, zips: parts.Zips, oci: parts.OCI, held: parts.Stored}, nil
}

func (s *Packages) provider(p addrs.Provider) error {
	if err := s.e.CheckOrigin(p); err != nil {
		return failure.FromOrigin(err)
	}
	return failure.FromOrigin(s.e.CheckAddress(policy.Provider, p.String()))
}

func (s *Packages) module(m addrs.Module) error {
	if err := s.mods.CheckModuleOrigin(m); err != nil {
		return failure.FromOrigin(err)
	}
	return failure.FromOrigin(s.e.CheckAddress(policy.Module, m.String()))
}

// out and out3 return a call's answer with its error in the engine's
// kinds: every error crossing the layer reports the failures of origins
// and module source hosts as mirror/failure.OriginError, so that the
// front doors map the engine's errors only.
func out[T any](v T, err error) (T, error) { return v, failure.FromOrigin(err) }

func out3[T, U any](v T, u U, err error) (T, U, error) { return v, u, failure.FromOrigin(err) }

// The provider side.

// Config returns the engine's configuration in effect.
func (s *Packages) Config() mirror.Config { return s.e.Config() }

// Reuse says whether an answer of Versions or Package with this stamp is
// still the one the same call would give (a new policy ends it).
func (s *Packages) Reuse(st mirror.Stamp) bool { return s.e.Reuse(st) }

// CheckOrigin fails for a provider of a host the engine does not serve,
// or one the policy refuses whatever the version.
func (s *Packages) CheckOrigin(p addrs.Provider) error { return s.provider(p) }

// Versions is mirror.Engine.Versions behind the policy: the versions it
// holds back left out.
func (s *Packages) Versions(ctx context.Context, p addrs.Provider) (*records.VersionList, mirror.ListState, error) {
	if err := s.provider(p); err != nil {
		return nil, mirror.ListState{}, err
	}
	return out3(s.e.Versions(ctx, p))
}

// Package is mirror.Engine.Package behind the policy.
func (s *Packages) Package(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*mirror.Package, error) {
	if err := s.provider(p); err != nil {
		return nil, err
	}
	return out(s.e.Package(ctx, p, v, platforms))
}

// Evidence is mirror.Engine.Evidence behind the policy.
func (s *Packages) Evidence(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*records.Evidence, error) {
	if err := s.provider(p); err != nil {
		return nil, err
	}
	return out(s.e.Evidence(ctx, p, v, platforms))
}

// OpenArchive is mirror.Engine.OpenArchive behind the policy.
func (s *Packages) OpenArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (*mirror.Archive, error) {
	if err := s.provider(p); err != nil {
		return nil, err
	}
	return out(s.e.OpenArchive(ctx, p, v, pl))
}

// EnsureArchive is mirror.Engine.EnsureArchive behind the policy.
func (s *Packages) EnsureArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (records.Source, error) {
	if err := s.provider(p); err != nil {
		return 0, err
	}
	return out(s.e.EnsureArchive(ctx, p, v, pl))
}

// The module side.

// CheckModuleOrigin fails for a module of a host the engine does not
// serve, or one the policy refuses whatever the version.
func (s *Packages) CheckModuleOrigin(m addrs.Module) error { return s.module(m) }

// ModuleVersions is mirror/modules.Modules.ModuleVersions behind the
// policy: the versions it holds back left out.
func (s *Packages) ModuleVersions(ctx context.Context, m addrs.Module) (*records.ModuleVersionList, modules.ListState, error) {
	if err := s.module(m); err != nil {
		return nil, modules.ListState{}, err
	}
	return out3(s.mods.ModuleVersions(ctx, m))
}

// ModuleLocation is mirror/modules.Modules.ModuleLocation behind the policy.
func (s *Packages) ModuleLocation(ctx context.Context, m addrs.Module, version versions.Version) (*records.ModuleRecord, error) {
	if err := s.module(m); err != nil {
		return nil, err
	}
	return out(s.mods.ModuleLocation(ctx, m, version))
}

// OpenModule is mirror/modules.Modules.OpenModule behind the policy.
func (s *Packages) OpenModule(ctx context.Context, m addrs.Module, version versions.Version) (*modules.Package, error) {
	if err := s.module(m); err != nil {
		return nil, err
	}
	return out(s.mods.OpenModule(ctx, m, version))
}

// OpenModuleZip is mirror/modules.Zips.OpenModuleZip behind the policy.
func (s *Packages) OpenModuleZip(ctx context.Context, m addrs.Module, version versions.Version) (*modules.Zip, error) {
	if err := s.module(m); err != nil {
		return nil, err
	}
	return out(s.zips.OpenModuleZip(ctx, m, version))
}

// ModuleManifest is mirror/modules.Zips.ModuleManifest behind the policy.
func (s *Packages) ModuleManifest(ctx context.Context, m addrs.Module, version versions.Version) (oci.Document, error) {
	if err := s.module(m); err != nil {
		return oci.Document{}, err
	}
	return out(s.zips.ModuleManifest(ctx, m, version))
}

// ModuleDocument is mirror/modules.Zips.ModuleDocument behind the
// policy: a digest of a version refused since it was handed out is
// refused.
func (s *Packages) ModuleDocument(ctx context.Context, m addrs.Module, d digest.Digest) (oci.Document, error) {
	if err := s.module(m); err != nil {
		return oci.Document{}, err
	}
	return out(s.zips.ModuleDocument(ctx, m, d))
}

// ModuleBlob is mirror/modules.Zips.ModuleBlob behind the policy.
func (s *Packages) ModuleBlob(ctx context.Context, m addrs.Module, d digest.Digest) (*modules.Zip, error) {
	if err := s.module(m); err != nil {
		return nil, err
	}
	return out(s.zips.ModuleBlob(ctx, m, d))
}

// The OCI side of providers.

func (s *Packages) ociFor(p addrs.Provider) (OCI, error) {
	if s.oci == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoOCI, p)
	}
	return s.oci, s.provider(p)
}

// Index is mirror.OCI's Index behind the policy.
func (s *Packages) Index(ctx context.Context, p addrs.Provider, v versions.Version) (oci.Document, error) {
	o, err := s.ociFor(p)
	if err != nil {
		return oci.Document{}, err
	}
	return out(o.Index(ctx, p, v))
}

// IndexAnswer is mirror.OCI's IndexAnswer behind the policy.
func (s *Packages) IndexAnswer(ctx context.Context, p addrs.Provider, v versions.Version) (oci.Document, func() bool, error) {
	o, err := s.ociFor(p)
	if err != nil {
		return oci.Document{}, nil, err
	}
	return out3(o.IndexAnswer(ctx, p, v))
}

// Manifest is mirror.OCI's Manifest behind the policy: a digest of a
// version refused since it was handed out is refused.
func (s *Packages) Manifest(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, error) {
	o, err := s.ociFor(p)
	if err != nil {
		return oci.Document{}, err
	}
	return out(o.Manifest(ctx, p, d))
}

// ManifestAnswer is mirror.OCI's ManifestAnswer behind the policy.
func (s *Packages) ManifestAnswer(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, func() bool, error) {
	o, err := s.ociFor(p)
	if err != nil {
		return oci.Document{}, nil, err
	}
	return out3(o.ManifestAnswer(ctx, p, d))
}

// Blob is mirror.OCI.Blob behind the policy.
func (s *Packages) Blob(ctx context.Context, p addrs.Provider, d digest.Digest) (*mirror.Archive, error) {
	o, err := s.ociFor(p)
	if err != nil {
		return nil, err
	}
	return out(o.Blob(ctx, p, d))
}

// What the exports ask of a version the cache holds.

// StoredVersion says whether the package policy in force lets version v
// of provider p, which the cache holds, be served now: nil, or the
// *gate.PolicyError of its refusal (its rule, the operator's reason, and
// for the minimum release age when the version becomes available). The
// address rules (deny, allow) decide first, then deny_version and the
// minimum release age, the version dated by what the engine knows of its
// release (Stored). It fetches nothing: the address rules and
// deny_version need no release time, and the minimum release age is
// judged from the cache, asking the origin only for a signature time the
// cache does not have, as a listing would, and never on a sealed engine.
// It counts and logs no refusal: the exports report what they leave out.
// An export carries only the versions this lets through, so that what it
// carries is what the mirror serves.
func (s *Packages) StoredVersion(ctx context.Context, p addrs.Provider, v versions.Version) error {
	return s.stored(ctx, policy.Provider, p.String(), v.String())
}

// StoredModuleVersion is StoredVersion of a module version the cache
// holds: a module is dated by the listing rule, from the cache alone.
func (s *Packages) StoredModuleVersion(ctx context.Context, m addrs.Module, v versions.Version) error {
	return s.stored(ctx, policy.Module, m.String(), v.String())
}

func (s *Packages) stored(ctx context.Context, kind policy.Kind, address, version string) error {
	if s.held == nil {
		return fmt.Errorf("%w: %s %s %s", ErrNoStored, kind, address, version)
	}
	if v := s.held.Policy().Address(kind, address); !v.Allowed {
		return &gate.PolicyError{Kind: kind, Address: address, Verdict: v}
	}
	if v := s.held.StoredVerdict(ctx, kind, address, version); !v.Allowed {
		return &gate.PolicyError{Kind: kind, Address: address, Version: version, Verdict: v}
	}
	return nil
}

// What the status page and sync read that serves no package: listings
// of what the cache holds and its state, each marked with what the
// policy holds back where it shows versions.

// CachedSize returns the size of the cached archive whose sha256 is sha.
func (s *Packages) CachedSize(sha string) (int64, bool) { return s.e.CachedSize(sha) }

// Stats returns the cache's archive count and bytes.
func (s *Packages) Stats() (archives int, bytes int64) { return s.e.Stats() }

// ListCachedAfter lists the cached provider versions (mirror.Engine.ListCachedAfter).
func (s *Packages) ListCachedAfter(prefix, after string, fn func(mirror.CachedVersion) error) error {
	return failure.FromOrigin(s.e.ListCachedAfter(prefix, after, fn))
}

// ListCachedModulesAfter lists the cached module versions.
func (s *Packages) ListCachedModulesAfter(prefix, after string, fn func(modules.Cached) error) error {
	return failure.FromOrigin(s.mods.ListCachedModulesAfter(prefix, after, fn))
}

// Withheld returns what is not served: unsigned imports, and what the
// policy holds back (mirror.Engine.Withheld).
func (s *Packages) Withheld() []unsigned.Version { return s.e.Withheld() }

// CacheChecker returns the engine's check of the whole cache.
func (s *Packages) CacheChecker() *cachecheck.Checker { return s.e.CacheChecker() }

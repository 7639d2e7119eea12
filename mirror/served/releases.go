package served

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// CLIReleases is the CLI releases side that Releases decorates
// (*releases.Releases implements it): version lists, verified
// SHA256SUMS and their files, and archives, with no package policy; and
// what the policy judges by (the listing rule's times, the SHA256SUMS
// already held).
type CLIReleases interface {
	Products() []string
	SignerKeyID(pub releases.Publisher, product, version string) string
	CheckProduct(pub releases.Publisher, product string) error
	Versions(ctx context.Context, pub releases.Publisher, product string) (*releases.List, releases.ListState, error)
	Sums(ctx context.Context, pub releases.Publisher, product, version string) (*releases.Sums, error)
	HeldSums(pub releases.Publisher, product, version string) (*releases.Sums, error)
	ListingTime(pub releases.Publisher, product, version string) time.Time
	StoredRelease(pub releases.Publisher, product, version string) policy.Release
	Document(ctx context.Context, pub releases.Publisher, product, version, name string) ([]byte, error)
	OpenArchive(ctx context.Context, pub releases.Publisher, product, version, name string) (*mirror.Archive, error)
	ServedBuilds(s *releases.Sums) []releases.Build
	Cached(sha string) bool
}

// PolicySource is the package policy in force (*mirror.Engine
// implements it); nil refuses nothing.
type PolicySource interface {
	Policy() *policy.Policy
}

// CLIMetrics counts the policy's refusals per publisher and product, and
// by rule with the packages' refusals (package metrics implements it).
type CLIMetrics interface {
	CLIRefused(publisher, product, reason string)
	PolicyRefused(rule string)
}

// ReleasesConfig configures a Releases.
type ReleasesConfig struct {
	Releases CLIReleases  // required
	Policy   PolicySource // required
	Metrics  CLIMetrics   // nil counts nothing
	Logger   *slog.Logger
	Now      func() time.Time
	// ListWait bounds the origin lookups that date one version list's
	// versions (Releases.Versions), all of them together: as long as a
	// list's refresh is waited for before the list is served stale, at
	// most one origin request's time limit (releases.Releases.ListWait),
	// so that neither a slow origin answering each lookup within that
	// limit nor one that stalls makes every list wait the limit, or wait
	// it once per lookup. A version left undated then is held; its
	// lookup goes on, detached, for a later list. 0: each lookup has
	// only its own bound.
	ListWait time.Duration
}

// maxLookupsPerList bounds the SHA256SUMS fetched to date the versions of
// one list; the versions left undated are held until a later list.
const maxLookupsPerList = 4

// Releases is the CLI releases side behind the package policy: the one
// type through which the releases door and sync reach the CLI releases.
// A product is judged by its address (releases.Address) as a provider
// is: the address rules (deny, allow) decide before anything below may
// ask an origin; a version is judged by its release time, the later of
// its SHA256SUMS signature time and the listing rule's time
// (CLIReleases.ListingTime). TestEveryReleasesMethodRefuses walks its
// method set. Its methods are safe for concurrent use.
type Releases struct {
	rel      CLIReleases
	pol      PolicySource
	metrics  CLIMetrics
	log      *slog.Logger
	now      func() time.Time
	listWait time.Duration // ReleasesConfig.ListWait
	held     heldNotes     // what the policy held back, for Held
	// heldMemo is Held's last answer (releasesheld.go).
	heldMemo *gate.ListMemo[unsigned.Version]
	warns    *gate.RefusalWarnings
}

// NewReleases returns the CLI releases side behind the package policy.
func NewReleases(cfg ReleasesConfig) (*Releases, error) {
	if cfg.Releases == nil || cfg.Policy == nil {
		return nil, errors.New("served: the releases side and the policy in force are required")
	}
	r := &Releases{heldMemo: newHeldMemo(), rel: cfg.Releases, pol: cfg.Policy, metrics: cfg.Metrics, log: cfg.Logger, now: cfg.Now,
		warns: gate.NewRefusalWarnings(), listWait: cfg.ListWait}
	if r.metrics == nil {
		r.metrics = noCLIMetrics{}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r, nil
}

type noCLIMetrics struct{}

func (noCLIMetrics) CLIRefused(string, string, string) {}
func (noCLIMetrics) PolicyRefused(string)              {}

func (r *Releases) refuse(pub releases.Publisher, product, version string, v policy.Verdict) error {
	addr := releases.Address(pub, product)
	r.metrics.CLIRefused(string(pub), product, v.Rule)
	r.metrics.PolicyRefused(v.Rule)
	// Logged when first refused by its rule, as mirror/gate logs the
	// packages' refusals: not once a request, and within the same bound.
	args := []any{"kind", "cli", "address", addr, "version", version, "rule", v.Rule, "detail", v.Detail, "reason", v.Reason}
	if r.held.note(pub, product, version, v.Rule) {
		r.warns.Log(r.log, r.now(), args...)
	} else {
		r.warns.Again(r.log, args...)
	}
	return &gate.PolicyError{Kind: "cli", Address: addr, Version: version, Verdict: v}
}

// product refuses a product not served, then one the policy refuses
// whatever the version: before anything asks an origin.
func (r *Releases) product(pub releases.Publisher, product string) error {
	if err := r.rel.CheckProduct(pub, product); err != nil {
		return err
	}
	pol := r.pol.Policy()
	if pol == nil {
		return nil
	}
	if v := pol.Address(policy.Provider, releases.Address(pub, product)); !v.Allowed {
		return r.refuse(pub, product, "", v)
	}
	return nil
}

// version refuses a version the policy holds back, dated by its signature
// and the listing rule, after its product's checks.
func (r *Releases) version(ctx context.Context, pub releases.Publisher, product, version string) error {
	if err := r.rel.CheckProduct(pub, product); err != nil {
		return err
	}
	if _, err := releases.CanonicalVersion(version); err != nil {
		return err
	}
	if err := r.product(pub, product); err != nil {
		return err
	}
	pol := r.pol.Policy()
	if pol == nil {
		return nil
	}
	// The rules that need no release time (deny_version) decide before
	// the SHA256SUMS that dates the version is asked for: a version they
	// refuse costs no origin request, whatever the origin's state.
	addr := releases.Address(pub, product)
	sub := pol.For(policy.Provider, addr)
	if v, final := sub.Undated(version, r.now()); final && !v.Allowed {
		return r.refuse(pub, product, version, v)
	}
	s, err := r.rel.Sums(ctx, pub, product, version)
	if err != nil {
		return err
	}
	rel := policy.Release{At: later(s.SignedAt, r.rel.ListingTime(pub, product, version)), Known: true}
	if v := sub.Version(version, rel, r.now()); !v.Allowed {
		return r.refuse(pub, product, version, v)
	}
	return nil
}

// Cached reports whether the archive whose sha256 is sha is in the
// cache (releases.Releases.Cached): sync asks it of an archive this layer
// has just served it, to wait for the archive's commit.
func (r *Releases) Cached(sha string) bool { return r.rel.Cached(sha) }

// StoredRelease is the release time of a version as the cache dates it
// (releases.Releases.StoredRelease: its stored SHA256SUMS signature and
// the listing rule), what a download of it is judged by once its
// SHA256SUMS is held; it asks no origin. policy explain reads it.
func (r *Releases) StoredRelease(pub releases.Publisher, product, version string) policy.Release {
	return r.rel.StoredRelease(pub, product, version)
}

// ServedBuilds are the archives of s, a SHA256SUMS this layer let
// through (Sums), that the listings name
// (releases.Releases.ServedBuilds): sealed, only those cached. It
// serves nothing and asks no origin.
func (r *Releases) ServedBuilds(s *releases.Sums) []releases.Build { return r.rel.ServedBuilds(s) }

// Products are the HashiCorp products served (releases.Releases.Products),
// those the policy refuses whole left out, as a listing leaves out what
// it holds back.
func (r *Releases) Products() []string {
	all := r.rel.Products()
	pol := r.pol.Policy()
	if pol == nil {
		return all
	}
	out := make([]string, 0, len(all))
	for _, p := range all {
		if pol.Address(policy.Provider, releases.Address(releases.HashiCorp, p)).Allowed {
			out = append(out, p)
		}
	}
	return out
}

// SignerKeyID is the ID of the key that names the signature file served
// for a version of the product, as far as the cache knows it
// (releases.Releases.SignerKeyID): for the listings of the versions this
// layer lets through; it serves nothing and asks no origin.
func (r *Releases) SignerKeyID(pub releases.Publisher, product, version string) string {
	return r.rel.SignerKeyID(pub, product, version)
}

// Versions is releases.Releases.Versions behind the policy: a product it
// refuses is refused before the list is asked for, and the versions it
// holds back are left out. A version deny_version refuses is left out
// before it is dated. A version's signature time is learnt from the
// cache, else from the origin for the newest versions only
// (maxLookupsPerList), until one is old enough: the older ones (lower in
// precedence, not another build of its release) are taken to be as old
// unless the cache holds their SHA256SUMS, which dates them; a version
// left undated is held. A pre-release old enough dates only the
// pre-releases below it: the releases below it are looked up until one
// of them is old enough.
func (r *Releases) Versions(ctx context.Context, pub releases.Publisher, product string) (*releases.List, releases.ListState, error) {
	if err := r.product(pub, product); err != nil {
		return nil, releases.ListState{}, failure.FromOrigin(err)
	}
	list, st, err := r.rel.Versions(ctx, pub, product)
	if err != nil {
		return nil, releases.ListState{}, failure.FromOrigin(err)
	}
	pol := r.pol.Policy()
	if pol == nil {
		return list, st, nil
	}
	sub := pol.For(policy.Provider, releases.Address(pub, product))
	window := sub.Window()
	now := r.now()
	out := &releases.List{At: list.At, Schema: list.Schema}
	// oldEnough is the newest version dated old enough, and oldRelease
	// the newest such that is no pre-release: a pre-release dates the
	// pre-releases below it, a release everything below it. A
	// pre-release of the next line (Terraform's alphas) is published
	// before the patches of the current line that follow it.
	lookups, oldEnough, oldRelease := 0, "", ""
	// originFailed: a lookup found the origin failing (or the caller
	// gone, or the list's time for lookups spent), and the others are
	// not asked: each may wait the origin's whole time limit. The
	// lookups share one wait (listWait: the list's stale wait, at most
	// that limit): a lookup cut by it goes on, detached, and a later
	// list finds its answer held.
	originFailed := false
	lookupCtx := ctx
	if r.listWait > 0 {
		var cancel context.CancelFunc
		lookupCtx, cancel = context.WithTimeout(ctx, r.listWait)
		defer cancel()
	}
	for _, l := range list.Versions {
		// The rules that need no release time (deny_version) decide
		// first, as for a version asked for: a version they refuse is
		// neither looked up nor taken to date the ones below it.
		if v, final := sub.Undated(l.Version, now); final && !v.Allowed {
			r.held.note(pub, product, l.Version, v.Rule)
			continue
		}
		rel := policy.Release{At: r.rel.ListingTime(pub, product, l.Version), Known: true}
		anchor := oldRelease
		if releases.PreRelease(l.Version) {
			anchor = oldEnough
		}
		// Only versions below the one old enough are taken to be as old:
		// another build of its release ("1.9.0+b" beside "1.9.0+a") is
		// not older, and is dated by its own signature.
		if window > 0 && (anchor == "" || releases.CompareVersions(l.Version, anchor) >= 0) {
			var signed time.Time
			if s, err := r.rel.HeldSums(pub, product, l.Version); err == nil {
				signed = s.SignedAt
			} else if lookups < maxLookupsPerList && !originFailed {
				lookups++
				s, err := r.rel.Sums(lookupCtx, pub, product, l.Version)
				if err == nil {
					signed = s.SignedAt
				}
				originFailed = failedOrigin(lookupCtx, err)
			}
			if signed.IsZero() {
				rel.Known = false
			} else {
				rel.At = later(rel.At, signed)
				if now.Sub(signed) >= window {
					if oldEnough == "" {
						oldEnough = l.Version
					}
					if oldRelease == "" && !releases.PreRelease(l.Version) {
						oldRelease = l.Version
					}
				}
			}
		} else if window > 0 {
			// Taken to be as old as the one old enough unless the cache
			// dates it: a patch of an older line may be released after
			// it, and is then listed as its download is judged.
			if s, err := r.rel.HeldSums(pub, product, l.Version); err == nil {
				rel.At = later(rel.At, s.SignedAt)
			}
		}
		if v := sub.Version(l.Version, rel, now); v.Allowed {
			out.Versions = append(out.Versions, l)
		} else {
			r.held.note(pub, product, l.Version, v.Rule)
		}
	}
	return out, st, nil
}

// failedOrigin reports whether err, a lookup's, says that the origin
// gives no answer now (unreachable, failing, too slow, its circuit
// open), or that ctx ended: not one about the version looked up (none
// such, or a document that fails its checks).
func failedOrigin(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	if ctx.Err() != nil {
		return true
	}
	var oe *failure.OriginError
	if !errors.As(failure.FromOrigin(err), &oe) {
		return false
	}
	switch oe.Kind {
	case failure.OriginFailed:
		// A timeout, a failed connection, a 5xx or a 429 is the
		// origin's; another 4xx, or an answer that is malformed or too
		// large, the version's.
		var ne net.Error
		return oe.Timeout || oe.StatusCode >= 500 || oe.StatusCode == http.StatusTooManyRequests ||
			oe.StatusCode == 0 && errors.As(err, &ne)
	case failure.CircuitOpen, failure.UntrustedCertificate, failure.HostNotAllowed:
		return true
	}
	return false
}

// Sums is releases.Releases.Sums behind the policy.
func (r *Releases) Sums(ctx context.Context, pub releases.Publisher, product, version string) (*releases.Sums, error) {
	if err := r.version(ctx, pub, product, version); err != nil {
		return nil, failure.FromOrigin(err)
	}
	return out(r.rel.Sums(ctx, pub, product, version))
}

// Document is releases.Releases.Document behind the policy.
func (r *Releases) Document(ctx context.Context, pub releases.Publisher, product, version, name string) ([]byte, error) {
	if err := r.version(ctx, pub, product, version); err != nil {
		return nil, failure.FromOrigin(err)
	}
	return out(r.rel.Document(ctx, pub, product, version, name))
}

// OpenArchive is releases.Releases.OpenArchive behind the policy: a
// version it refuses has no archive fetched.
func (r *Releases) OpenArchive(ctx context.Context, pub releases.Publisher, product, version, name string) (*mirror.Archive, error) {
	if err := r.version(ctx, pub, product, version); err != nil {
		return nil, failure.FromOrigin(err)
	}
	return out(r.rel.OpenArchive(ctx, pub, product, version, name))
}

// StoredVersion says whether the package policy in force lets a CLI
// version the cache holds be served now: nil, or the *gate.PolicyError of
// its refusal (the product refused whole, with Version "", or the
// version, with its rule, the operator's reason and, for the minimum
// release age, when it becomes available). The version is dated as Held
// dates it, by what the cache holds: its SHA256SUMS signature's time and
// the listing rule; a version with no SHA256SUMS held is not dated, and
// held while a minimum release age applies. It fetches nothing, and
// counts, logs and notes no refusal: the exports, which carry only the
// versions it lets through, report what they leave out, and an import
// reports what it stored that the policy holds back.
func (r *Releases) StoredVersion(pub releases.Publisher, product, version string) error {
	pol := r.pol.Policy()
	if pol == nil {
		return nil
	}
	addr := releases.Address(pub, product)
	if v := pol.Address(policy.Provider, addr); !v.Allowed {
		return &gate.PolicyError{Kind: "cli", Address: addr, Verdict: v}
	}
	if v := pol.Version(policy.Provider, addr, version, r.rel.StoredRelease(pub, product, version), r.now()); !v.Allowed {
		return &gate.PolicyError{Kind: "cli", Address: addr, Version: version, Verdict: v}
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Package gate is the package policy (package policy) as the engine
// applies it when answering, to what is stored: the version lists leave
// out what it holds back, and the documents and archives of a held
// version fail with a *PolicyError. It is read on every answer, so a new
// policy (Gate.SetPolicy) applies to the next request with nothing
// fetched again; the engine ends the answers it keeps for reuse when the
// policy changes (Generation), and when the clock reaches the time a held
// version becomes available.
//
// It also learns and keeps the release times a minimum release age
// judges by (release.go). It does not decide what is kept (retention
// does), fetch packages, read version lists, or speak HTTP: package
// mirror builds it on the components below it (Parts) and asks it on
// every answer, handing it the version list that dates a version
// (DatesProvider, CheckProviderIn). Nothing of the engine is called back.
package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"

	"github.com/tfmirror/tfmirror/v2/internal/logbound"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/originguard"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// ErrPolicy matches every *PolicyError.
var ErrPolicy = errors.New("refused by the mirror's package policy")

// PolicyError is a provider, module or version the package policy does
// not let the mirror serve.
type PolicyError struct {
	Kind    policy.Kind
	Address string
	// Version is "" for a refusal of the whole address.
	Version string
	Verdict policy.Verdict
}

func (e *PolicyError) Error() string {
	what := e.Address
	if e.Version != "" {
		what += " " + e.Version
	}
	msg := fmt.Sprintf("%s %s is held back by the mirror's package policy (rule %s", e.Kind, what, e.Verdict.Rule)
	if e.Verdict.Detail != "" {
		msg += ": " + e.Verdict.Detail
	}
	return msg + "): " + e.Verdict.Message()
}

// Is makes errors.Is(err, ErrPolicy) hold.
func (e *PolicyError) Is(target error) bool { return target == ErrPolicy }

// Metrics receives the package policy's refusals and the release times
// not stored: the gate's side of mirror.Metrics.
type Metrics interface {
	// PolicyRefused counts one refusal by rule (a policy.Rule* name):
	// a document or archive refused, or a version first left out of a
	// version list.
	PolicyRefused(rule string)
	// CacheWriteFailed records a release time that could not be stored.
	CacheWriteFailed()
}

// Parts are the engine's components the gate takes; all are required.
type Parts struct {
	Life    *lifetime.Lifetime // coalescing of release-time lookups
	Source  stored.Source      // release times, stored (and those other replicas learnt, when the engine composes the shared tier over it)
	Hosts   *originguard.Hosts // the local-only hosts, never asked
	Records *stored.Records    // the stored version lists and package records
}

// Origin is what the gate asks origin registries: a version's download
// answer, its SHA256SUMS and signature, to learn when it was signed.
type Origin interface {
	Package(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (*discovery.Package, error)
	FetchSums(ctx context.Context, p addrs.Provider, pkg *discovery.Package, sumsLimit, signatureLimit int64) (sums, signature []byte, err error)
}

// Store is where the gate reads the release times kept (they are written
// through Parts.Source): the cache's records; and removes its marks of
// dating lookups the shared tier did not answer (written through
// Parts.Records). *cache.Store implements it.
type Store interface {
	GetMeta(key string, v any) (time.Time, error)
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
	DeleteMeta(key string) error
}

// Config is the engine's settings the gate uses (mirror.Config's).
type Config struct {
	// Offline says the mirror is sealed: no origin is asked.
	Offline bool
	// Platforms are the platforms served (os_arch, canonical); nil: all.
	Platforms []string
	Now       func() time.Time
	Logger    *slog.Logger
}

// Gate is the engine's package policy, what it has refused, the lists
// it filtered, and the release times it judges by. Its methods are safe
// for concurrent use.
type Gate struct {
	cfg     Config
	parts   Parts
	now     func() time.Time
	log     *slog.Logger
	metrics Metrics
	rel     *releaseTimes
	state
}

// New returns a gate with no policy (everything allowed).
func New(cfg Config, parts Parts, origin Origin, store Store, metrics Metrics) (*Gate, error) {
	if parts.Life == nil || parts.Source == nil || parts.Hosts == nil || parts.Records == nil || origin == nil || store == nil || metrics == nil || cfg.Now == nil || cfg.Logger == nil {
		return nil, errors.New("gate: the engine's parts, an origin, a store, metrics, a clock and a logger are required")
	}
	g := &Gate{cfg: cfg, parts: parts, now: cfg.Now, log: cfg.Logger, metrics: metrics}
	g.warns = NewRefusalWarnings()
	g.refusals = newRefusalsMemo()
	g.rel = &releaseTimes{cfg: cfg, parts: parts, origin: origin, store: store, log: cfg.Logger, metrics: metrics,
		signed: map[string]time.Time{}, absent: map[string]map[string]time.Time{}}
	return g, nil
}

// state is the policy in effect and what it has refused.
type state struct {
	p   atomic.Pointer[policy.Policy]
	gen atomic.Uint64 // advanced by every SetPolicy

	mu      sync.Mutex
	seen    *simplelru.LRU[heldKey, heldEntry] // refusals logged, by version and rule (newRefusalsSeen)
	seenGen uint64                             // advanced by every change of seen
	// refusals is Refusals' last answer (refusals.go).
	refusals *ListMemo[Refusal]
	warns    *RefusalWarnings        // bounds the refusals logged at warn
	lists    map[string]filteredList // the lists last filtered, by provider
	rels     map[string]datedList    // the release times of the lists last dated, by provider
}

// datedList is the release times of the versions of src under a minimum
// release age of window, all known: kept while the list and the window
// are the same. What they say stays true as the clock moves (a release
// time never changes once learned), so that a version's documents are
// judged without dating the whole list again.
type datedList struct {
	src    *records.VersionList
	window time.Duration
	dated  datedVersions
}

type heldKey struct{ kind, address, version, rule string }

// maxHeldSeen bounds the refusals remembered (to log each once and list
// them); past it the one least recently made is forgotten, so that names
// a client makes up in a loop do not empty the list of what clients keep
// asking for. It bounds the lists last filtered too.
const maxHeldSeen = 1 << 14

// newRefusalsSeen is the memory of refusals, bounded by maxHeldSeen.
func newRefusalsSeen() *simplelru.LRU[heldKey, heldEntry] {
	seen, err := simplelru.NewLRU[heldKey, heldEntry](maxHeldSeen, nil)
	if err != nil {
		panic(err) // only for a size below one
	}
	return seen
}

// Refusal is a version (or an address: Version "") the package policy
// in effect holds back.
type Refusal struct {
	Kind    policy.Kind
	Address string
	Version string
	Rule    string
	Reason  string
	// AvailableAt is when an age-gated version becomes available.
	AvailableAt time.Time
}

type heldEntry struct {
	Refusal
	rel policy.Release // the release time it was judged with
}

// SetPolicy makes p the package policy of every answer from now on (nil:
// everything allowed), and advances the Generation.
func (g *Gate) SetPolicy(p *policy.Policy) {
	g.p.Store(p)
	g.gen.Add(1)
}

// Current returns the package policy in effect (nil: everything allowed).
func (g *Gate) Current() *policy.Policy { return g.p.Load() }

// Generation is advanced by every SetPolicy: the engine adds it to its
// own, so that a new policy ends every answer kept.
func (g *Gate) Generation() uint64 { return g.gen.Load() }

// Refusals returns what the package policy in effect holds back among
// the versions it refused, or left out of a list, since the gate was
// made: each judged again now (a version allowed since is not listed),
// sorted by address and version.
//
// The answer is shared and must not be modified; it is kept and given
// again while it holds (refusals.go).
func (g *Gate) Refusals() []Refusal {
	return g.refusalsNow()
}

// judgeRefusals is Refusals made anew at now from the entries seen.
func (g *Gate) judgeRefusals(pol *policy.Policy, now time.Time, seen []heldEntry) []Refusal {
	var out []Refusal
	done := map[heldKey]bool{}
	for _, h := range seen {
		k := heldKey{string(h.Kind), h.Address, h.Version, ""}
		if done[k] {
			continue
		}
		var v policy.Verdict
		if h.Version == "" {
			v = pol.Address(h.Kind, h.Address)
		} else {
			v = pol.Version(h.Kind, h.Address, h.Version, h.rel, now)
		}
		if v.Allowed || v.Rule == policy.RuleMinReleaseAge && h.Rule != policy.RuleMinReleaseAge && !h.rel.Known {
			// Allowed now; or refused by another rule (CheckUndated)
			// before its release time was learnt, which the age gate
			// judges, and lists, once it has dated the version.
			continue
		}
		done[k] = true
		out = append(out, Refusal{Kind: h.Kind, Address: h.Address, Version: h.Version,
			Rule: v.Rule, Reason: v.Reason, AvailableAt: v.AvailableAt})
	}
	slices.SortFunc(out, func(a, b Refusal) int {
		if c := strings.Compare(a.Address, b.Address); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
	return out
}

// refused logs the first refusal of a version by a rule, remembers it
// for Refusals and counts it: every time when counted, else the first.
func (g *Gate) refused(kind policy.Kind, address, version string, rel policy.Release, v policy.Verdict, counted bool) {
	k := heldKey{string(kind), address, version, v.Rule}
	h := heldEntry{Refusal{Kind: kind, Address: address, Version: version, Rule: v.Rule, Reason: v.Reason, AvailableAt: v.AvailableAt}, rel}
	g.mu.Lock()
	if g.seen == nil {
		g.seen = newRefusalsSeen()
	}
	old, logged := g.seen.Get(k) // made again: the most recent
	if !logged || old != h {
		g.seen.Add(k, h)
		g.seenGen++
	}
	g.mu.Unlock()
	if counted || !logged {
		g.metrics.PolicyRefused(v.Rule)
	}
	if logged && old.Refusal == h.Refusal {
		return
	}
	args := []any{"kind", string(kind), "address", address, "rule", v.Rule, "detail", v.Detail, "reason", v.Reason}
	if version != "" {
		args = append(args, "version", version)
	}
	if !v.AvailableAt.IsZero() {
		args = append(args, "available_at", v.AvailableAt.UTC().Format(time.RFC3339))
	}
	g.warns.Log(g.log, g.now(), args...)
}

// RefusalWarnings logs the first refusals of versions by the package
// policy's rules, which a client can make as many of as it asks for
// made-up names or versions: at most refusalWarnBurst at warn at once and
// refusalWarnRate after, the others at debug, with their number on the
// next warning (internal/logbound). Each is counted and on the status
// page all the same. The gate and the CLI releases side
// (mirror/served.Releases) log theirs through one. Safe for concurrent
// use.
type RefusalWarnings struct{ warns *logbound.Warnings }

// NewRefusalWarnings returns the bound of a side's refusal warnings.
func NewRefusalWarnings() *RefusalWarnings {
	return &RefusalWarnings{warns: logbound.New(refusalWarnRate, refusalWarnBurst, "refusals_logged_at_debug")}
}

// Log logs a first refusal (its attributes args) at now.
func (w *RefusalWarnings) Log(log *slog.Logger, now time.Time, args ...any) {
	w.warns.Log(log, now, refusalMessage, args...)
}

// Again logs a refusal that was logged before (its attributes args), at
// debug only.
func (w *RefusalWarnings) Again(log *slog.Logger, args ...any) {
	log.Debug(refusalMessage, args...)
}

// refusalMessage is the message of every refusal logged.
const refusalMessage = "held back by the package policy"

const (
	refusalWarnRate  = rate.Limit(1) // a second
	refusalWarnBurst = 20
)

// CheckAddress refuses an address (HOST/NAMESPACE/TYPE of a provider,
// HOST/NAMESPACE/NAME/SYSTEM of a module) that the policy in effect
// refuses whatever the version (deny, allow): a *PolicyError, logged
// and counted. It asks nothing of the origin, so that a refusal costs
// no request.
func (g *Gate) CheckAddress(kind policy.Kind, address string) error {
	pol := g.Current()
	if pol == nil {
		return nil
	}
	if v := pol.Address(kind, address); !v.Allowed {
		g.refused(kind, address, "", policy.Release{}, v, true)
		return &PolicyError{Kind: kind, Address: address, Verdict: v}
	}
	return nil
}

// CheckUndated refuses version of an address (kind and address as
// CheckAddress takes them) when the policy in effect refuses it whatever
// its release time: the address rules, and deny_version (and a version
// no deny_version block can check). It asks nothing of the origin, and
// is asked before anything reads or refreshes a version list to date or
// find the version, so that such a refusal costs no origin request and
// answers at once, whatever the origin's state, as an address refused
// does. What only the minimum release age may refuse passes: it is
// judged once the version is dated (CheckProviderIn, CheckModule).
func (g *Gate) CheckUndated(kind policy.Kind, address, version string) error {
	pol := g.Current()
	if pol == nil {
		return nil
	}
	sub := pol.For(kind, address)
	v, final := sub.Undated(version, g.now())
	if v.Allowed || !final {
		return nil
	}
	g.refused(kind, address, version, policy.Release{}, v, true)
	return &PolicyError{Kind: kind, Address: address, Version: version, Verdict: v}
}

// checkAddress refuses an address the policy refuses whatever the version.
func (g *Gate) checkAddress(pol *policy.Policy, kind policy.Kind, address string) error {
	if pol == nil {
		return nil
	}
	sub := pol.For(kind, address)
	return g.checkSubject(&sub, kind, address)
}

// checkSubject is checkAddress with the policy as it applies to address.
func (g *Gate) checkSubject(sub *policy.Subject, kind policy.Kind, address string) error {
	if v := sub.Address(); !v.Allowed {
		g.refused(kind, address, "", policy.Release{}, v, true)
		return &PolicyError{Kind: kind, Address: address, Verdict: v}
	}
	return nil
}

// FilterProviders returns list without the versions the policy in
// effect holds back (with why, in Held), and the earliest time one of
// them becomes available (zero: none). A list handed in is never
// modified.
func (g *Gate) FilterProviders(ctx context.Context, p addrs.Provider, list *records.VersionList) (*records.VersionList, time.Time, error) {
	pol := g.Current()
	if pol == nil {
		return list, time.Time{}, nil
	}
	addr := p.String()
	sub := pol.For(policy.Provider, addr) // the address evaluated once for all its versions
	if err := g.checkSubject(&sub, policy.Provider, addr); err != nil {
		return nil, time.Time{}, err
	}
	now := g.now()
	if f, ok := g.filtered(addr, list, pol, now); ok {
		return f.out, f.next, nil
	}
	rels := g.providerReleases(ctx, sub.Window(), p, list, now).rels
	var next time.Time
	out := list
	unknown := false
	for i, e := range list.Versions {
		rel := rels[e.Version]
		v := sub.Version(e.Version, rel, now)
		if v.Allowed {
			if out != list {
				out.Versions = append(out.Versions, e)
			}
			continue
		}
		if out == list {
			out = list.WithVersions(slices.Clone(list.Versions[:i]))
		}
		out.Held = append(out.Held, fmt.Sprintf("%s %s is held back by the mirror's package policy: %s", addr, e.Version, v.Message()))
		g.refused(policy.Provider, addr, e.Version, rel, v, false)
		next = earliest(next, v.AvailableAt)
		unknown = unknown || v.Rule == policy.RuleMinReleaseAge && !rel.Known
	}
	if !unknown {
		g.keepFiltered(addr, filteredList{src: list, pol: pol, out: out, next: next})
	}
	return out, next, nil
}

// filteredList is a version list as the policy pol left it, kept while
// the list and the policy in force are the same and no version of it
// became available (see next). It is kept by the policy it was filtered
// with, not by the Generation read after it: a policy put in force
// between the two readings would have the list filtered by the one
// before kept under the new one's generation, and listed after the
// reload until the list changed.
type filteredList struct {
	src, out *records.VersionList
	pol      *policy.Policy
	next     time.Time
}

func (st *state) filtered(addr string, src *records.VersionList, pol *policy.Policy, now time.Time) (filteredList, bool) {
	st.mu.Lock()
	f, ok := st.lists[addr]
	st.mu.Unlock()
	if !ok || f.src != src || f.pol != pol || !f.next.IsZero() && !now.Before(f.next) {
		return filteredList{}, false
	}
	return f, true
}

func (st *state) keepFiltered(addr string, f filteredList) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.lists == nil || len(st.lists) >= maxHeldSeen {
		st.lists = map[string]filteredList{}
	}
	st.lists[addr] = f
}

// providerReleases returns the release times of list's versions when a
// minimum release age of w applies to p (none are needed otherwise).
func (g *Gate) providerReleases(ctx context.Context, w time.Duration, p addrs.Provider, list *records.VersionList, now time.Time) datedVersions {
	if w <= 0 {
		return datedVersions{}
	}
	addr := p.String()
	g.mu.Lock()
	d, ok := g.rels[addr]
	g.mu.Unlock()
	if ok && d.src == list && d.window == w {
		return d.dated
	}
	dated := g.rel.providerReleases(ctx, p, list, w, now)
	for _, r := range dated.rels {
		if !r.Known {
			return dated // asked again next time
		}
	}
	g.mu.Lock()
	if g.rels == nil || len(g.rels) >= maxHeldSeen {
		g.rels = map[string]datedList{}
	}
	g.rels[addr] = datedList{src: list, window: w, dated: dated}
	g.mu.Unlock()
	return dated
}

// DatesProvider says whether judging a version of p needs p's version
// list, which dates it: a minimum release age applies to p. The caller
// reads the list (the provider records, below the gate's callers) and
// hands it to CheckProviderIn; when DatesProvider is false, nil will do.
func (g *Gate) DatesProvider(p addrs.Provider) bool {
	pol := g.Current()
	return pol != nil && pol.Window(policy.Provider, p.String()) > 0
}

// CheckProviderIn refuses version v of p when the policy in effect holds
// it back: a *PolicyError. list, the version list v was found in, dates
// v (required when DatesProvider says so): a provider's documents are
// judged with the list that answered for them, not a second one read.
// A version that list's dating took to be as old as a newer one of its
// line is dated by its own signature here, learned from the origin when
// nothing here knows it (releaseTimes.ownRelease).
// The address rules (deny, allow) were decided before the call reached
// the engine (CheckAddress, asked by mirror/served); an address they
// refuse, should a caller come without asking, is refused here with its
// version, as every version of it is (policy.Subject.Version).
func (g *Gate) CheckProviderIn(ctx context.Context, p addrs.Provider, v versions.Version, list *records.VersionList) error {
	pol := g.Current()
	if pol == nil {
		return nil
	}
	addr := p.String()
	sub := pol.For(policy.Provider, addr)
	now := g.now()
	var rel policy.Release
	if list != nil {
		dated := g.providerReleases(ctx, sub.Window(), p, list, now)
		rel = g.rel.ownRelease(ctx, p, v, dated, g.rel.canAsk(p))
	}
	verdict := sub.Version(v.String(), rel, now)
	if verdict.Allowed {
		return nil
	}
	g.refused(policy.Provider, addr, v.String(), rel, verdict, true)
	return &PolicyError{Kind: policy.Provider, Address: addr, Version: v.String(), Verdict: verdict}
}

func earliest(a, b time.Time) time.Time {
	if b.IsZero() || !a.IsZero() && a.Before(b) {
		return a
	}
	return b
}

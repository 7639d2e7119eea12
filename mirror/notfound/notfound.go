// Package notfound remembers, for a short while, what an origin said
// does not exist: its definite 404 (discovery.ErrNotFound) to a
// provider's version list, a version's package metadata for a platform,
// the size of a version's archive (Memory.ArchiveSize: the OCI side's
// first-byte ask, and the download answer it asks again when that
// fails), a module's version list or a module version's download
// location. While
// an answer is remembered, the same question is answered with it and the
// origin is not asked, so that a client naming a provider or module that
// does not exist (a typo repeated by a fleet of CI jobs, or a loop over
// made-up names) costs the origin one request per period, not one each.
//
// It is a decorator of the engine's origins (Memory.Providers,
// Memory.Modules): every way to an origin passes through it. It sits
// beneath the engine's coalescing and its cache, so that what the cache
// holds is served as before; it keeps nothing on disk, and it never
// remembers a failure (a 5xx, a 429, a timeout, a network error, a host
// that is not a provider registry at all): only the origin's own "not
// found". A successful answer to a question forgets what was remembered
// for it, and the import of an address (Memory.ForgetProvider,
// Memory.ForgetModule) forgets everything remembered of it.
//
// What is remembered is bounded: the origins it remembers for are the
// engine's allowed origins, each with at most Config.MaxEntries answers,
// the least recently used dropped first; an answer is dropped once its
// period (Config.TTL) ended. Both change while serving (Memory.SetTTL,
// Memory.SetMaxEntries): a period changed applies to what is remembered
// already, and a period of zero forgets everything at once. It decides
// nothing else: the engine composes it, and the engine's callers judge
// what a not-found means.
package notfound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/mirror/originguard"
)

// DefaultMaxEntries is Config.MaxEntries' default.
const DefaultMaxEntries = 10000

// Config configures a Memory.
type Config struct {
	// TTL is how long an origin's not-found answer is remembered. Zero
	// or less: nothing is remembered until SetTTL gives a period.
	TTL time.Duration
	// MaxEntries bounds the answers remembered for one origin host; the
	// least recently used is dropped first. Default DefaultMaxEntries.
	MaxEntries int
	// Origins are the hosts answers are remembered for (the engine's
	// allowed origins, in svchost comparison form). A not-found of any
	// other host is passed on and not remembered.
	Origins []svchost.Hostname
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Metrics receives what a Memory observes. Package metrics implements
// it. origin is one of Config.Origins.
type Metrics interface {
	// NotFoundRemembered counts an answer given from memory: an origin
	// request not made.
	NotFoundRemembered(origin string)
	// NotFoundEntries says how many answers are remembered for origin.
	NotFoundEntries(origin string, n int)
}

// Memory is the origins' not-found answers, remembered. Its methods are
// safe for concurrent use; a nil *Memory remembers nothing.
type Memory struct {
	ttl        atomic.Int64 // a time.Duration; zero: nothing is remembered
	maxEntries atomic.Int64 // per host
	now        func() time.Time
	metrics    Metrics
	hosts      map[svchost.Hostname]*hostMemory // set by New, read only
}

// hostMemory is one origin host's answers, least recently used first.
type hostMemory struct {
	host string
	mu   sync.Mutex
	lru  *simplelru.LRU[string, answer]
}

// answer is one remembered not-found: the origin's error, as it was
// returned, and when it was given (it is forgotten once the period in
// force then has passed since).
type answer struct {
	err error
	at  time.Time
}

// New returns the memory cfg describes.
func New(cfg Config, metrics Metrics) (*Memory, error) {
	if metrics == nil {
		return nil, errors.New("notfound: metrics are required")
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Memory{now: cfg.Now, metrics: metrics, hosts: make(map[svchost.Hostname]*hostMemory, len(cfg.Origins))}
	m.ttl.Store(int64(max(cfg.TTL, 0)))
	m.maxEntries.Store(int64(cfg.MaxEntries))
	for _, h := range cfg.Origins {
		l, err := simplelru.NewLRU[string, answer](cfg.MaxEntries, nil)
		if err != nil {
			return nil, fmt.Errorf("notfound: %w", err)
		}
		m.hosts[h] = &hostMemory{host: h.String(), lru: l}
		metrics.NotFoundEntries(h.String(), 0)
	}
	return m, nil
}

// TTL is how long an answer is remembered; zero for a nil Memory.
func (m *Memory) TTL() time.Duration {
	if m == nil {
		return 0
	}
	return time.Duration(m.ttl.Load())
}

// SetTTL makes d the period of every answer, from the next question on:
// those remembered already too (an answer given longer than d ago is
// forgotten). Zero or less remembers nothing more and forgets every
// answer at once. A nil Memory ignores it.
func (m *Memory) SetTTL(d time.Duration) {
	if m == nil {
		return
	}
	m.ttl.Store(int64(max(d, 0)))
	if d > 0 {
		return
	}
	for _, hm := range m.hosts {
		hm.change(m.metrics, func(l *simplelru.LRU[string, answer]) { l.Purge() })
	}
}

// SetMaxEntries bounds the answers remembered for one origin host to n
// (n <= 0: DefaultMaxEntries); a host holding more forgets the least
// recently used at once. A nil Memory ignores it.
func (m *Memory) SetMaxEntries(n int) {
	if m == nil {
		return
	}
	if n <= 0 {
		n = DefaultMaxEntries
	}
	m.maxEntries.Store(int64(n))
	for _, hm := range m.hosts {
		hm.change(m.metrics, func(l *simplelru.LRU[string, answer]) { l.Resize(n) })
	}
}

// MaxEntries is the bound of the answers remembered for one origin host;
// zero for a nil Memory.
func (m *Memory) MaxEntries() int {
	if m == nil {
		return 0
	}
	return int(m.maxEntries.Load())
}

// Entries returns how many answers are remembered for host (some of
// them may have ended their period, and are dropped when next asked).
func (m *Memory) Entries(host svchost.Hostname) int {
	if m == nil {
		return 0
	}
	hm := m.hosts[host]
	if hm == nil {
		return 0
	}
	hm.mu.Lock()
	defer hm.mu.Unlock()
	return hm.lru.Len()
}

// ask answers the question key of host: the remembered not-found while
// its period lasts, else the origin's answer through call, which is
// remembered when it is a not-found (as notFound says: registryNotFound
// for a registry's answers) and forgets what was when it is not (a
// failure forgets nothing: it says nothing of what exists).
func (m *Memory) ask(host svchost.Hostname, key string, notFound func(error) bool, call func() error) error {
	hm, ttl := m.hosts[host], m.TTL()
	if hm == nil || ttl <= 0 {
		return call()
	}
	if err := hm.get(m.metrics, key, m.now(), ttl); err != nil {
		m.metrics.NotFoundRemembered(hm.host)
		return err
	}
	err := call()
	switch {
	case notFound(err):
		hm.change(m.metrics, func(l *simplelru.LRU[string, answer]) {
			// Read again under the host's lock, which SetTTL's forgetting
			// takes after the period changed: an answer given while the
			// memory was being turned off is not kept past it.
			if m.TTL() > 0 {
				l.Add(key, answer{err: err, at: m.now()})
			}
		})
	case err == nil:
		hm.change(m.metrics, func(l *simplelru.LRU[string, answer]) { l.Remove(key) })
	}
	return err
}

// get returns the answer remembered under key while its period (ttl)
// lasts, dropping one whose period ended.
func (hm *hostMemory) get(metrics Metrics, key string, now time.Time, ttl time.Duration) error {
	hm.mu.Lock()
	defer hm.mu.Unlock()
	a, ok := hm.lru.Get(key)
	if !ok {
		return nil
	}
	if now.Before(a.at.Add(ttl)) {
		return a.err
	}
	hm.lru.Remove(key)
	metrics.NotFoundEntries(hm.host, hm.lru.Len())
	return nil
}

// change runs fn on the host's answers, and tells metrics how many
// there are then.
func (hm *hostMemory) change(metrics Metrics, fn func(*simplelru.LRU[string, answer])) {
	hm.mu.Lock()
	defer hm.mu.Unlock()
	before := hm.lru.Len()
	fn(hm.lru)
	if n := hm.lru.Len(); n != before {
		metrics.NotFoundEntries(hm.host, n)
	}
}

// forget drops every answer whose key starts with prefix.
func (m *Memory) forget(host svchost.Hostname, prefix string) {
	if m == nil {
		return
	}
	hm := m.hosts[host]
	if hm == nil {
		return
	}
	hm.change(m.metrics, func(l *simplelru.LRU[string, answer]) {
		for _, k := range l.Keys() {
			if strings.HasPrefix(k, prefix) {
				l.Remove(k)
			}
		}
	})
}

// The questions' keys: what is asked, then the canonical address (the
// addrs form, which names the host), then the version and platform. A
// provider's keys all start with providerPrefix(p), a module's with
// modulePrefix(m).
//
// A module's keys end with the module as its origin was asked for it
// (addrs.Module.OriginPath: the namespace and name as the client spelt
// them): a registry may match them with their case, and then its 404
// for one spelling says nothing of another, which may exist. So a 404
// answers again only the spelling it was given for; whatever any
// spelling finds is kept by the engine under the normal form and served
// to every spelling from the cache, above the memory (one module for
// all its spellings). Its prefix is the normal form's, so that
// ForgetModule forgets every spelling.
func providerPrefix(p addrs.Provider) string { return "provider " + p.String() + " " }
func modulePrefix(m addrs.Module) string     { return "module " + m.String() + " " }
func moduleAsked(m addrs.Module) string {
	p := m.OriginPath()
	return " as " + p[0] + "/" + p[1] + "/" + p[2]
}

// ForgetProvider forgets every answer remembered of p: its version list
// and its versions' packages. The engine calls it when it imports a
// version of p.
func (m *Memory) ForgetProvider(p addrs.Provider) { m.forget(p.Hostname, providerPrefix(p)) }

// ForgetModule forgets every answer remembered of module m, for every
// spelling it was asked in. The engine calls it when it imports a
// version of m.
func (m *Memory) ForgetModule(mod addrs.Module) { m.forget(mod.Hostname, modulePrefix(mod)) }

// Providers returns next behind the memory: its Versions and Package
// not-found answers are remembered. A nil Memory returns next.
func (m *Memory) Providers(next originguard.Origin) originguard.Origin {
	if m == nil {
		return next
	}
	return providers{Origin: next, m: m}
}

type providers struct {
	originguard.Origin // FetchSums, OpenArchive, ArchiveSize: passed on
	m                  *Memory
}

func (o providers) Versions(ctx context.Context, p addrs.Provider) (out discovery.VersionList, err error) {
	err = o.m.ask(p.Hostname, providerPrefix(p)+"versions", registryNotFound, func() error {
		out, err = o.Origin.Versions(ctx, p)
		return err
	})
	return out, err
}

func (o providers) Package(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (pkg *discovery.Package, err error) {
	err = o.m.ask(p.Hostname, providerPrefix(p)+"package "+version+" "+pl.String(), registryNotFound, func() error {
		pkg, err = o.Origin.Package(ctx, p, version, pl)
		return err
	})
	return pkg, err
}

// ArchiveSize answers the size of p's archive whose sha256 is sum with
// the not-found remembered for it, or else with size, whose not-found
// (its download URL's 404 or 410, as a relocation to the URL the origin
// gives now did not help) is remembered: the OCI side learns the sizes
// a version's index states this way, once per period for an archive the
// origin lacks, not once per index asked for. A nil Memory calls size.
func (m *Memory) ArchiveSize(p addrs.Provider, sum string, size func() (int64, error)) (n int64, err error) {
	if m == nil {
		return size()
	}
	err = m.ask(p.Hostname, providerPrefix(p)+"archive_size "+strings.ToLower(sum), archiveGone, func() error {
		n, err = size()
		return err
	})
	return n, err
}

// registryNotFound says whether err is a registry's answer that what was
// asked does not exist.
func registryNotFound(err error) bool { return errors.Is(err, discovery.ErrNotFound) }

// archiveGone says whether err is the origin's word that an archive is
// not there: a download URL answers 404 or 410 (not discovery.ErrNotFound,
// which is a registry's answer), or a registry's 404.
func archiveGone(err error) bool {
	var oe *discovery.OriginError
	if errors.As(err, &oe) && (oe.StatusCode == http.StatusNotFound || oe.StatusCode == http.StatusGone) {
		return true
	}
	return errors.Is(err, discovery.ErrNotFound)
}

// ModuleOrigin is the module side of the engine's origins
// (mirror/modules.Origin). *discovery.Client implements it.
type ModuleOrigin interface {
	ModuleVersions(ctx context.Context, m addrs.Module) ([]string, error)
	ModuleLocation(ctx context.Context, m addrs.Module, version string) (discovery.ModuleDownload, error)
	OpenSource(ctx context.Context, origin svchost.Hostname, rawURL string) (io.ReadCloser, int64, error)
	SourceHTTPClient(origin svchost.Hostname) *http.Client
}

// Modules returns next behind the memory: its ModuleVersions and
// ModuleLocation not-found answers are remembered (a module's source
// host is not an origin registry: what it answers is passed on). A nil
// Memory returns next.
func (m *Memory) Modules(next ModuleOrigin) ModuleOrigin {
	if m == nil {
		return next
	}
	return modules{ModuleOrigin: next, m: m}
}

type modules struct {
	ModuleOrigin // OpenSource, SourceHTTPClient: passed on
	m            *Memory
}

func (o modules) ModuleVersions(ctx context.Context, mod addrs.Module) (out []string, err error) {
	err = o.m.ask(mod.Hostname, modulePrefix(mod)+"versions"+moduleAsked(mod), registryNotFound, func() error {
		out, err = o.ModuleOrigin.ModuleVersions(ctx, mod)
		return err
	})
	return out, err
}

func (o modules) ModuleLocation(ctx context.Context, mod addrs.Module, version string) (loc discovery.ModuleDownload, err error) {
	err = o.m.ask(mod.Hostname, modulePrefix(mod)+"location "+version+moduleAsked(mod), registryNotFound, func() error {
		loc, err = o.ModuleOrigin.ModuleLocation(ctx, mod, version)
		return err
	})
	return loc, err
}

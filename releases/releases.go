package releases

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/flights"
	"github.com/tfmirror/tfmirror/v2/internal/hostport"
	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// The publishers' keys shipped with tfmirror (see keys/README.md for their
// sources and fingerprints).
var (
	//go:embed keys/hashicorp.asc
	HashiCorpKey string
	//go:embed keys/opentofu.asc
	OpenTofuKey string
)

// Publisher is one of the two layouts served.
type Publisher string

const (
	HashiCorp Publisher = "hashicorp"
	OpenTofu  Publisher = "opentofu"
)

// Defaults of Config.
const (
	DefaultHashiCorpURL        = "https://releases.hashicorp.com/"
	DefaultOpenTofuDownloadURL = "https://github.com/opentofu/opentofu/releases/download/"
	DefaultOpenTofuAPIURL      = "https://get.opentofu.org/tofu/api.json"
	// TofuProduct is OpenTofu's one product, as its files name it.
	TofuProduct = "tofu"
)

// ErrNotFound is a product, version or file the releases side does not
// have: records.ErrVersionNotFound, so that it maps to 404 like the
// provider doors' misses.
var ErrNotFound = records.ErrVersionNotFound

// Origin is what the releases side needs of the origin client
// (*discovery.Client): documents and archives, each from a URL whose host
// the client allows (p names that host; only p.Hostname is used).
type Origin interface {
	// FetchFile fetches a small file; one the origin answers 404 for is
	// discovery.ErrNotFound.
	FetchFile(ctx context.Context, p addrs.Provider, rawURL string, limit int64) ([]byte, error)
	OpenArchive(ctx context.Context, p addrs.Provider, rawURL string) (io.ReadCloser, int64, error)
}

// Engine is what the releases side needs of the pull-through engine
// (*mirror.Engine): its one fetcher of immutable files, and the air-gap
// side that imports a file (airgap.go).
type Engine interface {
	OpenBlob(ctx context.Context, b mirror.Blob) (*mirror.Archive, error)
	HasBlob(sha string) bool
	AirGap() *mirror.AirGap
}

// Store keeps the verified SHA256SUMS and the version lists (*cache.Store);
// retention lists and removes the SHA256SUMS through it (ScanVersions,
// RemoveVersion), and an export lists those it holds (ScanMeta).
type Store interface {
	PutMeta(key string, v any) error
	GetMeta(key string, v any) (time.Time, error)
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
	DeleteMeta(key string) error
}

// Metrics receives, per publisher and product, what is served and what is
// refused. Package metrics implements it; nil records nothing.
type Metrics interface {
	// CLIServed counts an answer: kind is "list", "sums", "signature",
	// "archive", or "missing" (an optional file the origin lacks, answered
	// not found from memory without asking it again); stale says a list was served from the cache because the
	// origin failed.
	CLIServed(publisher, product, kind string, stale bool)
	// CLIRefused counts a refusal: reason is a verify.Reason or a policy rule.
	CLIRefused(publisher, product, reason string)
	// VerificationFailed counts a SHA256SUMS refused by verification
	// (reason is a verify.Reason), with the providers' refusals: what
	// the verification alert watches. An archive's refusal is counted
	// by the engine that fetched it.
	VerificationFailed(reason string)
}

// Config configures Releases. Zero values take the documented defaults.
type Config struct {
	// HashiCorpURL is the base of HashiCorp's releases layout. Default
	// DefaultHashiCorpURL.
	HashiCorpURL string
	// HashiCorpProducts are the products served. Default: terraform.
	// terraform-provider-* is never served (the provider doors are).
	HashiCorpProducts []string
	// HashiCorpKeys are the armored keys a SHA256SUMS must verify with.
	// Default HashiCorpKey.
	HashiCorpKeys []string
	// OpenTofuDownloadURL is the base of OpenTofu's release files
	// (vVERSION/FILE). Default DefaultOpenTofuDownloadURL.
	OpenTofuDownloadURL string
	// OpenTofuAPIURL is OpenTofu's version list. Default DefaultOpenTofuAPIURL.
	OpenTofuAPIURL string
	// OpenTofuKeys are the armored keys tofu_VERSION_SHA256SUMS.gpgsig
	// must verify with. Default OpenTofuKey.
	OpenTofuKeys []string
	// ListTTL is how long a version list is served before it is fetched
	// again, and how long an optional file of a release that the origin
	// lacks (OpenTofu's cosign .sig, .pem) is answered not found without
	// asking it again. Default 10 minutes.
	ListTTL time.Duration
	// StaleAfter is how long a caller waits for the refresh of a version
	// list the cache holds before it is answered with the cached list,
	// stale (ListState.Stale), while the refresh goes on for the callers
	// after it, as a provider's or a module's list is
	// (mirror.Config.StaleAfter). Default 5 seconds: an origin that
	// stalls would otherwise hold every caller until OriginTimeout.
	StaleAfter time.Duration
	// OriginTimeout bounds one metadata fetch (a list, a SHA256SUMS and
	// its signature). Default 2 minutes.
	OriginTimeout time.Duration
	// MaxListBytes bounds a version list from the origin. Default 64 MiB.
	MaxListBytes int64
	// ArchiveLimits bound the check that an archive is a zip holding the
	// program (see verify.CheckCLIArchive).
	ArchiveLimits verify.Limits
	// Offline: no origin is contacted; what the cache holds is served.
	Offline bool
	// OriginRefused, when set, is told of each SHA256SUMS or archive an
	// origin answered that failed verification: the origin's host, as
	// the origin client names it, and the verify.Reason (as
	// mirror.Config.OriginRefused is of provider packages). What an
	// air-gap bundle brought is no origin's.
	OriginRefused func(origin, reason string)
	Logger        *slog.Logger
	Metrics       Metrics
	Now           func() time.Time
}

// maxSmallDocument bounds a SHA256SUMS or a signature.
const maxSmallDocument = 1 << 20

// Releases is the releases side: safe for concurrent use.
type Releases struct {
	cfg      Config
	origin   Origin
	engine   Engine
	store    Store
	log      *slog.Logger
	metrics  Metrics
	keys     map[Publisher]keyring
	products map[string]bool

	flights *flights.Group // the fetches under way, apart from their callers; Close ends them and waits

	notify notifier // retention's (Notify)

	// imports is held by an import (AirGap.Import) from its first
	// archive to its version list, and by Inventory.RemoveVersion:
	// retention removes a version, then reads what names its archives,
	// once no import that may have found one of them cached is under
	// way (as the engine removes its versions under its import lock).
	imports sync.Mutex

	mu    sync.Mutex
	sums  map[string]*Sums     // verified, by sumsKey
	lists map[string]*listMemo // by listKey

	// missing remembers the optional files the origin answered 404, by
	// fileKey, until the time each is asked again (files.go).
	missing *missingFiles

	// stale bounds the log lines of the lists served stale (lists.go):
	// logged by every request for one while its origin is down, as many
	// as clients ask (the metrics count each all the same).
	stale *logbound.Warnings
}

// keyring is a publisher's keys: armored (for verify's words when no
// key verifies a signature), and each block read once, at start, within
// verify's bounds (verify.SigningKeys: who verifies with keys again and
// again reads them once), to verify with and to tell which key signed.
type keyring struct {
	armored []string
	blocks  []openpgp.EntityList // the keys of each armored block, in order
	// ids are the short key IDs of the keys, upper-case hex, in the order
	// of the blocks and of the keys within each (a block may hold more
	// than one key: gpg --export --armor A B writes one).
	ids []string
}

// newKeyring reads the armored keys within the bounds verify reads
// signing keys within (verify.ReadKeys' defaults: verify.MaxSigningKeys
// keys in all, verify.MaxArmoredKeyBytes each, no key too costly to
// verify with, verify.MaxKeySignatures self-signatures in all), which
// verify.SignatureTime applies to them at every
// verification: keys beyond them are refused here, at start, instead of
// failing every verification.
func newKeyring(armored []string) (keyring, error) {
	k := keyring{armored: armored}
	keys := 0
	for i, a := range armored {
		el, err := verify.ReadKeys([]byte(a), verify.KeyLimits{})
		if err != nil || len(el) == 0 {
			return k, fmt.Errorf("key %d: not an armored OpenPGP public key read within the bounds on signing keys: %v", i+1, err)
		}
		if keys += len(el); keys > verify.MaxSigningKeys {
			return k, fmt.Errorf("more than %d keys: no more are read to verify a signature", verify.MaxSigningKeys)
		}
		k.blocks = append(k.blocks, el)
		for _, e := range el {
			k.ids = append(k.ids, shortID(e))
		}
	}
	// Together, as every verification reads them (verify.SigningKeys):
	// within verify.MaxKeySignatures self-signatures in all.
	if _, err := verify.SigningKeys(armored); err != nil {
		return k, fmt.Errorf("the keys together, as each verification reads them: %v", err)
	}
	return k, nil
}

// CheckKeys returns the error New refuses armored with as a publisher's
// keys (Config.HashiCorpKeys, Config.OpenTofuKeys), or nil: each block
// an armored OpenPGP public key, all of them read within verify's bounds
// on signing keys (newKeyring, which New reads them with). cmd/tfmirror
// checks the keys files with it, so that what a start refuses is refused
// by config check and by a reload that keeps a new file for a restart.
func CheckKeys(armored []string) error {
	_, err := newKeyring(armored)
	return err
}

// shortID is the short ID of e's primary key, upper-case hex ("72D7468F").
func shortID(e *openpgp.Entity) string { return strings.ToUpper(e.PrimaryKey.KeyIdShortString()) }

// signerID is the short ID of the key of keys that holds the (sub)key
// issuer names (16 hex digits, as verify.VerifyDetached gives it); "" when
// none does.
func signerID(keys openpgp.EntityList, issuer string) string {
	for _, e := range keys {
		if fmt.Sprintf("%016X", e.PrimaryKey.KeyId) == issuer {
			return shortID(e)
		}
		for _, sub := range e.Subkeys {
			if sub.PublicKey != nil && fmt.Sprintf("%016X", sub.PublicKey.KeyId) == issuer {
				return shortID(e)
			}
		}
	}
	return ""
}

// withURLs is c with the publishers' URLs it leaves empty defaulted.
func (c Config) withURLs() Config {
	if c.HashiCorpURL == "" {
		c.HashiCorpURL = DefaultHashiCorpURL
	}
	if c.OpenTofuDownloadURL == "" {
		c.OpenTofuDownloadURL = DefaultOpenTofuDownloadURL
	}
	if c.OpenTofuAPIURL == "" {
		c.OpenTofuAPIURL = DefaultOpenTofuAPIURL
	}
	return c
}

// PublisherHosts are the origin hosts each publisher's releases come
// from, by c's URLs or the defaults, as the origin client names them
// (HashiCorp's one; OpenTofu's version list's, then its downloads', once
// when they are one): a publisher is served only when all of its hosts
// are allowed origins. A URL New would refuse gives no host.
func (c Config) PublisherHosts() map[Publisher][]svchost.Hostname {
	c = c.withURLs()
	out := map[Publisher][]svchost.Hostname{}
	for _, u := range []struct {
		p   Publisher
		raw string
	}{{HashiCorp, c.HashiCorpURL}, {OpenTofu, c.OpenTofuAPIURL}, {OpenTofu, c.OpenTofuDownloadURL}} {
		if o, err := originOfBase(u.raw); err == nil && !slices.Contains(out[u.p], o.Hostname) {
			out[u.p] = append(out[u.p], o.Hostname)
		}
	}
	return out
}

// New builds the releases side.
func New(cfg Config, origin Origin, engine Engine, store Store) (*Releases, error) {
	for _, p := range cfg.HashiCorpProducts {
		if err := CheckProductName(p); err != nil {
			return nil, err
		}
	}
	if origin == nil || engine == nil || store == nil {
		return nil, errors.New("releases: origin, engine and store are required")
	}
	cfg = cfg.withURLs()
	for _, u := range []string{cfg.HashiCorpURL, cfg.OpenTofuDownloadURL, cfg.OpenTofuAPIURL} {
		if _, err := originOfBase(u); err != nil {
			return nil, err
		}
	}
	if cfg.HashiCorpProducts == nil {
		cfg.HashiCorpProducts = []string{"terraform"}
	}
	if len(cfg.HashiCorpKeys) == 0 {
		cfg.HashiCorpKeys = []string{HashiCorpKey}
	}
	if len(cfg.OpenTofuKeys) == 0 {
		cfg.OpenTofuKeys = []string{OpenTofuKey}
	}
	if cfg.ListTTL <= 0 {
		cfg.ListTTL = 10 * time.Minute
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 5 * time.Second
	}
	if cfg.OriginTimeout <= 0 {
		cfg.OriginTimeout = 2 * time.Minute
	}
	if cfg.MaxListBytes <= 0 {
		cfg.MaxListBytes = 64 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Releases{cfg: cfg, origin: origin, engine: engine, store: store, log: cfg.Logger, metrics: cfg.Metrics,
		keys: map[Publisher]keyring{}, products: map[string]bool{},
		sums: map[string]*Sums{}, lists: map[string]*listMemo{}, missing: newMissingFiles(cfg.ListTTL, cfg.Now),
		stale: lifetime.NewStaleWarnings()}
	var err error
	if r.keys[HashiCorp], err = newKeyring(cfg.HashiCorpKeys); err != nil {
		return nil, fmt.Errorf("releases: HashiCorp keys: %w", err)
	}
	if r.keys[OpenTofu], err = newKeyring(cfg.OpenTofuKeys); err != nil {
		return nil, fmt.Errorf("releases: OpenTofu keys: %w", err)
	}
	for _, p := range cfg.HashiCorpProducts {
		r.products[p] = true
	}
	r.flights = flights.New(r.log)
	return r, nil
}

// Close ends the origin fetches under way, which run apart from their
// callers (detached), and returns once they have ended, so that none
// writes to the cache closed after it; the callers still waiting for
// one, and a fetch asked for afterwards, fail ("releases: closed",
// flights.ErrClosed).
func (r *Releases) Close() { r.flights.Close() }

// ListWait is how long a version list's caller waits for the origin
// before it is answered without what the origin has not answered yet:
// StaleAfter, as for the list's own refresh, at most OriginTimeout. The
// package policy's lookups that date a list's newest versions
// (mirror/served.ReleasesConfig.ListWait) wait it, all of them together,
// so that an origin that stalls holds a list no longer than its refresh.
func (r *Releases) ListWait() time.Duration { return min(r.cfg.StaleAfter, r.cfg.OriginTimeout) }

// Products are the HashiCorp products served, in the configured order.
func (r *Releases) Products() []string { return append([]string(nil), r.cfg.HashiCorpProducts...) }

// CheckProductName says whether p may be a HashiCorp product served
// (Config.HashiCorpProducts, the settings' --releases-hashicorp-products),
// as New checks it: the settings check theirs with it, so that what New
// refuses is refused before anything is opened, and by config check.
func CheckProductName(p string) error {
	if !validProduct(p) {
		return fmt.Errorf("releases: %q is not a product HashiCorp's releases layout serves here (lowercase letters, digits and dashes; terraform-provider-* is served by the provider doors)", p)
	}
	return nil
}

// validProduct: a name HashiCorp's layout uses, and not a provider.
func validProduct(p string) bool {
	if p == "" || len(p) > 64 || strings.HasPrefix(p, "terraform-provider-") {
		return false
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// CheckProduct refuses a product of publisher pub that is not served
// (ErrNotFound), asking nothing of an origin.
func (r *Releases) CheckProduct(pub Publisher, product string) error {
	switch {
	case pub == OpenTofu && product == TofuProduct:
		return nil
	case pub == HashiCorp && r.products[product]:
		return nil
	}
	if pub == HashiCorp {
		return fmt.Errorf("%w: %s product %q is not served by this mirror: releases_hashicorp_products (--releases-hashicorp-products) names the ones it serves", ErrNotFound, pub, product)
	}
	return fmt.Errorf("%w: %s product %q is not served by this mirror", ErrNotFound, pub, product)
}

// CheckOrigin says whether raw may be an origin URL of the releases (the
// settings' --releases-*-url): an absolute https URL with a host, no
// user name or password, no query and no fragment; the error never
// repeats what it refuses.
func CheckOrigin(raw string) error {
	_, err := originOfBase(raw)
	return err
}

// originOfBase is originOf for an origin URL of the releases (one of
// Config's), which CheckOrigin describes: the files' paths are joined
// after it, so a query or a fragment would end up inside them, and a
// token in one would be shown wherever the URL is.
func originOfBase(raw string) (addrs.Provider, error) {
	p, err := originOf(raw)
	if err != nil {
		return addrs.Provider{}, err
	}
	if strings.ContainsAny(raw, "?#") {
		u, _ := url.Parse(raw) // parsed by originOf
		return addrs.Provider{}, fmt.Errorf("releases: %q carries a query or a fragment, which a releases origin URL may not: the door joins the files' paths after it, and a token in it would be shown wherever the URL is; give the origin's token in --credentials-file instead (docs/operations.md, Origin credentials)", redact.URL(u))
	}
	return p, nil
}

// originOf is the origin client's p for a URL: its host.
func originOf(raw string) (addrs.Provider, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return addrs.Provider{}, errors.New("releases: a URL that does not parse")
	}
	if u.Scheme != "https" || u.Host == "" {
		return addrs.Provider{}, fmt.Errorf("releases: %q is not an absolute https URL", redact.URL(u))
	}
	if err := hostport.Check(u); err != nil {
		return addrs.Provider{}, fmt.Errorf("releases: %q: %w", redact.URL(u), err)
	}
	if u.User != nil {
		// It would be sent as Basic credentials, and shown wherever the
		// URL is: an origin's token goes in the credentials file.
		return addrs.Provider{}, fmt.Errorf("releases: %q carries a user name or password: give the origin's token in --credentials-file instead (docs/operations.md, Origin credentials)", redact.URL(u))
	}
	h, err := addrs.ParseHost(u.Host)
	if err != nil {
		return addrs.Provider{}, fmt.Errorf("releases: %q: %w", redact.URL(u), err)
	}
	return addrs.Provider{Hostname: h}, nil
}

// fetchDocument fetches a small document; an origin's 404 is ErrNotFound.
func (r *Releases) fetchDocument(ctx context.Context, raw string, limit int64) ([]byte, error) {
	if r.cfg.Offline {
		return nil, records.ErrOffline
	}
	p, err := originOf(raw)
	if err != nil {
		return nil, err
	}
	data, err := r.origin.FetchFile(ctx, p, raw, limit)
	if errors.Is(err, discovery.ErrNotFound) {
		return nil, fmt.Errorf("%w: the origin has no %s", ErrNotFound, lastSegment(raw))
	}
	return data, err
}

func lastSegment(raw string) string {
	if i := strings.LastIndexByte(raw, '/'); i >= 0 {
		return raw[i+1:]
	}
	return raw
}

// detached runs fn once for every caller asking with key at the same
// time, apart from them (internal/flights), bounded by OriginTimeout, so
// that no caller going away cancels it for the others; only Close does.
func (r *Releases) detached(ctx context.Context, key string, fn func(ctx context.Context) (any, error)) (any, error) {
	v, err := r.flights.Do(ctx, key, func(ctx context.Context) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, r.cfg.OriginTimeout)
		defer cancel()
		return fn(ctx)
	})
	if errors.Is(err, flights.ErrClosed) {
		return nil, fmt.Errorf("releases: %w", err)
	}
	return v, err
}

type noMetrics struct{}

func (noMetrics) CLIServed(string, string, string, bool) {}
func (noMetrics) CLIRefused(string, string, string)      {}
func (noMetrics) VerificationFailed(string)              {}

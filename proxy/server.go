package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/mux"
	svchost "github.com/hashicorp/terraform-svchost"
	"golang.org/x/sync/singleflight"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
)

// Origin is what the proxy needs from origin registries. *discovery.Client
// implements it.
type Origin interface {
	Versions(ctx context.Context, p discovery.Provider) ([]discovery.VersionInfo, error)
	Package(ctx context.Context, p discovery.Provider, version string, pl discovery.Platform) (*discovery.Package, error)
	FetchDocument(ctx context.Context, p discovery.Provider, rawURL string, limit int64) ([]byte, error)
	OpenArchive(ctx context.Context, p discovery.Provider, rawURL string) (io.ReadCloser, int64, error)
}

// Store is what the proxy needs from the cache. *cache.Store implements it.
type Store interface {
	PutMeta(key string, v any) error
	GetMeta(key string, v any) (time.Time, error)
	StatBlob(sha string) (cache.BlobInfo, error)
	OpenBlob(sha string) (cache.BlobReader, error)
	NewBlobWriter(expectedSHA string) (cache.BlobWriter, error)
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
	Stats() (archives int, bytes int64)
}

// Metrics receives what the proxy observes. Package metrics implements it;
// a nil Metrics in Config records nothing.
type Metrics interface {
	// CacheLookup records a hit or miss for kind "versions", "package" or "archive".
	CacheLookup(kind string, hit bool)
	// StaleServed records a cached answer served because the origin failed.
	StaleServed(kind string)
	// Coalesced records a request that joined an origin fetch already under way.
	Coalesced(kind string)
	// VerificationFailed records a package refused for reason (a verify.Reason).
	VerificationFailed(reason string)
	// ArchiveFetchStarted records an origin archive fetch; done is called when it ends.
	ArchiveFetchStarted() (done func())
	// CacheWriteFailed records data that could not be stored.
	CacheWriteFailed()
}

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// AllowedOrigins are the origin registry hosts this mirror serves, in
	// any form svchost accepts. Requests for other hosts get 404 and cause
	// no outbound connection. Required.
	AllowedOrigins []string
	// Platforms limits VERSION.json to these os_arch platforms. Empty means all.
	Platforms []string
	// VersionsTTL is how long a provider's version list is served from the
	// cache before it is refreshed from the origin. Default 10 minutes.
	VersionsTTL time.Duration
	// OriginTimeout bounds one metadata operation against an origin
	// (discovery, version list, package metadata and checksums of a
	// version). It runs detached from the clients waiting for it.
	// Default 2 minutes.
	OriginTimeout time.Duration
	// ArchiveTimeout bounds one archive download from an origin. Default 1 hour.
	ArchiveTimeout time.Duration
	// MaxArchiveBytes refuses larger archives. Default 2 GiB.
	MaxArchiveBytes int64
	// HoldBack is how many final bytes of an archive streamed while it is
	// still being fetched are withheld until its checksum has matched.
	// Default 64 KiB.
	HoldBack int64
	// PublicURL is the mirror's base URL as clients reach it, shown on the
	// status page. Default: the scheme and host of each status request.
	PublicURL string
	// PlainHTTP says the mirror is served without TLS (behind a proxy).
	PlainHTTP bool
	// Version is shown on the status page.
	Version string
	// Logger receives errors, once each. Default: discard.
	Logger *slog.Logger
	// Metrics receives observations. Default: none.
	Metrics Metrics
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Auth, when set, requires a bearer token for index.json and
	// VERSION.json and signs the archive URLs in VERSION.json. Default:
	// no client authentication.
	Auth *Auth
	// Offline seals the mirror: no origin is ever contacted, cached
	// version lists are served however old, and whatever is not cached
	// fails with ErrOffline. Default false.
	Offline bool
}

// Server serves the provider network mirror protocol from the cache,
// filling it from origin registries on demand.
type Server struct {
	cfg       Config
	allowed   map[svchost.Hostname]bool
	platforms map[string]bool // nil = all
	origin    Origin
	store     Store
	log       *slog.Logger
	metrics   Metrics
	router    *mux.Router

	meta     singleflight.Group // version lists and package metadata
	archives *fetcher
	memo     *metaMemo // decoded version lists and package metadata

	documentCacheControl string // Cache-Control of fresh index.json and VERSION.json, from cfg.VersionsTTL
}

// New validates cfg and returns a Server using origin and store.
func New(cfg Config, origin Origin, store Store) (*Server, error) {
	if origin == nil || store == nil {
		return nil, errors.New("proxy: origin and store are required")
	}
	if len(cfg.AllowedOrigins) == 0 {
		return nil, errors.New("proxy: at least one allowed origin host is required")
	}
	s := &Server{
		cfg:     cfg,
		allowed: make(map[svchost.Hostname]bool),
		origin:  origin,
		store:   store,
		log:     cfg.Logger,
		metrics: cfg.Metrics,
		memo:    newMetaMemo(),
	}
	for _, h := range cfg.AllowedOrigins {
		host, err := svchost.ForComparison(strings.TrimSpace(h))
		if err != nil {
			return nil, fmt.Errorf("proxy: allowed origin %q: %w", h, err)
		}
		s.allowed[host] = true
	}
	if len(cfg.Platforms) > 0 {
		s.platforms = make(map[string]bool)
		for _, p := range cfg.Platforms {
			pl, err := parsePlatform(strings.TrimSpace(p))
			if err != nil {
				return nil, fmt.Errorf("proxy: platforms: %w", err)
			}
			s.platforms[pl.String()] = true
		}
	}
	if s.cfg.VersionsTTL <= 0 {
		s.cfg.VersionsTTL = 10 * time.Minute
	}
	if s.cfg.OriginTimeout <= 0 {
		s.cfg.OriginTimeout = 2 * time.Minute
	}
	if s.cfg.ArchiveTimeout <= 0 {
		s.cfg.ArchiveTimeout = time.Hour
	}
	if s.cfg.MaxArchiveBytes <= 0 {
		s.cfg.MaxArchiveBytes = 2 << 30
	}
	if s.cfg.HoldBack <= 0 {
		s.cfg.HoldBack = 64 << 10
	}
	if s.cfg.Now == nil {
		s.cfg.Now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	if s.cfg.Offline {
		s.origin = offlineOrigin{}
	}
	s.documentCacheControl = documentCacheControl(s.cfg.VersionsTTL)
	s.archives = newFetcher(s)
	s.router = s.routes()
	return s, nil
}

// ServeHTTP serves the mirror protocol.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.router.ServeHTTP(w, r)
}

// Router returns the mirror's router so that other handlers (status page,
// health, metrics) can be mounted beside the protocol routes.
func (s *Server) Router() *mux.Router { return s.router }

// Wait blocks until every archive fetch under way has ended or ctx is done.
// Used on shutdown so that interrupted fetches do not outlive the cache.
func (s *Server) Wait(ctx context.Context) error { return s.archives.wait(ctx) }

func (s *Server) routes() *mux.Router {
	r := mux.NewRouter()
	// Validate the raw segments ourselves: an encoded slash must be an
	// error, not a different route.
	r.UseEncodedPath()
	r.SkipClean(true)
	protocol := r.Methods(http.MethodGet, http.MethodHead).Subrouter()
	protocol.Use(s.authorize)
	protocol.HandleFunc("/", s.handleStatus)
	protocol.HandleFunc("/{host}/{namespace}/{type}/index.json", s.handleIndex)
	protocol.HandleFunc("/{host}/{namespace}/{type}/{file}", s.handleFile)
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, &RequestError{Status: http.StatusMethodNotAllowed, Msg: "method not allowed"})
	})
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, &RequestError{Status: http.StatusMethodNotAllowed, Msg: "method not allowed"})
			return
		}
		writeError(w, &RequestError{Status: http.StatusNotFound,
			Msg: "not a provider network mirror path (want HOST/NAMESPACE/TYPE/index.json, VERSION.json or an archive)"})
	})
	return r
}

// provider parses the request's provider address and checks its host is allowed.
func (s *Server) provider(r *http.Request) (discovery.Provider, error) {
	vars := mux.Vars(r)
	p, err := parseProvider(vars["host"], vars["namespace"], vars["type"])
	if err != nil {
		return p, err
	}
	if !s.allowed[p.Hostname] {
		return p, fmt.Errorf("%w: %s", ErrOriginNotAllowed, p.Hostname)
	}
	return p, nil
}

func (s *Server) handleIndex(w http.ResponseWriter, r *http.Request) {
	p, err := s.provider(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list, st, err := s.versions(r.Context(), p, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	markStale(w, st.stale)
	writeDocument(w, r, list.indexJSON(), s.cacheControl(kindIndex, st.stale))
}

// handleFile serves VERSION.json and archives, which share one path shape.
func (s *Server) handleFile(w http.ResponseWriter, r *http.Request) {
	p, err := s.provider(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	file, err := unescapePart("file name", mux.Vars(r)["file"], 2*maxVersionLen+maxPartLen)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	switch {
	case strings.HasSuffix(file, ".json"):
		v, err := parseVersion(strings.TrimSuffix(file, ".json"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.serveVersion(w, r, p, v)
	case strings.HasSuffix(file, ".zip"):
		v, pl, err := parseArchiveName(p.Type, file)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.serveArchive(w, r, p, v, pl)
	default:
		s.fail(w, r, &RequestError{Status: http.StatusNotFound, Msg: fmt.Sprintf("unknown file %q (want VERSION.json or an archive)", file)})
	}
}

// fail answers with err and logs it once, at a level that says whose
// fault it is: the mirror's (error), an origin's (warn) or the client's (info).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := writeError(w, err)
	level := slog.LevelInfo
	switch {
	case status == http.StatusInternalServerError:
		level = slog.LevelError
	case status >= 500:
		level = slog.LevelWarn
	}
	s.log.Log(r.Context(), level, "request failed", "path", r.URL.EscapedPath(), "status", status, "error", err)
}

func markStale(w http.ResponseWriter, stale bool) {
	if stale {
		w.Header().Set("X-Tfmirror-Stale", "1")
		w.Header().Add("Warning", `110 tfmirror "Response is stale: the origin could not be reached"`)
	}
}

// wanted reports whether platform pl is served (the --platforms filter).
func (s *Server) wanted(pl string) bool {
	return s.platforms == nil || s.platforms[pl]
}

// detached returns a context for work done on behalf of every client that
// waits for it: it does not end when the client that started it goes away.
func (s *Server) detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type noMetrics struct{}

func (noMetrics) CacheLookup(string, bool)    {}
func (noMetrics) StaleServed(string)          {}
func (noMetrics) Coalesced(string)            {}
func (noMetrics) VerificationFailed(string)   {}
func (noMetrics) ArchiveFetchStarted() func() { return func() {} }
func (noMetrics) CacheWriteFailed()           {}

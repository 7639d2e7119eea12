package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/gorilla/mux"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/mirror"
	"github.com/tfmirror/tfmirror/proxy/httperr"
)

// Engine is what the front door needs from the pull-through engine: its
// providers, its modules (Modules, a ModuleEngine) and what the status page shows of
// it. *mirror.Engine implements it.
type Engine interface {
	// Config returns the engine's configuration in effect.
	Config() mirror.Config
	// CheckOrigin fails for a provider of a host the engine does not
	// serve (the origin client's ErrHostNotAllowed, which httperr answers
	// with 404).
	CheckOrigin(p addrs.Provider) error
	Versions(ctx context.Context, p addrs.Provider) (*mirror.VersionList, mirror.ListState, error)
	Package(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*mirror.Package, error)
	Evidence(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*mirror.Evidence, error)
	OpenArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (*mirror.Archive, error)
	// Reuse says whether an answer of Versions or Package with this
	// stamp is still the one the same call would give.
	Reuse(st mirror.Stamp) bool
	// ListCachedAfter lists the cached provider versions whose address
	// starts with prefix, from the one after the cursor after on.
	ListCachedAfter(prefix, after string, fn func(mirror.CachedVersion) error) error
	Stats() (archives int, bytes int64)
	// Modules returns the engine's module side, which the module routes
	// use as a ModuleEngine.
	Modules() *mirror.Modules
	WithheldEngine
	// CacheChecker returns the engine's check of the whole cache, whose
	// LastCacheCheck the status page shows.
	CacheChecker() *mirror.CacheChecker
}

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// PublicURL is the mirror's base URL as clients reach it, shown on the
	// status page. Default: the scheme and host of each status request.
	PublicURL string
	// PlainHTTP says the mirror is served without TLS (behind a proxy).
	PlainHTTP bool
	// Version is shown on the status page.
	Version string
	// Logger receives errors, once each. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Auth, when set, requires a bearer token for index.json and
	// VERSION.json and signs the archive URLs in VERSION.json. Default:
	// no client authentication.
	Auth *Auth
	// Health, when set, is the source of the status page's health block
	// (cache writable, disk space, shared store), the same as /readyz's.
	// Default: the block shows only whether the mirror is sealed.
	Health *HealthSource
	// Retention, when set, is the source of the status page's retention
	// block (pinned versions, what the size limit may not evict).
	// *retention.Retainer implements it. Default: no such block.
	Retention RetentionSource
}

// Server serves the provider network mirror protocol, and the provider
// registry protocol (see registry.go), from the pull-through engine.
type Server struct {
	cfg       Config
	engine    Engine
	log       *slog.Logger
	router    *mux.Router
	docs      *renderMemo   // rendered index.json and VERSION.json
	hot       *hotDocs      // answers to send again while the engine says they hold
	providers providersMemo // the status page's last list of cached providers

	documentCacheControl []string // Cache-Control of fresh index.json and VERSION.json, from the engine's VersionsTTL
}

// New returns a Server answering from engine.
func New(cfg Config, engine Engine) (*Server, error) {
	if engine == nil {
		return nil, errors.New("proxy: an engine is required")
	}
	if cfg.Health != nil && cfg.Health.Store == nil {
		return nil, errors.New("proxy: a health source needs the cache (HealthSource.Store)")
	}
	s := &Server{
		cfg:    cfg,
		engine: engine,
		log:    cfg.Logger,
		docs:   newRenderMemo(),
		hot:    newHotDocs(),
	}
	if s.cfg.Now == nil {
		s.cfg.Now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.documentCacheControl = headerValue(documentCacheControl(engine.Config().VersionsTTL))
	s.router = s.routes()
	return s, nil
}

// ServeHTTP serves the mirror protocol, and whatever else is mounted on
// Router. A warm index.json or VERSION.json is answered from the document
// sent last for the same path, while the engine says it holds.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.serveHot(w, r) {
		return
	}
	s.router.ServeHTTP(w, r)
}

// Router returns the mirror's router so that other handlers (status page,
// health, metrics) can be mounted beside the protocol routes.
func (s *Server) Router() *mux.Router { return s.router }

func (s *Server) routes() *mux.Router {
	r := mux.NewRouter()
	// Validate the raw segments ourselves: an encoded slash must be an
	// error, not a different route.
	r.UseEncodedPath()
	r.SkipClean(true)
	s.registryRoutes(r)
	s.moduleRoutes(r)
	// The status page needs no credentials.
	r.Methods(http.MethodGet, http.MethodHead).Path("/").HandlerFunc(s.handleStatus)
	protocol := r.Methods(http.MethodGet, http.MethodHead).Subrouter()
	protocol.Use(s.authorize(mirrorAuth))
	protocol.HandleFunc("/{host}/{namespace}/{type}/index.json", s.handleIndex)
	protocol.HandleFunc("/{host}/{namespace}/{type}/{file}", s.handleFile)
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, &httperr.RequestError{Status: http.StatusMethodNotAllowed, Msg: "method not allowed"})
	})
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, &httperr.RequestError{Status: http.StatusMethodNotAllowed, Msg: "method not allowed"})
			return
		}
		writeError(w, &httperr.RequestError{Status: http.StatusNotFound,
			Msg: "not a provider network mirror path (want HOST/NAMESPACE/TYPE/index.json, VERSION.json or an archive)"})
	})
	return r
}

// provider parses the request's provider address and checks its host is allowed.
func (s *Server) provider(r *http.Request) (addrs.Provider, error) {
	vars := mux.Vars(r)
	p, err := parseProvider(vars["host"], vars["namespace"], vars["type"])
	if err != nil {
		return p, err
	}
	return p, s.engine.CheckOrigin(p)
}

// versions reads the version list of the request's provider, for the
// mirror's index.json and the registry's versions answer. On an error it
// answers the request and returns ok false.
func (s *Server) versions(w http.ResponseWriter, r *http.Request) (p addrs.Provider, list *mirror.VersionList, st mirror.ListState, ok bool) {
	p, err := s.provider(r)
	if err == nil {
		list, st, err = s.engine.Versions(r.Context(), p)
	}
	if err != nil {
		s.fail(w, r, err)
		return p, nil, st, false
	}
	markStale(w, st.Stale)
	return p, list, st, true
}

func (s *Server) handleIndex(w http.ResponseWriter, r *http.Request) {
	p, list, st, ok := s.versions(w, r)
	if !ok {
		return
	}
	doc := s.docs.index(p, list)
	s.keepHot(r, doc, st.Stale, st.Stamp)
	writeDocument(w, r, doc, s.cacheControl(kindIndex, st.Stale))
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
		s.fail(w, r, &httperr.RequestError{Status: http.StatusNotFound, Msg: fmt.Sprintf("unknown file %q (want VERSION.json or an archive)", file)})
	}
}

// fail answers with err and logs it once, at a level that says whose
// fault it is: the mirror's (error), an origin's (warn) or the client's
// (info). A client that went away is told nothing and logged at debug.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		err = &httperr.ClientGoneError{Err: err}
	}
	status := writeError(w, err)
	level := slog.LevelInfo
	switch {
	case status == httperr.StatusClientClosedRequest:
		level = slog.LevelDebug
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

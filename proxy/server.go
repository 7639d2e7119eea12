package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/gorilla/mux"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// Engine is what the front door needs from the pull-through engine
// behind the package policy: its providers (ProviderEngine), its
// modules (ModuleEngine, and StatusModules for the status page), its
// check of the whole cache and what the status page shows of it
// (StatusEngine). *mirror/served.Packages implements it: the front door
// never holds the engine beneath the policy.
type Engine interface {
	ProviderEngine
	// Reuse says whether an answer of Versions or Package with this
	// stamp is still the one the same call would give.
	Reuse(st mirror.Stamp) bool
	ModuleEngine
	StatusModules
	// CacheChecker returns the engine's check of the whole cache, whose
	// last run the status page shows.
	CacheChecker() *cachecheck.Checker
	StatusEngine
}

// ProviderEngine is what the provider routes (the network mirror and the
// provider registry protocols) need from the engine. Each of its calls
// that names a provider decides whether the provider's host is served
// and the policy lets it through, before anything else: the routes
// parse the request, make one call, and map its error.
type ProviderEngine interface {
	// Config returns the engine's configuration in effect.
	Config() mirror.Config
	Versions(ctx context.Context, p addrs.Provider) (*records.VersionList, mirror.ListState, error)
	Package(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*mirror.Package, error)
	Evidence(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*records.Evidence, error)
	OpenArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (*mirror.Archive, error)
}

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// PublicURL is the mirror's base URL as clients reach it, shown on the
	// status page and in the answers that name the mirror by an absolute
	// URL; a trailing slash is added when it lacks one. Default: the
	// scheme and host of each request.
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
	// TrustedProxyRanges is how many ranges of trusted proxies the
	// handler in front has (TrustProxies), for the status page's client
	// authentication row. Default 0: none.
	TrustedProxyRanges int
	// Health, when set, is the source of the status page's health block
	// (cache writable, disk space, shared store), the same as /readyz's.
	// Default: the block shows only whether the mirror is sealed.
	Health *HealthSource
	// Retention, when set, is the source of the status page's retention
	// block (pinned versions, what the size limit may not evict).
	// *retention.Retainer implements it. Default: no such block.
	Retention RetentionSource
	// OCI, when set, serves /v2 and everything under /v2/ (the OCI
	// distribution front door), ahead of every other route, so that no
	// other protocol's path or method handling answers there. Default:
	// nothing is served under /v2/.
	OCI Door
	// OCIBlock, when set, is the oci_mirror block the status page shows
	// ready to paste, for the host the page was asked on. Default: none.
	OCIBlock func(host string) string
	// OCIModuleSource, when set, is an example oci:// module source the
	// status page shows beside OCIBlock, for the host the page was asked
	// on. Default: none.
	OCIModuleSource func(host string) string
	// Releases, when set, serves everything under /releases/ (the CLI
	// releases front door, proxy/releasesdoor), ahead of every other
	// route. Default: nothing is served there.
	Releases Door
	// CLIReleases, when set, is what the status page shows of the CLI
	// releases door (Releases) ready to paste, for the mirror's base URL
	// ("https://host/"): each installer's settings. Default: nothing.
	CLIReleases func(mirrorURL string) string
	// CLIReleasesOff, when set, says why the releases door serves no
	// publisher (their hosts are not allowed origins): the status page
	// says it instead of CLIReleases' settings.
	CLIReleasesOff string
	// CLIHeld, when set, gives the CLI versions the package policy holds
	// back (releases.Releases.Held), which the status page lists with the
	// engine's (Status.Withheld). Default: none.
	CLIHeld func() []unsigned.Version
	// Settings, when set, gives the configuration in effect that the
	// status page shows (each setting's value, secrets redacted, and where
	// it came from); it is called for each view, so that a reload shows.
	// Default: no configuration block.
	Settings func() *Configuration
	// Origins, when set, gives the status page's origin rows (their
	// circuit breakers, last errors and successes, the last hour's
	// counts); cmd/tfmirror/internal/originwatch keeps them. Default: the
	// allowed origins are listed without their state.
	Origins OriginRows
	// Policy, when set, gives the rules of the package policy in force,
	// as tfmirror config check lists them, for the status page; called
	// for each view, so that a reload shows. Default: not shown.
	Policy func() []string
	// SharedStore, when set, is where the shared store is and its ID,
	// which the status page shows to those who may see the configuration
	// (never a credential). Default: none (no shared store).
	SharedStore *StatusSharedStore
}

// OriginRows gives the status page's origin rows
// (*cmd/tfmirror/internal/originwatch.Watch).
type OriginRows interface {
	Rows() []OriginHealth
}

// releasesPrefix is where Config.Releases is mounted.
const releasesPrefix = "/releases/"

// Server serves the provider network mirror protocol (networkmirror.go),
// the provider and module registry protocols (registry.go, modules.go) and
// the status page (status.go) from the pull-through engine. It routes
// requests to them and wires them up; each holds only what it needs.
type Server struct {
	*responder
	router *mux.Router
	hot    *hotDocs    // answers to send again while the engine says they hold
	status *statusPage // the page at /
	oci    Door        // everything under /v2/, or nil
	rel    Door        // everything under /releases/, or nil
}

// New returns a Server answering from engine.
func New(cfg Config, engine Engine) (*Server, error) {
	if engine == nil {
		return nil, errors.New("proxy: an engine is required")
	}
	if cfg.Health != nil && cfg.Health.Store == nil {
		return nil, errors.New("proxy: a health source needs the cache (HealthSource.Store)")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rs := &responder{
		log:                  cfg.Logger,
		auth:                 cfg.Auth,
		failures:             NewFailures(),
		documentCacheControl: headerValue(documentCacheControl(engine.Config().VersionsTTL)),
	}
	s := &Server{
		oci:       cfg.OCI,
		rel:       cfg.Releases,
		responder: rs,
		status:    &statusPage{responder: rs, cfg: cfg, engine: engine, modules: engine, checks: engine.CacheChecker()},
	}
	s.SetPublicURL(cfg.PublicURL)
	if cfg.Auth == nil {
		// With client authentication, the URLs in VERSION.json are
		// signed per request, and every token checked: nothing is hot.
		s.hot = newHotDocs(engine, rs.documentCacheControl, rs.fail)
	}
	providers := providerRoutes{responder: rs, engine: engine, docs: newRenderMemo()}
	s.router = s.routes(
		&providerRegistry{providerRoutes: providers},
		&moduleRegistry{responder: rs, engine: engine, mirrorURL: s.status.mirrorURLFrom},
		&networkMirror{providerRoutes: providers, hot: s.hot},
	)
	return s, nil
}

// ServeHTTP serves the mirror protocol, and whatever else is mounted on
// Router. A warm index.json or VERSION.json is answered from the document
// sent last for the same path, while the engine says it holds.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.EscapedPath()) > MaxRequestPath {
		// Longer than any door serves: refused before one logs it.
		s.refuse(w, r, &httperr.RequestError{Status: http.StatusRequestURITooLong,
			Msg: fmt.Sprintf("path longer than %d bytes", MaxRequestPath)})
		return
	}
	if err := readBody(r); err != nil {
		s.refuse(w, r, err)
		return
	}
	if r.Host != "" && !ValidHost(r.Host) && *s.status.publicURL.Load() == "" {
		// The mirror names itself by the Host of each request
		// (RequestURL): one it cannot put in a URL is refused before
		// any door sees it. With a public URL in force the Host is
		// never read.
		s.refuse(w, r, errBadHost())
		return
	}
	if s.auth != nil {
		if err := s.auth.limited(r); err != nil {
			// Its client address failed authentication too often: no
			// door checks its credentials until it has waited.
			s.refuse(w, r, err)
			return
		}
	}
	r = oneRange(r)
	if s.ociPath(r) {
		// Everything under /v2/ is the OCI front door's, whatever its
		// method (the router mounts it there too, for Router's users).
		s.oci.ServeHTTP(w, r)
		return
	}
	if s.releasesPath(r) {
		s.rel.ServeHTTP(w, r)
		return
	}
	if s.hot.serve(w, r) {
		return
	}
	s.router.ServeHTTP(w, r)
}

// Door is a front door mounted under paths of its own: the OCI
// distribution door (proxy/ocidoor.Door) under /v2/, the CLI releases
// door (proxy/releasesdoor.Door) under /releases/. It serves them, and
// answers in its own error format (the OCI error envelope, the releases
// site's plain text) what the layers in front of the doors refuse of a
// request on its paths (a path too long, a client address over the limit
// of failed attempts, a Host the mirror cannot name itself by), so that
// every answer on its paths is in its format.
type Door interface {
	http.Handler
	AnswerError(w http.ResponseWriter, r *http.Request, err error)
}

// ociPath reports whether r is the OCI front door's: everything under
// /v2/, whatever its method.
func (s *Server) ociPath(r *http.Request) bool {
	return s.oci != nil && (r.URL.Path == "/v2" || strings.HasPrefix(r.URL.Path, "/v2/"))
}

// releasesPath reports whether r is the CLI releases door's: everything
// under /releases/.
func (s *Server) releasesPath(r *http.Request) bool {
	return s.rel != nil && strings.HasPrefix(r.URL.Path, releasesPrefix)
}

// refuse answers err, a refusal of the layers in front of the doors: on
// a mounted door's paths in its format (Door.AnswerError), else as the
// mirror protocols' errors, logged as a door logs its failures.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case s.ociPath(r):
		s.oci.AnswerError(w, r, err)
	case s.releasesPath(r):
		s.rel.AnswerError(w, r, err)
	default:
		s.fail(w, r, err)
	}
}

// MaxRequestBody bounds the body of a request: no door reads one (the
// clients send none), and a longer one is refused (413).
const MaxRequestBody = 64 << 10

// readBody reads the body of a GET or HEAD, if it has one, to its end and
// lets it go: no door reads a body, and net/http watches a connection for
// its client going away (ending the request's context) only once the body
// has been read, so that a client that sent one and left went unnoticed,
// its handler waiting for the origin and then answering no one. A body
// longer than MaxRequestBody is refused 413, one not sent whole (within
// internal/httpserve.BodyTimeout) 400. Another method's body is left to
// the door, which refuses the method at once (the OCI door a push, in its
// own words).
func readBody(r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r.Body, MaxRequestBody+1))
	switch {
	case err != nil:
		return &httperr.RequestError{Status: http.StatusBadRequest, Msg: "request body not received whole"}
	case n > MaxRequestBody:
		return &httperr.RequestError{Status: http.StatusRequestEntityTooLarge,
			Msg: fmt.Sprintf("request body longer than %d bytes (no path here takes one)", MaxRequestBody)}
	}
	return nil
}

// MaxRequestPath bounds a request's path, as sent (escaped), for every
// door: the longest a door serves is the OCI door's 2048 bytes. A longer
// path is answered 414 before any door sees it, so that the line a door
// logs for a request it refuses stays short.
const MaxRequestPath = 4096

// oneRange returns r without its Range header when it names more than one
// range, for every door: the answer is then the whole file (RFC 9110 lets
// a server ignore Range). http.ServeContent answers such a request with a
// part per range, and each part of a cached archive may be a chunk read
// from the cache: thousands of ranges of a byte, alternating between two
// chunks, cost seconds of CPU and gigabytes read for a request of 60 KB.
// Clients ask for one range, to resume a download.
//
// A Range in a unit other than bytes is left out too, as RFC 9110 has an
// origin server ignore a unit it does not understand (http.ServeContent
// refuses it, 416, as a range of bytes naming none), and the bytes unit
// in another case ("Bytes=", unit names being case-insensitive) is read
// as bytes. A Range of bytes that is malformed is kept, for
// http.ServeContent to refuse.
func oneRange(r *http.Request) *http.Request {
	v := r.Header["Range"]
	if len(v) == 0 {
		return r
	}
	var bytesRange []string // the one range kept, its unit spelt as http.ServeContent reads it
	if len(v) == 1 && !strings.Contains(v[0], ",") {
		unit, set, ok := strings.Cut(v[0], "=")
		switch {
		case !ok || unit == "bytes":
			return r
		case strings.EqualFold(unit, "bytes"):
			bytesRange = []string{"bytes=" + set}
		}
	}
	r = r.Clone(r.Context())
	if bytesRange != nil {
		r.Header["Range"] = bytesRange
	} else {
		delete(r.Header, "Range")
	}
	return r
}

// SetPublicURL replaces Config.PublicURL from the next request on (a
// configuration reloaded). A public URL is the mirror's base URL however
// it ends: one given without its trailing slash
// ("https://mirror.example.com") is kept with it, which MirrorURL promises
// and every URL made from it (an absolute module download location)
// needs.
func (s *Server) SetPublicURL(u string) {
	if u != "" && !strings.HasSuffix(u, "/") {
		u += "/"
	}
	s.status.publicURL.Store(&u)
}

// MirrorURL is the mirror's base URL for r, ending in "/", as the status
// page shows it: the public URL in force (Config.PublicURL, or the one
// SetPublicURL put in force since), or else the one r was made to. The
// documents that name the mirror by an absolute URL (the releases door's)
// take it from here, so that a reload reaches them too.
func (s *Server) MirrorURL(r *http.Request) string { return s.status.mirrorURL(r) }

// Router returns the mirror's router so that other handlers (status page,
// health, metrics) can be mounted beside the protocol routes.
func (s *Server) Router() *mux.Router { return s.router }

// routes mounts the registry protocols' routes, the status page and the
// network mirror protocol's routes, in that order: the first route that
// matches a path serves it.
func (s *Server) routes(registry *providerRegistry, modules *moduleRegistry, network *networkMirror) *mux.Router {
	r := mux.NewRouter()
	// Validate the raw segments ourselves: an encoded slash must be an
	// error, not a different route.
	r.UseEncodedPath()
	r.SkipClean(true)
	if s.oci != nil {
		r.Path("/v2").Handler(s.oci)
		r.PathPrefix("/v2/").Handler(s.oci)
	}
	if s.rel != nil {
		r.PathPrefix(releasesPrefix).Handler(s.rel)
	}
	registry.routes(r)
	modules.routes(r)
	// The status page needs no credentials.
	r.Methods(http.MethodGet, http.MethodHead).Path("/").HandlerFunc(s.status.handle)
	network.routes(r)
	// A path or method no route serves is the client's fault, logged as
	// a door logs its failures (a "request failed" line, bounded).
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, HEAD")
		s.fail(w, r, &httperr.RequestError{Status: http.StatusMethodNotAllowed, Msg: "method not allowed"})
	})
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			s.fail(w, r, &httperr.RequestError{Status: http.StatusMethodNotAllowed, Msg: "method not allowed"})
			return
		}
		s.fail(w, r, &httperr.RequestError{Status: http.StatusNotFound,
			Msg: "not a provider network mirror path (want HOST/NAMESPACE/TYPE/index.json, VERSION.json or an archive)"})
	})
	return r
}

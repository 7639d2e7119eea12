package proxy

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// RequestObserver records served requests: aborted when the mirror broke
// the response off after its status (the access log's aborted). Package
// metrics implements it.
type RequestObserver interface {
	ObserveRequest(route string, code int, d time.Duration, bytes int64, aborted bool)
}

// Route classifies a request path, encoded as the router matches it
// (url.URL.EscapedPath), into the bounded set of route labels:
// index, version, archive, registry_versions, registry_download,
// registry_shasums, registry_signature, module_versions, module_download,
// module_package, the OCI front door's oci_ping, oci_token, oci_tags,
// oci_manifest, oci_blob and oci_referrers, the CLI releases door's
// releases_archive and releases, status, metrics, health or other.
func Route(path string) string {
	if path == "/v2" || strings.HasPrefix(path, "/v2/") {
		return ociRoute(path)
	}
	if strings.HasPrefix(path, releasesPrefix) {
		// Before the network mirror's: an OpenTofu archive's path
		// (/releases/opentofu/vVERSION/FILE.zip) has its depth.
		if strings.HasSuffix(path, ".zip") {
			return "releases_archive"
		}
		return "releases"
	}
	if rest, ok := strings.CutPrefix(path, "/"+registryRoot+"/"); ok {
		return registryRoute(rest)
	}
	switch {
	case path == "/":
		return "status"
	case path == "/metrics":
		return "metrics"
	case path == "/healthz" || path == "/readyz":
		return "health"
	case strings.Count(path, "/") != 4:
		return "other"
	case strings.HasSuffix(path, "/index.json"):
		return "index"
	case strings.HasSuffix(path, ".json"):
		return "version"
	case strings.HasSuffix(path, ".zip"):
		return "archive"
	}
	return "other"
}

// ociRoute classifies a path under /v2/, its route read as the OCI door
// reads it (oci.SplitPath).
func ociRoute(path string) string {
	switch path {
	case "/v2", "/v2/":
		return "oci_ping"
	case "/v2/token":
		return "oci_token"
	}
	switch _, _, route := oci.SplitPath(strings.TrimPrefix(path, "/v2/")); route {
	case oci.RouteTags:
		return "oci_tags"
	case oci.RouteManifests:
		return "oci_manifest"
	case oci.RouteBlobs:
		return "oci_blob"
	case oci.RouteReferrers:
		return "oci_referrers"
	}
	return "other"
}

// registryRoute classifies a path below /registry/.
func registryRoute(rest string) string {
	parts := strings.Split(rest, "/")
	if len(parts) >= 4 && parts[1] == "v1" && parts[2] == "modules" {
		return moduleRoute(parts[3:])
	}
	if len(parts) < 4 || parts[1] != "v1" || parts[2] != "providers" {
		return "other"
	}
	parts = parts[3:] // NS/TYPE/...
	switch {
	case len(parts) == 3 && parts[2] == "versions":
		return "registry_versions"
	case len(parts) == 6 && parts[3] == "download":
		return "registry_download"
	case len(parts) == 7 && parts[3] == "download" && parts[6] == sumsFile:
		return "registry_shasums"
	case len(parts) == 7 && parts[3] == "download" && parts[6] == signatureFile:
		return "registry_signature"
	}
	return "other"
}

// Instrument wraps next with what every request gets: a request id (taken
// from a well-formed X-Request-Id header or made up, and returned in
// X-Request-Id), one access-log line naming its client address (put
// TrustProxies in front for the one a trusted proxy names), and a record
// in obs (may be nil).
// The query string is never logged: archive URLs may carry credentials.
func Instrument(next http.Handler, log *slog.Logger, obs RequestObserver) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// The header maps are indexed by their canonical keys directly:
		// this runs on every request.
		var id string
		if v := r.Header["X-Request-Id"]; len(v) > 0 && validRequestID(v[0]) {
			id = v[0]
		} else {
			id = newRequestID()
		}
		w.Header()["X-Request-Id"] = []string{id}
		rw := &recorder{ResponseWriter: w}
		// As the router reads it (encoded): /%68ealthz is no probe.
		route := Route(r.URL.EscapedPath())
		aborted := true
		defer func() {
			end := time.Now()
			d := end.Sub(start)
			status := rw.status
			if status == 0 {
				status = http.StatusOK
			}
			sent := rw.bytes
			if status == httperr.StatusClientClosedRequest {
				// Its client went away before the answer: the error
				// written for it reached no one.
				sent = 0
			}
			if obs != nil {
				obs.ObserveRequest(route, status, d, sent, aborted)
			}
			level := slog.LevelInfo
			if route == "health" || route == "metrics" {
				level = slog.LevelDebug
			}
			ctx := r.Context()
			if !log.Enabled(ctx, level) {
				return
			}
			rw.line = requestLine{
				id: id, method: loggedMethod(r), path: logged(r.URL.EscapedPath(), maxLoggedPath), route: route,
				status: status, bytes: sent, duration: d,
				cache: firstValue(w.Header(), "X-Tfmirror-Cache"), aborted: aborted,
				userAgent: logbound.Escaped(logged(r.UserAgent(), maxLoggedUserAgent)),
				client:    clientText(r),
			}
			// As log.LogAttrs, without looking up the caller's program
			// counter for a source location that would only ever name
			// this function.
			rec := slog.NewRecord(end, level, "request", 0)
			rec.AddAttrs(slog.Any("", &rw.line))
			log.Handler().Handle(ctx, rec)
		}()
		defer func() {
			// Runs before the access log's line, which it sets the
			// status and aborted of.
			p := recover()
			if p == http.ErrAbortHandler {
				// A deliberate abort panics on as it came (net/http
				// closes the connection, and logs nothing more). A
				// response broken off for a client gone is the
				// client's doing, not the mirror's.
				aborted = !clientGone(r)
				panic(p)
			}
			if p != nil {
				aborted = rw.panicked(r, p, log, id, route)
			}
		}()
		next.ServeHTTP(rw, r)
		aborted = rw.cutOff(r)
	})
}

// panicked handles a panic p of the handler of req, which net/http would
// recover itself and log through the server's error log (at debug), other
// than a deliberate abort (http.ErrAbortHandler: a download that failed,
// a damaged cached copy, a client gone from an archive of no stated
// length), which Instrument lets panic on as it came. Any other is a bug
// of the mirror's: logged at error with its stack, and answered 500 when nothing
// was sent yet (reported as not aborted), else broken off (aborted), with
// the status sent. Either way the access log and the metrics count the
// request by the status its client got, never a 200 that got nothing.
func (r *recorder) panicked(req *http.Request, p any, log *slog.Logger, id, route string) (aborted bool) {
	log.LogAttrs(req.Context(), slog.LevelError, "handler panicked", slog.String("request_id", id),
		slog.String("route", route), slog.String("panic", fmt.Sprint(p)), slog.String("stack", string(debug.Stack())))
	if r.status != 0 {
		panic(http.ErrAbortHandler) // net/http closes the connection, and logs nothing more
	}
	h := r.Header()
	for k := range h {
		if k != "X-Request-Id" {
			delete(h, k) // what the handler set for an answer it never sent (its Content-Length)
		}
	}
	writeError(r, errors.New("internal error"))
	return false
}

// clientGone reports whether req's context ended other than by the
// mirror's shutdown (httperr.ErrCutOff): its client went away.
func clientGone(req *http.Request) bool {
	return req.Context().Err() != nil && !httperr.CutOff(req.Context())
}

// cutOff reports whether the mirror's shutdown cut off the response to
// req, which its handler has returned from: the request's context was
// ended by the server (httperr.ErrCutOff), not by the client, and the
// response did not get through whole: a write failed, fewer bytes were
// written than its Content-Length says, or it has a body of no stated
// length (whose end its client cannot have been sent). A client that
// goes away is no cut-off, whatever its response lacks.
func (r *recorder) cutOff(req *http.Request) bool {
	if !httperr.CutOff(req.Context()) {
		return false
	}
	if r.writeFailed {
		return true
	}
	if req.Method == http.MethodHead || r.status == http.StatusNoContent || r.status == http.StatusNotModified {
		return false
	}
	declared, err := strconv.ParseInt(firstValue(r.Header(), "Content-Length"), 10, 64)
	return err != nil || r.bytes < declared
}

// What the access log keeps of a request's method, path and User-Agent:
// whatever a client sends is bounded in the log too. A header may be
// 64 KiB, a method as long (any token is one), and a byte that is not
// UTF-8 is six in JSON (\ufffd).
const (
	maxLoggedPath      = 2048 // the longest path a door serves (the OCI door's)
	maxLoggedUserAgent = 256
	maxLoggedMethod    = 16 // longer than any method HTTP defines
)

// loggedMethod is r's method as a log line names it, cut as the access
// log cuts it.
func loggedMethod(r *http.Request) string { return logged(r.Method, maxLoggedMethod) }

// LoggedPath is r's path as a log line names it: as sent (escaped), cut
// at the longest path a door serves, as the access log cuts it, so that a
// door's line about a request stays short whatever its path.
func LoggedPath(r *http.Request) string { return logged(r.URL.EscapedPath(), maxLoggedPath) }

// logged is s cut to limit bytes, marked as cut.
func logged(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "...(cut)"
}

// firstValue is h.Get(key) for a key already in canonical form.
func firstValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// newRequestID returns 16 random hex digits. A request id correlates log
// lines and is no secret, so it comes from math/rand/v2's generator (seeded
// by the runtime, no system call) rather than crypto/rand.
func newRequestID() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// recorder captures the status and body size of a response, and holds
// its access-log line (which thus takes no allocation of its own).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	// writeFailed says a write of the body failed (the connection was
	// closed).
	writeFailed bool
	line        requestLine
}

// requestLine is the access log's line for one request: the attributes
// request_id, method, path, route, status, bytes, duration (nanoseconds in
// JSON), cache (X-Tfmirror-Cache), aborted, user_agent and client (the
// client address, ClientAddr; "" for a peer without an IP address), in
// that order.
// Logged as slog.Any("", line), it is written as if each attribute had
// been added to the record (see jsonlog.Fields).
type requestLine struct {
	id, method, path, route string
	status                  int
	bytes                   int64
	duration                time.Duration
	cache                   string
	aborted                 bool
	userAgent               string
	client                  string
}

// Attrs yields the line's attributes.
func (l *requestLine) Attrs(yield func(slog.Attr) bool) {
	_ = yield(slog.String("request_id", l.id)) &&
		yield(slog.String("method", l.method)) &&
		yield(slog.String("path", l.path)) &&
		yield(slog.String("route", l.route)) &&
		yield(slog.Int("status", l.status)) &&
		yield(slog.Int64("bytes", l.bytes)) &&
		yield(slog.Duration("duration", l.duration)) &&
		yield(slog.String("cache", l.cache)) &&
		yield(slog.Bool("aborted", l.aborted)) &&
		yield(slog.String("user_agent", l.userAgent)) &&
		yield(slog.String("client", l.client))
}

// LogValue is the line as a group of its attributes, for handlers other
// than jsonlog's.
func (l *requestLine) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 11)
	l.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	return slog.GroupValue(attrs...)
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	if err != nil {
		r.writeFailed = true
	}
	return n, err
}

// FlushError flushes what was written, the status first when none was
// (200, as net/http sends it), so that the status is known sent;
// http.ResponseController.Flush calls it.
func (r *recorder) FlushError() error {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if f, ok := r.ResponseWriter.(interface{ FlushError() error }); ok {
		return f.FlushError() // net/http's, httpserve's: no controller made for each flush
	}
	return http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach deadlines.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Pinger checks that the cache is usable.
type Pinger interface{ Ping() error }

// HealthStore is what the health checks read of the cache. *cache.Store
// implements it.
type HealthStore interface {
	Pinger
	// Writable returns why the cache does not take writes, or nil, as it
	// knows without a write (below the disk reserve, say).
	Writable() error
	// FreeBytes and Reserve are the free space on the cache's file system
	// and the free space below which it stops writing; -1 when not known
	// (an in-memory cache, disk checks off).
	FreeBytes() int64
	Reserve() int64
	// DiskBudget returns the data directory's size and the most it may
	// take; ok is false without a size limit.
	DiskBudget() (used, budget int64, ok bool)
	// DamagedArchives returns how many archives a read found damaged
	// where they are stored, kept and not served until a verified copy
	// replaces them. The status page reads it for each view, not /readyz:
	// right after the cache opens it waits for the archives' count.
	DamagedArchives() int
}

// Healthz answers 200 while the process serves requests.
func Healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// HealthSource is where the mirror's own state is read from: /readyz and
// the status page's health block both ask it, so that they agree. It keeps
// its last answer for HealthTTL, so that probes and page views, however
// many and however concurrent, cost the cache at most one check a second
// between them.
type HealthSource struct {
	// Store is the cache: its Ping says whether it takes writes; the free
	// disk space, the reserve and the disk budget it reports are shown
	// too, where known. Required (proxy.New refuses a HealthSource
	// without it).
	Store HealthStore
	// Shared, when set, returns the shared store's state in one look:
	// setAside says why it is not used (its circuit is open, or it does
	// not honour conditional writes), failing why, still used, it failed
	// its last calls (before its circuit opens); both nil while it is
	// reachable. Default nil: no shared store configured.
	Shared func() (setAside, failing error)
	// SharedRejected, when set, returns how many objects read from the
	// shared store failed authentication since start (ignored, taken from
	// the origin instead). Default nil: not shown.
	SharedRejected func() int64
	// Certificate, when set, returns when the certificate the mirror's
	// port serves expires, and whether the last one read from the
	// operator's files or issued from the generated CA while serving was
	// refused (the one in force stays). Default nil: no TLS.
	Certificate func() (expires time.Time, refused bool)
	// OriginCAsRefused, when set, says whether the last reading of
	// origin_ca_file's files that changed while serving was refused (the
	// CAs read before stay trusted). Default nil: no such files.
	OriginCAsRefused func() bool
	// Now is the clock of Readyz's checks (the status page uses its
	// server's). Default time.Now.
	Now func() time.Time
	// Log is where a check that finds the cache not writable is
	// logged, once per check (not once per probe, scrape or page view
	// that reads it). Default: not logged.
	Log *slog.Logger
	// Stopping, once set, has Readyz answer 503 whatever the checks
	// say: the mirror is shutting down and goes on serving only while
	// a load balancer takes it out (--shutdown-delay).
	Stopping atomic.Bool

	memo healthMemo
}

// HealthTTL is how long a HealthSource keeps a check before it checks
// again.
const HealthTTL = time.Second

// healthMemo is a HealthSource's last check. The mutex is held during a
// check, so that concurrent callers wait for one check and share it.
type healthMemo struct {
	mu sync.Mutex
	at time.Time
	h  Health
}

// check returns the state at now: the last check while it is younger than
// HealthTTL, else a new one. A cache that says,
// without a write, that it has stopped writing (below the disk reserve,
// say) is shown at once, not a second later.
func (src *HealthSource) check(now time.Time) Health {
	if src == nil || src.Store == nil {
		return Health{}
	}
	m := &src.memo
	m.mu.Lock()
	defer m.mu.Unlock()
	age := now.Sub(m.at)
	valid := !m.at.IsZero() && age >= 0 && age < HealthTTL
	if valid && m.h.Cache == HealthCacheWritable && src.stoppedWriting() {
		valid = false
	}
	if !valid {
		m.h, m.at = src.Check(), now
		src.logFailure(m.h.cacheErr)
	}
	return m.h
}

// logFailure logs why a check found the cache not writable. Whoever asked
// first (a probe, a scrape, a page view), the failure is logged once per
// check.
func (src *HealthSource) logFailure(err error) {
	if err == nil || src.Log == nil {
		return
	}
	if errors.Is(err, cache.ErrNotWritable) {
		// The cache logged when it stopped writing; not once a check.
		src.Log.Debug("readiness check failed", "error", err)
		return
	}
	src.Log.Error("readiness check failed", "error", err)
}

// CacheWritable reports whether Readyz's check finds that the cache takes
// writes: the same check, its answer shared for HealthTTL, so that what
// reads it (tfmirror_cache_writable) and /readyz never disagree.
func (src *HealthSource) CacheWritable() bool {
	h := src.check(src.now())
	return h.Cache == HealthCacheWritable
}

// now is the time by src's clock (HealthSource.Now, else time.Now).
func (src *HealthSource) now() time.Time {
	if src != nil && src.Now != nil {
		return src.Now()
	}
	return time.Now()
}

// Health states.
const (
	HealthCacheWritable    = "writable"
	HealthCacheNotWritable = "not_writable"
	HealthSharedOK         = "ok"
	HealthSharedDegraded   = "degraded"
	HealthSharedFailing    = "failing"
)

// Health is the mirror's own state, as the status page shows it. It names
// no provider: it is shown to everyone.
type Health struct {
	// Cache is "writable" or "not_writable" (then /readyz answers 503);
	// empty when the page has no health source.
	Cache string `json:"cache,omitempty"`
	// CacheError says why the cache is not writable.
	CacheError string `json:"cache_error,omitempty"`
	// DiskFreeBytes and DiskReserveBytes are the free space on the cache's
	// file system and the free space below which it stops writing; absent
	// when not known (in-memory cache, disk checks off).
	DiskFreeBytes    *int64 `json:"disk_free_bytes,omitempty"`
	DiskReserveBytes *int64 `json:"disk_reserve_bytes,omitempty"`
	// DataDirBytes and DiskBudgetBytes are the data directory's size and
	// the most it may take (1.25 × the size limit plus the reserve);
	// absent without a size limit.
	DataDirBytes    *int64 `json:"data_dir_bytes,omitempty"`
	DiskBudgetBytes *int64 `json:"disk_budget_bytes,omitempty"`
	// Offline says the mirror is sealed (--offline): no origin is contacted.
	Offline bool `json:"offline"`
	// SharedStore is "ok", "failing" (its last calls failed; it is still
	// asked) or "degraded" (circuit open: the mirror serves from its own
	// cache and the origins); absent without a shared store.
	SharedStore string `json:"shared_store,omitempty"`
	// SharedStoreError says why the shared store is failing or degraded.
	SharedStoreError string `json:"shared_store_error,omitempty"`
	// SharedStoreRejected counts the objects read from the shared store
	// that failed authentication since start; absent while none did.
	SharedStoreRejected int64 `json:"shared_store_rejected,omitempty"`
	// DamagedArchives counts the archives a read found damaged where they
	// are stored (HealthStore.DamagedArchives): kept, not served, fetched
	// again when asked for; absent when the page has no health source.
	// The status page sets it, not Check (it is not /readyz's).
	DamagedArchives *int `json:"damaged_archives,omitempty"`
	// CertificateExpires is when the certificate the mirror's port serves
	// expires; CertificateExpiresSoon, that it does within
	// CertificateWarnBefore; CertificateRefused, that the last one read
	// or issued while serving was refused (HealthSource.Certificate).
	// Absent without TLS. The status page sets them, not Check.
	CertificateExpires     *time.Time `json:"certificate_expires,omitempty"`
	CertificateExpiresSoon bool       `json:"certificate_expires_soon,omitempty"`
	CertificateRefused     bool       `json:"certificate_refused,omitempty"`
	// OriginCAsRefused says that the last reading of origin_ca_file's
	// files that changed while serving was refused: the CAs trusted for
	// origins are not those in the files (HealthSource.OriginCAsRefused).
	// The status page sets it, not Check.
	OriginCAsRefused bool `json:"origin_cas_refused,omitempty"`

	cacheErr error // for /readyz's log
}

// CertificateWarnBefore is how long before the certificate served
// expires the status page warns of it, as the alert
// TfmirrorTLSCertificateExpiresSoon does.
const CertificateWarnBefore = 14 * 24 * time.Hour

// healthWriteFailed is why the cache is not writable when its database
// failed the test write or read (Store.Ping), not the disk's room: the log
// has the error.
const healthWriteFailed = "the cache's database failed a test write or read (the log has the error)"

// Check reads the mirror's state now. Offline is the caller's to set.
func (src *HealthSource) Check() Health {
	var h Health
	if src == nil || src.Store == nil {
		return h
	}
	h.Cache = HealthCacheWritable
	if err := src.Store.Ping(); err != nil {
		h.Cache, h.CacheError, h.cacheErr = HealthCacheNotWritable, err.Error(), err
		if !errors.Is(err, cache.ErrNotWritable) && !errors.Is(err, cache.ErrClosed) {
			// The database's own failure, which may name its files:
			// shown to everyone who reaches the mirror, said without it.
			h.CacheError = healthWriteFailed
		}
	}
	if free := src.Store.FreeBytes(); free >= 0 {
		h.DiskFreeBytes = &free
	}
	if reserve := src.Store.Reserve(); reserve >= 0 {
		h.DiskReserveBytes = &reserve
	}
	if used, budget, ok := src.Store.DiskBudget(); ok {
		h.DataDirBytes, h.DiskBudgetBytes = &used, &budget
	}
	if src.Shared != nil {
		setAside, failing := src.Shared()
		h.SharedStore = HealthSharedOK
		if setAside != nil {
			h.SharedStore, h.SharedStoreError = HealthSharedDegraded, setAside.Error()
		} else if failing != nil {
			h.SharedStore, h.SharedStoreError = HealthSharedFailing, failing.Error()
		}
	}
	if src.SharedRejected != nil {
		h.SharedStoreRejected = src.SharedRejected()
	}
	return h
}

// stoppedWriting reports whether the cache says, without a test write,
// that it does not take writes.
func (src *HealthSource) stoppedWriting() bool {
	return src != nil && src.Store.Writable() != nil
}

// Readyz answers 200 when the cache is open and writable, 503 otherwise.
// It never depends on origins: an origin outage must not take the mirror
// out of a load balancer, since it still serves what it holds. Nor does it
// depend on the shared store: while src's Shared says it is set aside,
// the answer is a 200 {"status": "degraded", "shared_store": why}. src is
// the status page's health source too, and its answers are shared with
// the page's for HealthTTL: a probe costs the cache nothing but a memory
// read, however many come at once. A failed check is logged by src (its
// Log), whichever reader ran it.
func Readyz(src *HealthSource) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if src != nil && src.Stopping.Load() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting_down"})
			return
		}
		h := src.check(src.now())
		if h.cacheErr != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable",
				"error": "cache is not writable", "reason": h.CacheError})
			return
		}
		if h.SharedStore == HealthSharedDegraded {
			writeJSON(w, http.StatusOK, map[string]string{"status": "degraded", "shared_store": h.SharedStoreError})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

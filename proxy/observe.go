package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/cache"
)

// RequestObserver records served requests. Package metrics implements it.
type RequestObserver interface {
	ObserveRequest(route string, code int, d time.Duration, bytes int64)
}

// Route classifies a request path into the bounded set of route labels:
// index, version, archive, registry_versions, registry_download,
// registry_shasums, registry_signature, status, metrics, health or other.
func Route(path string) string {
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

// registryRoute classifies a path below /registry/.
func registryRoute(rest string) string {
	parts := strings.Split(rest, "/")
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
// X-Request-Id), one access-log line, and a record in obs (may be nil).
// The query string is never logged: archive URLs may carry credentials.
func Instrument(next http.Handler, log *slog.Logger, obs RequestObserver) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		rw := &recorder{ResponseWriter: w}
		route := Route(r.URL.Path)
		aborted := true
		defer func() {
			end := time.Now()
			d := end.Sub(start)
			status := rw.status
			if status == 0 {
				status = http.StatusOK
			}
			if obs != nil {
				obs.ObserveRequest(route, status, d, rw.bytes)
			}
			level := slog.LevelInfo
			if route == "health" || route == "metrics" {
				level = slog.LevelDebug
			}
			ctx := r.Context()
			if !log.Enabled(ctx, level) {
				return
			}
			// As log.LogAttrs, without looking up the caller's program
			// counter for a source location that would only ever name
			// this function.
			rec := slog.NewRecord(end, level, "request", 0)
			rec.AddAttrs(
				slog.String("request_id", id),
				slog.String("method", r.Method),
				slog.String("path", r.URL.EscapedPath()),
				slog.String("route", route),
				slog.Int("status", status),
				slog.Int64("bytes", rw.bytes),
				slog.Duration("duration", d),
				slog.String("cache", w.Header().Get("X-Tfmirror-Cache")),
				slog.Bool("aborted", aborted),
				slog.String("user_agent", r.UserAgent()),
			)
			log.Handler().Handle(ctx, rec)
		}()
		next.ServeHTTP(rw, r)
		aborted = false
	})
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

func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// recorder captures the status and body size of a response.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
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
	return n, err
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Pinger checks that the cache is usable. *cache.Store implements it.
type Pinger interface{ Ping() error }

// Healthz answers 200 while the process serves requests.
func Healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Readyz answers 200 when the cache is open and writable, 503 otherwise.
// It never depends on origins: an origin outage must not take the mirror
// out of a load balancer, since it still serves what it holds. Nor does it
// depend on the shared store: sharedDown, when given, is reported as
// {"status": "degraded", "shared_store": why} in a 200 while it returns
// an error.
func Readyz(store Pinger, log *slog.Logger, sharedDown func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := store.Ping(); err != nil {
			if errors.Is(err, cache.ErrNotWritable) {
				// The cache logged when it stopped writing; not once a probe.
				log.Debug("readiness check failed", "error", err)
			} else {
				log.Error("readiness check failed", "error", err)
			}
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable",
				"error": "cache is not writable", "reason": err.Error()})
			return
		}
		if sharedDown != nil {
			if err := sharedDown(); err != nil {
				writeJSON(w, http.StatusOK, map[string]string{"status": "degraded", "shared_store": err.Error()})
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/httpserve"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// maxRequest bounds an admin request body.
const maxRequest = 64 << 10

// NewServer returns the HTTP server of the admin API for a unix socket
// (Listen): it reads each connection's caller credentials (peer.go) and
// serves Handler. Requests run on base, detached from its cancellation;
// the caller drains the server (Server.Drain) and closes it.
func (a *API) NewServer(base context.Context) *Server {
	srv := httpserve.New(a.Handler(), slog.NewLogLogger(a.log.Handler(), slog.LevelDebug))
	srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(base) }
	srv.ConnContext = connContext
	return &Server{Server: srv, drain: &a.drain}
}

// Handler serves the admin API, for a unix socket only: a caller is let
// in by the socket's file mode, then only if it runs as the serving
// process's user or root (403 otherwise, and for a request whose
// caller's credentials were not read: serve it with NewServer):
//
//	GET  /v1/ping                                           -> Ping
//	POST /v1/versions {"provider"}                          -> [Version]
//	POST /v1/package  {"provider","version","platforms"}    -> [Archive]
//	POST /v1/ensure   {"provider","version","platform"}     -> Ensured
//	POST /v1/export   ExportRequest                         -> Exported
//	POST /v1/import   ImportRequest                         -> Imported
//	POST /v1/prune    PruneRequest                          -> Pruned
//	POST /v1/verify   VerifyRequest                         -> Verified
//	POST /v1/policy/held    PolicyRequest                   -> [mirror/unsigned.Version]
//	POST /v1/policy/release PolicyRequest                   -> KnownRelease
//	POST /v1/policy/explain PolicyRequest                   -> Explained
//	POST /v1/reload   ReloadRequest                         -> Reloaded
//	POST /v1/cli/versions CLIRequest                        -> ["VERSION", ...]
//	POST /v1/cli/ensure   CLIRequest                        -> CLIEnsured
//
// A request that asks for it (HeartbeatHeader) is sent 102 Processing
// every heartbeat while its operation runs, before its answer (beat).
// Errors answer the status httperr.Status gives and an ErrorBody. What
// changes the cache or writes files (ensure, CLI ensure, module unpack, export,
// import), and a reload of the configuration, is logged at info level, succeeded or failed, with what it
// changed and the caller's uid and pid: the audit log.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ping", ping)
	mux.HandleFunc("POST /v1/versions", a.serve(slog.LevelDebug, "admin sync: versions listed", func(ctx context.Context, p addrs.Provider, r Request) (any, []any, error) {
		res, err := a.Versions(ctx, p)
		return res, []any{"versions", len(res)}, err
	}))
	mux.HandleFunc("POST /v1/package", a.serve(slog.LevelDebug, "admin sync: packages listed", func(ctx context.Context, p addrs.Provider, r Request) (any, []any, error) {
		res, err := a.Package(ctx, p, r.Version, r.Platforms)
		return res, []any{"packages", len(res)}, err
	}))
	mux.HandleFunc("POST /v1/ensure", a.serve(slog.LevelInfo, "admin sync: package ensured", func(ctx context.Context, p addrs.Provider, r Request) (any, []any, error) {
		res, err := a.Ensure(ctx, p, r.Version, r.Platform)
		if err != nil {
			return nil, nil, err
		}
		return res, []any{"fetched", !res.CachedAlready, "source", res.Source, "bytes", res.Bytes, "sha256", res.SHA256}, nil
	}))
	mux.HandleFunc("POST /v1/export", handle(a, slog.LevelInfo, "admin export", func(ctx context.Context, r ExportRequest) (any, []any, error) {
		res, err := a.Export(ctx, r)
		return res, []any{"out", r.Out, "selected_providers", r.Providers, "selected_versions", r.Versions, "selected_platforms", r.Platforms,
			"providers", providersOf(res.Versions), "versions", res.Versions, "packages_written", res.Written, "packages_present", res.Present,
			"bytes", res.Bytes, "failed", res.Failed, "failures", res.Failures, "unlisted", res.Unlisted, "signer", res.Signer}, err
	}))
	mux.HandleFunc("POST /v1/import", handle(a, slog.LevelInfo, "admin import", func(ctx context.Context, r ImportRequest) (any, []any, error) {
		res, err := a.Import(ctx, r)
		return res, []any{"in", r.In, "allow_unsigned", r.AllowUnsigned,
			"providers", providersOf(res.Versions), "versions", res.Versions, "packages_imported", res.Imported, "packages_present", res.Present,
			"bytes", res.Bytes, "refused", res.Failed, "refusals", res.Failures, "ignored", res.Ignored}, err
	}))
	a.moduleRoutes(mux)    // modules.go
	a.pruneRoutes(mux)     // prune.go
	a.verifyRoutes(mux)    // verify.go
	a.policyRoutes(mux)    // policy.go
	a.reloadRoutes(mux)    // reload.go
	a.cliRoutes(mux)       // clireleases.go
	a.exportKeyRoutes(mux) // exportkey.go
	return a.guard(a.drain.layer(mux))
}

// providersOf returns the providers of versions ("HOST/NAMESPACE/TYPE
// VERSION"), each once, sorted.
func providersOf(versions []string) []string {
	out := []string{}
	for _, v := range versions {
		p, _, _ := strings.Cut(v, " ")
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (a *API) serve(level slog.Level, msg string, op func(context.Context, addrs.Provider, Request) (any, []any, error)) http.HandlerFunc {
	return handle(a, level, msg, func(ctx context.Context, req Request) (any, []any, error) {
		attrs := []any{"provider", req.Provider, "version", req.Version, "platform", req.Platform}
		p, err := addrs.ParseProvider(req.Provider)
		if err != nil {
			return nil, attrs, httperr.BadRequest("%v", err)
		}
		res, more, err := op(ctx, p, req)
		return res, append(attrs, more...), err
	})
}

// decodeRequest reads body, one JSON object, into req. A field req has
// not is refused: the caller is of another release, and what it asked
// with the field is not what this release would do without it (a prune
// or an export narrowed by it would not be).
func decodeRequest(body []byte, req any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

// handle serves an admin operation whose request body is a Req; op
// returns the answer, and the request's attributes and what it did for
// the log. A success is logged at level as msg; a failure at a level by
// its status (and at least level), with what op did before it failed.
// Every line names the caller (uid and pid).
func handle[Req any](a *API, level slog.Level, msg string, op func(context.Context, Req) (any, []any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		peer, _ := peerOf(r.Context()) // guard let it in
		var req Req
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
		if err == nil {
			if err = decodeRequest(body, &req); err != nil {
				err = httperr.BadRequest("request body: %v", err)
			}
		} else {
			err = httperr.BadRequest("request body: %v", err)
		}
		var res any
		var attrs []any
		if err == nil {
			stop := beat(w, r)
			res, attrs, err = op(r.Context(), req)
			stop()
		}
		caller := []any{"caller_uid", peer.UID, "caller_pid", peer.PID}
		if err != nil {
			if r.Context().Err() != nil {
				err = &httperr.ClientGoneError{Err: err}
			}
			status := httperr.Status(err)
			flevel := slog.LevelWarn
			if status == httperr.StatusClientClosedRequest || status == http.StatusNotFound {
				flevel = slog.LevelInfo
			} else if status == http.StatusInternalServerError {
				flevel = slog.LevelError
			}
			why := []any{"status", status, "error", err}
			if logged := (*LoggedError)(nil); errors.As(err, &logged) {
				// The operation logged why; the audit line says who asked.
				flevel, why = level, []any{"status", status}
			}
			a.log.Log(r.Context(), max(flevel, level), "admin request failed",
				slices.Concat([]any{"path", r.URL.Path}, attrs, caller, why)...)
			writeJSON(w, status, ErrorBody{Error: err.Error()})
			return
		}
		a.log.Log(r.Context(), level, msg, slices.Concat(attrs, caller)...)
		writeJSON(w, http.StatusOK, res)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"internal error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

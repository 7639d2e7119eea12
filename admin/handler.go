package admin

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"

	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/internal/httperr"
	"github.com/tfmirror/tfmirror/proxy"
)

// maxRequest bounds an admin request body.
const maxRequest = 64 << 10

// Handler serves the admin API, for a unix socket only (it has no
// authentication: the socket's file mode is its access control):
//
//	POST /v1/versions {"provider"}                          -> [Version]
//	POST /v1/package  {"provider","version","platforms"}    -> [Archive]
//	POST /v1/ensure   {"provider","version","platform"}     -> Ensured
//	POST /v1/export   ExportRequest                    -> Exported
//	POST /v1/import   ImportRequest                    -> Imported
//
// Errors answer the status httperr.Status gives and an ErrorBody.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/versions", a.serve(func(ctx context.Context, p discovery.Provider, r Request) (any, error) {
		return a.Versions(ctx, p)
	}))
	mux.HandleFunc("POST /v1/package", a.serve(func(ctx context.Context, p discovery.Provider, r Request) (any, error) {
		return a.Package(ctx, p, r.Version, r.Platforms)
	}))
	mux.HandleFunc("POST /v1/ensure", a.serve(func(ctx context.Context, p discovery.Provider, r Request) (any, error) {
		return a.Ensure(ctx, p, r.Version, r.Platform)
	}))
	mux.HandleFunc("POST /v1/export", handle(a, func(ctx context.Context, r ExportRequest) (any, []any, error) {
		res, err := a.Export(ctx, r)
		return res, []any{"out", r.Out}, err
	}))
	mux.HandleFunc("POST /v1/import", handle(a, func(ctx context.Context, r ImportRequest) (any, []any, error) {
		res, err := a.Import(ctx, r)
		return res, []any{"in", r.In}, err
	}))
	a.moduleRoutes(mux) // modules.go
	return mux
}

func (a *API) serve(op func(context.Context, discovery.Provider, Request) (any, error)) http.HandlerFunc {
	return handle(a, func(ctx context.Context, req Request) (any, []any, error) {
		attrs := []any{"provider", req.Provider, "version", req.Version, "platform", req.Platform}
		p, err := proxy.ParseProviderAddress(req.Provider)
		if err != nil {
			return nil, attrs, err
		}
		res, err := op(ctx, p, req)
		return res, attrs, err
	})
}

// handle serves an admin operation whose request body is a Req; op
// returns the answer, and the request's attributes for the log.
func handle[Req any](a *API, op func(context.Context, Req) (any, []any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
		if err == nil {
			if err = json.Unmarshal(body, &req); err != nil {
				err = httperr.BadRequest("request body: %v", err)
			}
		} else {
			err = httperr.BadRequest("request body: %v", err)
		}
		var res any
		var attrs []any
		if err == nil {
			res, attrs, err = op(r.Context(), req)
		}
		if err != nil {
			if r.Context().Err() != nil {
				err = &httperr.ClientGoneError{Err: err}
			}
			status := httperr.Status(err)
			level := slog.LevelWarn
			if status == httperr.StatusClientClosedRequest || status == http.StatusNotFound {
				level = slog.LevelInfo
			} else if status == http.StatusInternalServerError {
				level = slog.LevelError
			}
			a.log.Log(r.Context(), level, "admin request failed",
				append(append([]any{"path", r.URL.Path}, attrs...), "status", status, "error", err)...)
			writeJSON(w, status, ErrorBody{Error: err.Error()})
			return
		}
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

package admin

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
)

// maxListedFailures bounds the failed packages one check lists (Failed
// counts them all), and the lines an export or import answers (reported).
const maxListedFailures = 1000

// VerifyRequest asks for a check of every cached package
// (cachecheck.Checker.VerifyCache).
type VerifyRequest struct{}

// Verified is what a check of the cache found.
type Verified struct {
	// Checked and Bytes count the packages read, and their bytes.
	Checked int   `json:"checked"`
	Bytes   int64 `json:"bytes"`
	// ByEvidence counts the packages checked against stored evidence;
	// the others were checked against their recorded sha256.
	ByEvidence int `json:"by_evidence"`
	// Failed counts the packages that failed; Failures lists the first
	// maxListedFailures of them.
	Failed   int                 `json:"failed"`
	Failures []cachecheck.Result `json:"failures"`
}

// Verify checks every cached package.
func (a *API) Verify(ctx context.Context, _ VerifyRequest) (Verified, error) {
	out := Verified{Failures: []cachecheck.Result{}}
	err := a.engine.CacheChecker().VerifyCache(ctx, func(c cachecheck.Result) {
		out.Checked++
		out.Bytes += c.Bytes
		if c.By == cachecheck.CheckedEvidence {
			out.ByEvidence++
		}
		if c.Problem != "" {
			out.Failed++
			if len(out.Failures) < maxListedFailures {
				out.Failures = append(out.Failures, c)
			}
		}
	})
	return out, err
}

// verifyRoutes adds POST /v1/verify (VerifyRequest -> Verified).
func (a *API) verifyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/verify", handle(a, slog.LevelInfo, "admin cache verify", func(ctx context.Context, req VerifyRequest) (any, []any, error) {
		res, err := a.Verify(ctx, req)
		return res, []any{"checked", res.Checked, "bytes", res.Bytes, "failed", res.Failed}, err
	}))
}

// Verify is API.Verify through the socket.
func (c *Client) Verify(ctx context.Context, req VerifyRequest) (Verified, error) {
	var out Verified
	return out, c.call(ctx, "/v1/verify", req, &out)
}

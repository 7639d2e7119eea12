package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
	"github.com/tfmirror/tfmirror/v2/releases"
	"github.com/tfmirror/tfmirror/v2/retention"
)

// maxPruneVersions bounds the versions one prune call may name.
const maxPruneVersions = 1000

// PruneRequest asks for a prune (retention.Retainer.Prune): the retention
// rules' removals now, or, with Provider, Module or CLI, the Versions
// named.
type PruneRequest struct {
	DryRun   bool   `json:"dry_run"`
	Provider string `json:"provider,omitempty"` // HOST/NAMESPACE/TYPE
	Module   string `json:"module,omitempty"`   // HOST/NAMESPACE/NAME/SYSTEM
	// CLI is a CLI release product: "terraform", "tofu" (OpenTofu's), or
	// another HashiCorp product.
	CLI      string   `json:"cli,omitempty"`
	Versions []string `json:"versions,omitempty"`
}

// Pruned is what a prune removed (or, dry run, would remove).
type Pruned struct {
	DryRun   bool                `json:"dry_run"`
	Removals []retention.Removal `json:"removals"`
	// Versions and Bytes total the removals.
	Versions int   `json:"versions"`
	Bytes    int64 `json:"bytes"`
}

// Prune runs a prune on the engine.
func (a *API) Prune(ctx context.Context, req PruneRequest) (Pruned, error) {
	var preq retention.PruneRequest
	preq.DryRun, preq.Versions = req.DryRun, req.Versions
	switch {
	case (req.Provider != "") && (req.Module != "" || req.CLI != "") || req.Module != "" && req.CLI != "":
		return Pruned{}, httperr.BadRequest("name one provider, module or CLI product")
	case req.Provider != "":
		p, err := addrs.ParseProvider(req.Provider)
		if err != nil {
			return Pruned{}, httperr.BadRequest("%v", err)
		}
		preq.Provider = &p
	case req.Module != "":
		m, err := addrs.ParseModule(req.Module)
		if err != nil {
			return Pruned{}, httperr.BadRequest("%v", err)
		}
		preq.Module = &m
	case req.CLI != "":
		pub := releases.PublisherOf(req.CLI)
		addr := releases.Address(pub, req.CLI)
		if _, _, ok := releases.ParseAddress(addr); !ok {
			return Pruned{}, httperr.BadRequest("%q is not a CLI release product", req.CLI)
		}
		preq.CLI = addr
	case len(req.Versions) > 0:
		return Pruned{}, httperr.BadRequest("versions name no provider, module or CLI product")
	}
	if (preq.Provider != nil || preq.Module != nil || preq.CLI != "") && len(req.Versions) == 0 {
		return Pruned{}, httperr.BadRequest("name the versions to remove")
	}
	if len(req.Versions) > maxPruneVersions {
		return Pruned{}, httperr.BadRequest("at most %d versions per call", maxPruneVersions)
	}
	for _, v := range req.Versions {
		if v == "" || len(v) > 128 || strings.ContainsAny(v, "/ ") {
			return Pruned{}, httperr.BadRequest("invalid version %q", v)
		}
	}
	rs, err := a.pruner.Prune(ctx, preq)
	if errors.Is(err, retention.ErrPinned) {
		// The operator's to settle: the pin goes first.
		err = &httperr.RequestError{Status: http.StatusConflict, Msg: err.Error()}
	}
	out := Pruned{DryRun: req.DryRun, Removals: rs}
	if out.Removals == nil {
		out.Removals = []retention.Removal{}
	}
	for _, r := range rs {
		out.Versions++
		out.Bytes += r.Bytes
	}
	return out, err
}

// pruneRoutes adds POST /v1/prune (PruneRequest -> Pruned).
func (a *API) pruneRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/prune", handle(a, slog.LevelInfo, "admin prune", func(ctx context.Context, req PruneRequest) (any, []any, error) {
		res, err := a.Prune(ctx, req)
		return res, []any{"provider", req.Provider, "module", req.Module, "cli", req.CLI, "dry_run", req.DryRun, "versions", res.Versions, "bytes", res.Bytes}, err
	}))
}

// Prune is API.Prune through the socket.
func (c *Client) Prune(ctx context.Context, req PruneRequest) (Pruned, error) {
	var out Pruned
	err := c.call(ctx, "/v1/prune", req, &out)
	var ce *CallError
	if req.CLI != "" && errors.As(err, &ce) && ce.Status == http.StatusBadRequest && ce.Msg == earlierPruneRefusal {
		// A serve of 2.0.0 knows no CLI field: it saw versions alone.
		return out, fmt.Errorf("the running tfmirror serve does not prune CLI releases (is it of an earlier release? restart it): %w", err)
	}
	return out, err
}

// earlierPruneRefusal is how a serve of 2.0.0, which reads no CLI field,
// refuses a prune of CLI versions: as versions of nothing.
const earlierPruneRefusal = "versions name no provider or module"

package proxy

import (
	"context"
	"net/http"
	"strings"

	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/mirror"
)

// maxPruneVersions bounds the versions one prune call may name.
const maxPruneVersions = 1000

// AdminPruneRequest asks for a prune (mirror.Engine.Prune): the retention
// rules' removals now, or, with Provider or Module, the Versions named.
type AdminPruneRequest struct {
	DryRun   bool     `json:"dry_run"`
	Provider string   `json:"provider,omitempty"` // HOST/NAMESPACE/TYPE
	Module   string   `json:"module,omitempty"`   // HOST/NAMESPACE/NAME/SYSTEM
	Versions []string `json:"versions,omitempty"`
}

// AdminPruned is what a prune removed (or, dry run, would remove).
type AdminPruned struct {
	DryRun   bool             `json:"dry_run"`
	Removals []mirror.Removal `json:"removals"`
	// Versions and Bytes total the removals.
	Versions int   `json:"versions"`
	Bytes    int64 `json:"bytes"`
}

// Prune runs a prune on the engine.
func (a *Admin) Prune(ctx context.Context, req AdminPruneRequest) (AdminPruned, error) {
	var preq mirror.PruneRequest
	preq.DryRun, preq.Versions = req.DryRun, req.Versions
	switch {
	case req.Provider != "" && req.Module != "":
		return AdminPruned{}, badRequest("name a provider or a module, not both")
	case req.Provider != "":
		p, err := parseAddress(req.Provider)
		if err != nil {
			return AdminPruned{}, err
		}
		preq.Provider = &p
	case req.Module != "":
		m, err := discovery.ParseModule(req.Module)
		if err != nil {
			return AdminPruned{}, badRequest("%v", err)
		}
		preq.Module = &m
	case len(req.Versions) > 0:
		return AdminPruned{}, badRequest("versions name no provider or module")
	}
	if (preq.Provider != nil || preq.Module != nil) && len(req.Versions) == 0 {
		return AdminPruned{}, badRequest("name the versions to remove")
	}
	if len(req.Versions) > maxPruneVersions {
		return AdminPruned{}, badRequest("at most %d versions per call", maxPruneVersions)
	}
	for _, v := range req.Versions {
		if v == "" || len(v) > 128 || strings.ContainsAny(v, "/ ") {
			return AdminPruned{}, badRequest("invalid version %q", v)
		}
	}
	rs, err := a.engine.Prune(ctx, preq)
	out := AdminPruned{DryRun: req.DryRun, Removals: rs}
	if out.Removals == nil {
		out.Removals = []mirror.Removal{}
	}
	for _, r := range rs {
		out.Versions++
		out.Bytes += r.Bytes
	}
	return out, err
}

// pruneRoutes adds POST /v1/prune (AdminPruneRequest -> AdminPruned).
func (a *Admin) pruneRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/prune", serveAdmin(a, func(ctx context.Context, req AdminPruneRequest) (any, []any, error) {
		res, err := a.Prune(ctx, req)
		return res, []any{"provider", req.Provider, "module", req.Module, "dry_run", req.DryRun}, err
	}))
}

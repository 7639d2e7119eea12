package admin

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// PolicyRequest names a provider or module, and for a release a version.
type PolicyRequest struct {
	Kind    string `json:"kind"` // provider or module
	Address string `json:"address"`
	Version string `json:"version,omitempty"`
	// Window is the minimum release age the asker's policy applies, for
	// Release (it decides which versions anchor a major line).
	Window time.Duration `json:"window,omitempty"`
}

// KnownRelease is what the cache knows of a version's release
// (mirror/inventory.Inventory.KnownRelease).
type KnownRelease struct {
	Known   bool      `json:"known"`
	At      time.Time `json:"at,omitzero"`
	InHouse bool      `json:"in_house,omitempty"`
}

// parse checks the request's address, and when want its version, which
// it returns in its canonical form (policy.Kind.ParseVersion: a module's
// "v1.1.0" is 1.1.0, a provider's "1.1" is 1.1.0), the form release times
// are keyed by.
func (r PolicyRequest) parse(wantVersion bool) (kind policy.Kind, addr, version string, err error) {
	kind, addr, err = r.parseAddress()
	if err != nil || !wantVersion {
		return kind, addr, "", err
	}
	v, err := kind.ParseVersion(r.Version)
	if err != nil {
		return "", "", "", httperr.BadRequest("%v", err)
	}
	return kind, addr, v.String(), nil
}

// parseAddress checks the request's kind and address.
func (r PolicyRequest) parseAddress() (policy.Kind, string, error) {
	kind := policy.Kind(r.Kind)
	var addr string
	switch kind {
	case policy.Provider:
		p, err := addrs.ParseProvider(r.Address)
		if err != nil {
			return "", "", httperr.BadRequest("%v", err)
		}
		addr = p.String()
	case policy.Module:
		m, err := addrs.ParseModule(r.Address)
		if err != nil {
			return "", "", httperr.BadRequest("%v", err)
		}
		addr = m.String()
	default:
		return "", "", httperr.BadRequest("kind %q: want provider or module", r.Kind)
	}
	return kind, addr, nil
}

// Held is what the package policy in effect holds back of one provider
// or module, among what it refused or left out of a list since the
// engine started (the policy's part of mirror.Engine.Withheld): the
// address itself with Version "", or versions of it.
func (a *API) Held(_ context.Context, req PolicyRequest) ([]unsigned.Version, error) {
	kind, addr, _, err := req.parse(false)
	if err != nil {
		return nil, err
	}
	wantKind := ""
	if kind == policy.Module {
		wantKind = string(policy.Module)
	}
	out := []unsigned.Version{}
	for _, h := range a.engine.Withheld() {
		if h.Rule != "" && h.Kind == wantKind && h.Provider == addr {
			out = append(out, h)
		}
	}
	return out, nil
}

// Release is what the cache knows of when a version was released; it
// asks no origin.
func (a *API) Release(ctx context.Context, req PolicyRequest) (KnownRelease, error) {
	kind, addr, version, err := req.parse(true)
	if err != nil {
		return KnownRelease{}, err
	}
	rel, err := a.engine.Inventory().KnownRelease(ctx, kind, addr, version, req.Window)
	if err != nil {
		return KnownRelease{}, err
	}
	return KnownRelease{Known: rel.Known, At: rel.At, InHouse: rel.InHouse}, nil
}

// policyRoutes adds POST /v1/policy/held (PolicyRequest ->
// [unsigned.Version]) and POST /v1/policy/release (PolicyRequest ->
// KnownRelease).
func (a *API) policyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/policy/held", handle(a, slog.LevelDebug, "admin policy: held versions listed", func(ctx context.Context, req PolicyRequest) (any, []any, error) {
		res, err := a.Held(ctx, req)
		return res, []any{"kind", req.Kind, "address", req.Address, "held", len(res)}, err
	}))
	mux.HandleFunc("POST /v1/policy/release", handle(a, slog.LevelDebug, "admin policy: release time read", func(ctx context.Context, req PolicyRequest) (any, []any, error) {
		res, err := a.Release(ctx, req)
		return res, []any{"kind", req.Kind, "address", req.Address, "version", req.Version, "known", res.Known}, err
	}))
}

// Held is API.Held through the socket.
func (c *Client) Held(ctx context.Context, req PolicyRequest) ([]unsigned.Version, error) {
	var out []unsigned.Version
	return out, c.call(ctx, "/v1/policy/held", req, &out)
}

// Release is API.Release through the socket.
func (c *Client) Release(ctx context.Context, req PolicyRequest) (KnownRelease, error) {
	var out KnownRelease
	return out, c.call(ctx, "/v1/policy/release", req, &out)
}

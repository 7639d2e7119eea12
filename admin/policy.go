package admin

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
	"github.com/tfmirror/tfmirror/v2/releases"
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
// address itself with Version "", or versions of it. A CLI product's
// address (releases.Address, of kind provider) is answered from the
// CLI releases side (CLIReleases.Held), which holds them back.
func (a *API) Held(_ context.Context, req PolicyRequest) ([]unsigned.Version, error) {
	kind, addr, _, err := req.parse(false)
	if err != nil {
		return nil, err
	}
	wantKind := ""
	if kind == policy.Module {
		wantKind = string(policy.Module)
	}
	held := a.engine.Withheld()
	if _, _, ok := releases.ParseAddress(addr); ok && kind == policy.Provider && a.opts.Releases != nil {
		wantKind, held = served.HeldCLIKind, a.opts.Releases.Held()
	}
	out := []unsigned.Version{}
	for _, h := range held {
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
	// A CLI product's address (releases.hashicorp.com/hashicorp/PRODUCT,
	// get.opentofu.org/opentofu/tofu) is a provider's to the policy, and
	// dated by the releases side as its door dates it: its SHA256SUMS
	// signature and the listing rule, not by provider records.
	if pub, product, ok := releases.ParseAddress(addr); ok && kind == policy.Provider && a.opts.Releases != nil {
		rel := a.opts.Releases.StoredRelease(pub, product, version)
		return KnownRelease{Known: rel.Known, At: rel.At}, nil
	}
	rel, err := a.engine.Inventory().KnownRelease(ctx, kind, addr, version, req.Window)
	if err != nil {
		return KnownRelease{}, err
	}
	return KnownRelease{Known: rel.Known, At: rel.At, InHouse: rel.InHouse}, nil
}

// Explained is the package policy in force judging an address, or one
// version of it (policy.Explanation, as Explanation gives it back).
type Explained struct {
	// Rules is how many rules the policy in force has; 0: none, and
	// everything is allowed.
	Rules       int           `json:"rules"`
	Allowed     bool          `json:"allowed"`
	Rule        string        `json:"rule,omitempty"`
	Detail      string        `json:"detail,omitempty"`
	Reason      string        `json:"reason,omitempty"`
	AvailableAt time.Time     `json:"available_at,omitzero"`
	Window      time.Duration `json:"window,omitempty"`
	WindowText  string        `json:"window_text,omitempty"`
	// Release is what the cache knows of the version's release, read
	// when a minimum release age applies; ReleaseFrom says where.
	Release     KnownRelease `json:"release,omitzero"`
	ReleaseFrom string       `json:"release_from,omitempty"`
}

// Explanation is e as package policy says it, of the kind, address and
// version asked.
func (e Explained) Explanation(kind policy.Kind, address, version string) policy.Explanation {
	return policy.Explanation{Kind: kind, Address: address, Version: version,
		Verdict:     policy.Verdict{Allowed: e.Allowed, Rule: e.Rule, Detail: e.Detail, Reason: e.Reason, AvailableAt: e.AvailableAt},
		Window:      e.Window,
		WindowText:  e.WindowText,
		Release:     policy.Release{At: e.Release.At, Known: e.Release.Known, InHouse: e.Release.InHouse},
		ReleaseFrom: e.ReleaseFrom}
}

// Explain judges the address, or the version when the request names one,
// by the package policy in force now, as `tfmirror policy explain` does
// with a configuration file's; the release time, when a minimum release
// age applies, is what the cache knows (no origin is asked).
func (a *API) Explain(ctx context.Context, req PolicyRequest) (Explained, error) {
	kind, addr, err := req.parseAddress()
	if err != nil {
		return Explained{}, err
	}
	version := ""
	if req.Version != "" {
		if _, _, version, err = req.parse(true); err != nil {
			return Explained{}, err
		}
	}
	pol := a.engine.Inventory().Policy()
	var rel policy.Release
	from := ""
	if w := pol.Window(kind, addr); version != "" && w > 0 {
		r, err := a.Release(ctx, PolicyRequest{Kind: req.Kind, Address: addr, Version: version, Window: w})
		if err != nil {
			return Explained{}, err
		}
		rel, from = policy.Release{At: r.At, Known: r.Known, InHouse: r.InHouse}, "the cache of the running tfmirror"
	}
	ex := pol.Explain(kind, addr, version, rel, from, time.Now())
	v := ex.Verdict
	return Explained{Rules: pol.Len(), Allowed: v.Allowed, Rule: v.Rule, Detail: v.Detail, Reason: v.Reason, AvailableAt: v.AvailableAt,
		Window: ex.Window, WindowText: ex.WindowText,
		Release:     KnownRelease{Known: ex.Release.Known, At: ex.Release.At, InHouse: ex.Release.InHouse},
		ReleaseFrom: ex.ReleaseFrom}, nil
}

// policyRoutes adds POST /v1/policy/held (PolicyRequest ->
// [unsigned.Version]), POST /v1/policy/release (PolicyRequest ->
// KnownRelease) and POST /v1/policy/explain (PolicyRequest -> Explained).
func (a *API) policyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/policy/explain", handle(a, slog.LevelDebug, "admin policy: explained", func(ctx context.Context, req PolicyRequest) (any, []any, error) {
		res, err := a.Explain(ctx, req)
		return res, []any{"kind", req.Kind, "address", req.Address, "version", req.Version, "allowed", res.Allowed}, err
	}))
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

// Explain is API.Explain through the socket.
func (c *Client) Explain(ctx context.Context, req PolicyRequest) (Explained, error) {
	var out Explained
	return out, earlier(c.call(ctx, "/v1/policy/explain", req, &out), "explain by its package policy")
}

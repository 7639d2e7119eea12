package admin

// Admin operations on the CLI releases (Terraform's, OpenTofu's), for the
// cli blocks of `tfmirror sync`:
//
//	POST /v1/cli/versions {"product"}                       -> ["1.6.0", ...]
//	POST /v1/cli/ensure   {"product","version","platform"}  -> CLIEnsured
//
// ensure makes sure one archive is cached, fetched and verified exactly as
// for a client of the releases door (releases.Releases.OpenArchive): the
// signed SHA256SUMS, the archive's sha256, the package policy. Each call
// names one archive, so a request is as small as every admin request and
// a sync of many versions is many calls, each bounded in time by its
// caller.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// CLIReleases is what the CLI operations use of the releases side, behind
// the package policy. *served.Releases implements it.
type CLIReleases interface {
	Versions(ctx context.Context, pub releases.Publisher, product string) (*releases.List, releases.ListState, error)
	OpenArchive(ctx context.Context, pub releases.Publisher, product, version, name string) (*mirror.Archive, error)
	Sums(ctx context.Context, pub releases.Publisher, product, version string) (*releases.Sums, error)
	// Document is a small file of a version (the files passed through,
	// releases.PassedThrough, which ensure keeps beside the archive).
	Document(ctx context.Context, pub releases.Publisher, product, version, name string) ([]byte, error)
	// Cached reports whether the archive of sha256 sha is in the cache.
	Cached(sha string) bool
	// StoredRelease is what the cache knows of a version's release
	// (policy explain), asking no origin.
	StoredRelease(pub releases.Publisher, product, version string) policy.Release
	// Held are the CLI versions (and products) the package policy holds
	// back, among those refused or left out of a list since the process
	// started (API.Held answers them for a CLI product's address).
	Held() []unsigned.Version
}

var _ CLIReleases = (*served.Releases)(nil)

// CLIRequest names a CLI product ("terraform", "tofu", ...) and, for
// ensure, a version and a platform (os_arch).
type CLIRequest struct {
	Product  string `json:"product"`
	Version  string `json:"version,omitempty"`
	Platform string `json:"platform,omitempty"`
}

// CLIEnsured is the result of making sure one CLI archive is cached. When
// Held or Unpublished is set nothing was fetched.
type CLIEnsured struct {
	// Archive is the archive's name, PRODUCT_VERSION_OS_ARCH.zip.
	Archive string `json:"archive"`
	SHA256  string `json:"sha256,omitempty"`
	// Bytes is the archive's size.
	Bytes int64 `json:"bytes,omitempty"`
	// CachedAlready says the archive was in the cache before the call.
	CachedAlready bool `json:"cached_already,omitempty"`
	// Held says why the package policy holds the version back.
	Held string `json:"held,omitempty"`
	// Unpublished says the origin publishes no such archive: the
	// version's signed SHA256SUMS does not list it, or the version is not
	// released.
	Unpublished bool `json:"unpublished,omitempty"`
}

// maxCLIProduct bounds a product name, as the releases side does.
const maxCLIProduct = 64

// parse checks the request's product (and version and platform, when
// want); every refusal is a 400.
func (r CLIRequest) parse(wantArchive bool) error {
	if r.Product == "" || len(r.Product) > maxCLIProduct || strings.Trim(r.Product, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return httperr.BadRequest("product %.80q: want a lower-case product name such as terraform or tofu", r.Product)
	}
	if !wantArchive {
		if r.Version != "" || r.Platform != "" {
			return httperr.BadRequest("a version list takes no version or platform")
		}
		return nil
	}
	if _, err := releases.CanonicalVersion(r.Version); err != nil {
		return httperr.BadRequest("version %.80q: want a version in its canonical spelling, such as 1.6.0", r.Version)
	}
	if _, err := addrs.ParsePlatform(r.Platform); err != nil {
		return httperr.BadRequest("%v", err)
	}
	return nil
}

// errNoCLIReleases: the process has no releases side to sync.
var errNoCLIReleases = &httperr.RequestError{Status: http.StatusConflict, Msg: "this tfmirror has no CLI releases side"}

// CLIVersions lists the versions of product the releases side serves
// (what the package policy holds back left out), newest first.
func (a *API) CLIVersions(ctx context.Context, req CLIRequest) ([]string, error) {
	if err := req.parse(false); err != nil {
		return nil, err
	}
	if a.opts.Releases == nil {
		return nil, errNoCLIReleases
	}
	list, _, err := a.opts.Releases.Versions(ctx, releases.PublisherOf(req.Product), req.Product)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list.Versions))
	for _, l := range list.Versions {
		out = append(out, l.Version)
	}
	return out, nil
}

// EnsureCLI makes sure the archive of req's version of its product for
// its platform is cached: fetched and verified as for a client of the
// releases door. A version the policy holds back, or an archive the
// origin does not publish, is an answer (CLIEnsured.Held, Unpublished),
// not an error.
func (a *API) EnsureCLI(ctx context.Context, req CLIRequest) (CLIEnsured, error) {
	res, err := ensureCLI(ctx, a.opts.Releases, req)
	if res.Held == "" && !res.Unpublished {
		a.countSynced(ctx, err, res.CachedAlready, res.Bytes)
	}
	return res, err
}

// LookCLI says what EnsureCLI would do for req, fetching no archive (a
// dry run): whether the archive is cached (CLIEnsured.CachedAlready, with
// its sha256), held back by the policy, or not published. The version's
// signed SHA256SUMS is fetched and verified when the mirror lacks it, as
// a dry run of providers fetches their metadata.
func (a *API) LookCLI(ctx context.Context, req CLIRequest) (CLIEnsured, error) {
	rel := a.opts.Releases
	res, err := cliRequest(rel, req)
	if err != nil {
		return res, err
	}
	sums, err := rel.Sums(ctx, releases.PublisherOf(req.Product), req.Product, req.Version)
	if done, err := res.refused(err); done {
		return res, err
	}
	if res.SHA256 = sums.SHA256(res.Archive); res.SHA256 == "" {
		res.Unpublished = true
		return res, nil
	}
	res.CachedAlready = rel.Cached(res.SHA256)
	return res, nil
}

// cliRequest checks req, of one archive of rel, and returns its answer
// naming the archive.
func cliRequest(rel CLIReleases, req CLIRequest) (CLIEnsured, error) {
	if err := req.parse(true); err != nil {
		return CLIEnsured{}, err
	}
	if rel == nil {
		return CLIEnsured{}, errNoCLIReleases
	}
	return CLIEnsured{Archive: req.Product + "_" + req.Version + "_" + req.Platform + ".zip"}, nil
}

// refused reads err, of the releases side asked for the archive res
// names: a version the policy holds back and an archive the origin does
// not publish are answers set in res (done, with no error); another
// error is the call's (done); nil is not done.
func (res *CLIEnsured) refused(err error) (done bool, _ error) {
	var held *gate.PolicyError
	switch {
	case errors.As(err, &held):
		res.Held = held.Verdict.Message()
		return true, nil
	case errors.Is(err, releases.ErrNotFound):
		res.Unpublished = true
		return true, nil
	}
	return err != nil, err
}

// ensureCLI is EnsureCLI of rel, uncounted.
func ensureCLI(ctx context.Context, rel CLIReleases, req CLIRequest) (CLIEnsured, error) {
	res, err := cliRequest(rel, req)
	if err != nil {
		return res, err
	}
	pub := releases.PublisherOf(req.Product)
	arc, err := rel.OpenArchive(ctx, pub, req.Product, req.Version, res.Archive)
	if done, err := res.refused(err); done {
		return res, err
	}
	defer arc.Close()
	res.SHA256 = arc.SHA256
	if arc.Content() != nil {
		res.CachedAlready, res.Bytes = true, arc.Size
		return res, ensurePassedThrough(ctx, rel, pub, req)
	}
	// The whole archive read: its sha256 checked, then committed.
	n, err := io.Copy(io.Discard, arc)
	if err != nil {
		return res, fmt.Errorf("%s: %w", res.Archive, err)
	}
	res.Bytes = n
	// Committed to the cache just after its last byte: ensured means
	// cached, so that a sync that follows finds it.
	if err := arc.Stored(ctx); err != nil {
		return res, fmt.Errorf("%s: verified but not cached: %w", res.Archive, err)
	}
	if !rel.Cached(arc.SHA256) {
		return res, fmt.Errorf("%s: verified and cached, but evicted at once (is --cache-max-bytes too small?)", res.Archive)
	}
	return res, ensurePassedThrough(ctx, rel, pub, req)
}

// ensurePassedThrough keeps the files of req's version passed through
// (OpenTofu's cosign .sig and .pem), once its archive is ensured: tenv
// downloads them before it checks a release, and a sealed mirror serves
// only what it holds. A release published without them is ensured all
// the same; one whose files the origin could not give now is not (its
// archive is cached, and the next sync asks for them again).
func ensurePassedThrough(ctx context.Context, rel CLIReleases, pub releases.Publisher, req CLIRequest) error {
	for _, name := range releases.PassedThrough(pub, req.Product, req.Version) {
		if _, err := rel.Document(ctx, pub, req.Product, req.Version, name); err != nil && !errors.Is(err, releases.ErrNotFound) {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// cliRoutes adds the CLI operations to mux.
func (a *API) cliRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/cli/versions", handle(a, slog.LevelDebug, "admin sync: CLI versions listed", func(ctx context.Context, req CLIRequest) (any, []any, error) {
		res, err := a.CLIVersions(ctx, req)
		return res, []any{"product", req.Product, "versions", len(res)}, err
	}))
	mux.HandleFunc("POST /v1/cli/ensure", handle(a, slog.LevelInfo, "admin sync: CLI archive ensured", func(ctx context.Context, req CLIRequest) (any, []any, error) {
		res, err := a.EnsureCLI(ctx, req)
		attrs := []any{"product", req.Product, "version", req.Version, "platform", req.Platform}
		if err != nil {
			return nil, attrs, err
		}
		return res, append(attrs, "fetched", !res.CachedAlready && res.Held == "" && !res.Unpublished,
			"held", res.Held, "unpublished", res.Unpublished, "bytes", res.Bytes, "sha256", res.SHA256), nil
	}))
	mux.HandleFunc("POST /v1/cli/look", handle(a, slog.LevelDebug, "admin sync: CLI archive looked up", func(ctx context.Context, req CLIRequest) (any, []any, error) {
		res, err := a.LookCLI(ctx, req)
		attrs := []any{"product", req.Product, "version", req.Version, "platform", req.Platform}
		if err != nil {
			return nil, attrs, err
		}
		return res, append(attrs, "cached", res.CachedAlready, "held", res.Held, "unpublished", res.Unpublished), nil
	}))
}

// CLIVersions is API.CLIVersions through the socket.
func (c *Client) CLIVersions(ctx context.Context, req CLIRequest) ([]string, error) {
	var out []string
	return out, earlier(c.call(ctx, "/v1/cli/versions", req, &out), "sync CLI releases")
}

// EnsureCLI is API.EnsureCLI through the socket.
func (c *Client) EnsureCLI(ctx context.Context, req CLIRequest) (CLIEnsured, error) {
	var out CLIEnsured
	return out, earlier(c.call(ctx, "/v1/cli/ensure", req, &out), "sync CLI releases")
}

// LookCLI is API.LookCLI through the socket.
func (c *Client) LookCLI(ctx context.Context, req CLIRequest) (CLIEnsured, error) {
	var out CLIEnsured
	return out, earlier(c.call(ctx, "/v1/cli/look", req, &out), "sync CLI releases")
}

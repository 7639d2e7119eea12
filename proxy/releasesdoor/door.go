// Package releasesdoor is the CLI releases front door, under /releases/:
// HashiCorp's releases layout under /releases/hashicorp/ (PRODUCT/index.json,
// PRODUCT/VERSION/index.json, the HTML listings of PRODUCT/ (or PRODUCT) and
// PRODUCT/VERSION/, the archives, SHA256SUMS and its signatures) and
// OpenTofu's release files under /releases/opentofu/ (vVERSION/FILE, the
// version list its installers read, api.json, and the latest release's
// tag as GitHub's API gives it, latest), as tenv, tfenv,
// tfswitch, hc-install and the setup actions read them, every URL in a
// document pointing back at the mirror.
//
// It owns the wire: paths, documents, statuses, authentication. What is
// served, and whether it verified, is package releases'; whether the
// package policy lets it be served, package mirror/served's, the layer the
// door reaches the releases through.
package releasesdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// Prefix is where the door is mounted.
const Prefix = "/releases/"

// Releases is what the door answers from: the CLI releases behind the
// package policy (*mirror/served.Releases).
type Releases interface {
	Products() []string
	SignerKeyID(pub releases.Publisher, product, version string) string
	Versions(ctx context.Context, pub releases.Publisher, product string) (*releases.List, releases.ListState, error)
	Sums(ctx context.Context, pub releases.Publisher, product, version string) (*releases.Sums, error)
	Document(ctx context.Context, pub releases.Publisher, product, version, name string) ([]byte, error)
	OpenArchive(ctx context.Context, pub releases.Publisher, product, version, name string) (*mirror.Archive, error)
	// ServedBuilds are the archives of a version's SHA256SUMS a listing
	// names: sealed, only those cached.
	ServedBuilds(s *releases.Sums) []releases.Build
}

// Config configures a Door.
type Config struct {
	// MirrorURL is the mirror's base URL for a request, as clients reach
	// it, for the URLs in documents: proxy.Server.MirrorURL, the public
	// URL in force (a reload changes it) or else the request's. Default:
	// from each request, https unless PlainHTTP.
	MirrorURL func(r *http.Request) string
	// PlainHTTP says the mirror serves http, for URLs taken from requests
	// when MirrorURL is not set (proxy.RequestURL).
	PlainHTTP bool
	// Auth, when set, requires a client token: as a Bearer token, or as
	// the password of Basic credentials (the installers' remote user and
	// password settings); the answers are then private (proxy.Private).
	// Default: anonymous.
	Auth *proxy.Auth
	// Publishers are those whose releases the door serves: every path of
	// another answers 404 saying so, before the releases side is asked.
	// Default (nil): both.
	Publishers []releases.Publisher
	Logger     *slog.Logger
}

// Door serves /releases/.
type Door struct {
	cfg      Config
	rel      Releases
	failures *proxy.Failures
}

// The layers in front of the door answer its requests in its format.
var _ proxy.Door = (*Door)(nil)

// New returns a Door answering from rel.
func New(cfg Config, rel Releases) (*Door, error) {
	if rel == nil {
		return nil, errors.New("releasesdoor: the releases side is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Publishers == nil {
		cfg.Publishers = []releases.Publisher{releases.HashiCorp, releases.OpenTofu}
	}
	if cfg.MirrorURL == nil {
		plain := cfg.PlainHTTP
		cfg.MirrorURL = func(r *http.Request) string { return proxy.RequestURL(r, plain) }
	}
	return &Door{cfg: cfg, rel: rel, failures: proxy.NewFailures()}, nil
}

// maxPathLen bounds a request path.
const maxPathLen = 512

// ServeHTTP serves everything under Prefix.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		d.fail(w, r, &httperr.RequestError{Status: http.StatusMethodNotAllowed, Msg: "only GET and HEAD"})
		return
	}
	if !d.authorized(w, r) {
		return
	}
	if d.cfg.Auth != nil {
		// A token holder's answer is not for a cache in front to hand
		// to others.
		w = proxy.Private(w)
	}
	path := r.URL.Path
	rest, ok := strings.CutPrefix(path, Prefix)
	// A path spelt with escapes it does not need (1.9.0%2Bent, as some
	// URL encoders write a build's "+") is read decoded, as the registry
	// doors read theirs; one whose escapes make a separator (%2F, %5C)
	// is refused, where reading it decoded would split a name in two.
	escaped := strings.ToLower(r.URL.EscapedPath())
	if !ok || len(path) > maxPathLen || strings.Contains(escaped, "%2f") || strings.Contains(escaped, "%5c") || strings.Contains(rest, "//") {
		d.fail(w, r, fmt.Errorf("%w: no such path", releases.ErrNotFound))
		return
	}
	// hc-install joins its base URL with the path of each build's url
	// (made for a base whose path is the releases site's root): the
	// path of the mirror's URL and the door's own prefix, twice, is the
	// door's own path. Behind a proxy that serves the mirror under a
	// path, the first is gone and the second has it.
	hc := string(releases.HashiCorp) + "/"
	if doubled, ok := strings.CutPrefix(rest, hc+d.publicPath(r)+strings.TrimPrefix(Prefix, "/")+hc); ok {
		rest = hc + doubled
	}
	parts := strings.Split(rest, "/")
	switch pub := releases.Publisher(parts[0]); {
	case (pub == releases.HashiCorp || pub == releases.OpenTofu) && !slices.Contains(d.cfg.Publishers, pub):
		d.fail(w, r, fmt.Errorf("%w: %s's releases are not served by this mirror (its status page says why)", releases.ErrNotFound, pub))
	case pub == releases.HashiCorp:
		d.hashicorp(w, r, parts[1:])
	case pub == releases.OpenTofu:
		d.opentofu(w, r, parts[1:])
	default:
		d.fail(w, r, fmt.Errorf("%w: no such publisher", releases.ErrNotFound))
	}
}

// publicPath is the path of the mirror's URL for r without its first
// slash: "" at the root, else ending in a slash.
func (d *Door) publicPath(r *http.Request) string {
	u, err := url.Parse(d.cfg.MirrorURL(r))
	if err != nil {
		return ""
	}
	p := strings.TrimPrefix(u.Path, "/")
	if p != "" && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// authorized checks the client token when Config.Auth is set.
func (d *Door) authorized(w http.ResponseWriter, r *http.Request) bool {
	a := d.cfg.Auth
	if a == nil {
		return true
	}
	if scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") && a.CheckToken(r, strings.TrimSpace(cred)) {
		return true
	}
	if _, pass, ok := r.BasicAuth(); ok && a.CheckToken(r, pass) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="tfmirror releases"`)
	d.fail(w, r, httperr.ErrUnauthorized)
	return false
}

// base is the URL of the publisher's part of the door, without a final
// slash, for an answer to r that names it. The URL may come from r's Host
// and X-Forwarded-Proto (Config.MirrorURL): the answer says it varies by
// them, so that a cache in front keeps one per Host, never handing one
// client's to all.
func (d *Door) base(w http.ResponseWriter, r *http.Request, pub releases.Publisher) string {
	proxy.VaryByRequestURL(w)
	return strings.TrimSuffix(d.cfg.MirrorURL(r), "/") + strings.TrimSuffix(Prefix, "/") + "/" + string(pub)
}

// AnswerError answers err, with which a layer in front of the door
// refused one of its requests (a path too long, a client address over
// the limit of failed attempts: proxy.Door), as the door answers its own
// errors: plain text, as the releases site does, once logged.
func (d *Door) AnswerError(w http.ResponseWriter, r *http.Request, err error) {
	d.fail(w, r, err)
}

// fail answers err's status, once logged.
func (d *Door) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		err = httperr.Gone(r.Context(), err)
	}
	status := httperr.Status(err)
	d.failures.Log(d.cfg.Logger, w, r, status, "path", proxy.LoggedPath(r), "status", status, "error", err)
	if status == httperr.StatusClientClosedRequest {
		// Told nothing, but counted and logged with its own code, not
		// as a 200 that delivered nothing.
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		return
	}
	msg := err.Error()
	if status == http.StatusInternalServerError {
		msg = "internal error"
	}
	w.Header().Set("Cache-Control", "no-store")
	httperr.SetRetryAfter(w.Header(), err)
	http.Error(w, msg, status)
}

// writeJSON sends a document.
func (d *Door) writeJSON(w http.ResponseWriter, r *http.Request, v any, stale bool) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.write(w, r, "application/json", append(body, '\n'), stale)
}

// write sends a document made for r (a version list or document, a
// listing) under a strong ETag of its bytes (proxy.ServeDocument): a
// cache in front revalidating it is answered 304 while it is the same.
func (d *Door) write(w http.ResponseWriter, r *http.Request, contentType string, body []byte, stale bool) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	if strings.HasPrefix(contentType, "text/html") {
		// A listing is a page of the mirror's origin, as the status
		// page is, and says what it says: no script, style or frame,
		// and no site frames it.
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
	}
	proxy.MarkStale(w, stale) // as the provider and module doors mark theirs
	if stale {
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Cache-Control", "max-age=60")
	}
	proxy.ServeDocument(w, r, body, d.fail)
}

// serveArchive sends an archive: a cached one with Range and conditional
// requests, one being fetched as the engine releases its bytes. One being
// fetched from an origin that did not announce its length is sent once
// cached, with its length (lengthless).
func (d *Door) serveArchive(w http.ResponseWriter, r *http.Request, pub releases.Publisher, product, version, name string) {
	a, err := d.rel.OpenArchive(r.Context(), pub, product, version, name)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if a.Content() == nil && a.Size < 0 && r.Method == http.MethodGet {
		if a, err = d.lengthless(r, a, pub, product, version, name); err != nil {
			d.fail(w, r, err)
			return
		}
	}
	defer a.Close()
	h := w.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("ETag", `"`+a.SHA256+`"`)
	h.Set("Cache-Control", proxy.PackageCacheControl) // the policy may refuse the version on a reload
	h.Set("X-Tfmirror-Cache", a.Source.String())
	if content := a.Content(); content != nil {
		proxy.ServeCached(w, r, a.ModTime, content, d.fail)
		return
	}
	proxy.StreamArchive(w, r, a, d.fail)
}

// lengthless reads a, an archive being fetched from an origin that did not
// announce its length, to its end (its sha256 checked), waits until it is
// committed to the cache, and opens it again from there, so that it is
// answered with its length: hc-install refuses an archive answered
// without one (it compares the bytes it read with the length announced).
// a is closed. An archive the cache did not take (a write that failed, or
// evicted at once) is opened again as it comes, and answered without its
// length.
func (d *Door) lengthless(r *http.Request, a *mirror.Archive, pub releases.Publisher, product, version, name string) (*mirror.Archive, error) {
	ctx := r.Context()
	defer a.Close()
	if _, err := io.Copy(io.Discard, a); err != nil {
		return nil, err
	}
	err := a.Stored(ctx)
	if err == nil {
		var cached *mirror.Archive
		if cached, err = a.Reopen(); err == nil {
			return cached, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	d.cfg.Logger.Warn("release archive verified but not in the cache; answered without its length",
		"archive", name, "sha256", a.SHA256, "error", err)
	return d.rel.OpenArchive(ctx, pub, product, version, name)
}

// listing is an HTML page of links, as the releases site's listings are.
var listing = template.Must(template.New("listing").Parse(`<!DOCTYPE html>
<html><head><title>{{.Title}}</title></head>
<body>
<ul>
{{- range .Links}}
<li><a href="{{.Href}}">{{.Text}}</a></li>
{{- end}}
</ul>
</body></html>
`))

type link struct{ Href, Text string }

// linkBase is the path a listing's links to r name the door by, ending
// in a slash: Prefix under the path of the mirror's URL (publicPath), as
// the URLs of the documents are, so that a link followed behind a proxy
// that serves the mirror under a path reaches the door. The path does not
// come from the request's Host: without a public URL it is the root's.
func (d *Door) linkBase(r *http.Request) string {
	return "/" + d.publicPath(r) + strings.TrimPrefix(Prefix, "/")
}

func (d *Door) writeListing(w http.ResponseWriter, r *http.Request, title string, links []link, stale bool) {
	var b strings.Builder
	if err := listing.Execute(&b, struct {
		Title string
		Links []link
	}{title, links}); err != nil {
		d.fail(w, r, err)
		return
	}
	d.write(w, r, "text/html; charset=utf-8", []byte(b.String()), stale)
}

func notFound() error { return fmt.Errorf("%w: no such path", releases.ErrNotFound) }

// TenvRemoteFileHeader heads, in Snippets, tenv's remote configuration
// file: the lines after it, each "#   " dropped, are that file.
const TenvRemoteFileHeader = "# or tenv's remote configuration file (~/.tenv/remote.yaml, or TENV_REMOTE_CONF):"

// Snippets are each installer's settings for the door at mirrorURL (the
// mirror's base URL, "https://host/"), for the status page: the lines of
// docs/cli-releases.md's sections, for this mirror, for the publishers
// in pubs (those the door serves) alone: a setting for the other would
// point an installer at a door that refuses it.
func Snippets(mirrorURL string, pubs ...releases.Publisher) string {
	base := strings.TrimSuffix(mirrorURL, "/") + strings.TrimSuffix(Prefix, "/")
	hc, tofu := slices.Contains(pubs, releases.HashiCorp), slices.Contains(pubs, releases.OpenTofu)
	var b strings.Builder
	add := func(on bool, lines ...string) {
		if on {
			b.WriteString(strings.Join(lines, "\n") + "\n")
		}
	}
	add(hc, "# tenv (Terraform), tfenv",
		"export TFENV_REMOTE="+base+"/hashicorp",
		"export TFENV_LIST_MODE=api   # tenv only",
		"# tenv fetches HashiCorp's key from www.hashicorp.com at every install unless",
		"# TFENV_HASHICORP_PGP_KEY names a copy of it (the mirror's: releases/keys/hashicorp.asc)", "")
	add(tofu, "# tenv (OpenTofu)",
		"export TOFUENV_INSTALL_MODE=mirror TOFUENV_LIST_MODE=mirror",
		"export TOFUENV_LIST_URL="+base+"/opentofu/api.json",
		"export TOFUENV_URL_TEMPLATE='"+base+"/opentofu/v{{ .Version }}/{{ .Artifact }}'",
		"# without cosign, tenv fetches OpenTofu's key from get.opentofu.org at every install",
		"# unless TOFUENV_OPENTOFU_PGP_KEY names a copy of it (releases/keys/opentofu.asc)", "")
	add(hc || tofu, TenvRemoteFileHeader)
	add(hc, "#   terraform:",
		"#     url: "+base+"/hashicorp",
		"#     list_mode: api")
	add(tofu, "#   tofu:   # its URL template stays TOFUENV_URL_TEMPLATE above",
		"#     install_mode: mirror",
		"#     list_mode: mirror",
		"#     list_url: "+base+"/opentofu/api.json")
	add(hc || tofu, "", "# tfswitch: the publisher's key comes from its site, or from")
	add(hc && tofu, "# ~/.terraform.versions/terraform_72D7468F.asc (opentofu_0C0AF313E5FD9F80.asc)")
	add(hc && !tofu, "# ~/.terraform.versions/terraform_72D7468F.asc")
	add(tofu && !hc, "# ~/.terraform.versions/opentofu_0C0AF313E5FD9F80.asc")
	add(hc, "tfswitch --mirror "+base+"/hashicorp/terraform --mirror-download "+base+"/hashicorp/terraform VERSION")
	add(tofu, "tfswitch --product opentofu --mirror "+base+"/opentofu/api.json --mirror-download "+base+"/opentofu VERSION")
	add(hc || tofu, "")
	add(hc, "# hc-install (Go library): releases.ExactVersion{ApiBaseURL: \""+base+"/hashicorp\"}", "",
		"# Terrakube: Helm values api.terraformReleasesUrl (or CustomTerraformReleasesUrl",
		"# on the API and the executor)",
		"terraformReleasesUrl: \""+base+"/hashicorp/terraform/index.json\"", "")
	add(hc || tofu, "# setup-terraform, setup-opentofu, install-opentofu.sh: no mirror setting (see docs/cli-releases.md)")
	return b.String()
}

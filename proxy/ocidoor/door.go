package ocidoor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/memo"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/ocistore"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// Providers is what the front door needs of the engine for provider
// repositories, behind the package policy: their version lists, and
// the OCI documents and blobs. *mirror/served.Packages implements it.
type Providers interface {
	// CheckOrigin fails for a provider of a host the engine does not
	// serve, or one the policy refuses whatever the version: asked only
	// where the door answers without another of these calls (the empty
	// config blob, referrers), as each of the others decides it itself.
	CheckOrigin(p addrs.Provider) error
	Versions(ctx context.Context, p addrs.Provider) (*records.VersionList, mirror.ListState, error)
	// IndexAnswer and ManifestAnswer return a document with what says
	// whether it is still the answer (nil: it may not be reused).
	IndexAnswer(ctx context.Context, p addrs.Provider, v versions.Version) (oci.Document, func() bool, error)
	ManifestAnswer(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, func() bool, error)
	Blob(ctx context.Context, p addrs.Provider, d digest.Digest) (*mirror.Archive, error)
}

// Config configures a Door.
type Config struct {
	// Names maps addresses to repository names. Required.
	Names oci.Names
	// Auth, when set, requires a token for everything under /v2/ but
	// the token endpoint. Default: anonymous.
	Auth *proxy.Auth
	// MirrorURL is the mirror's base URL for a request, as clients reach
	// it, whose host the token endpoint's realm names:
	// proxy.Server.MirrorURL, the public URL in force (a reload changes
	// it) or else the request's. Default: the Host of each request.
	MirrorURL func(r *http.Request) string
	// Logger receives errors, once each. Default: discard.
	Logger *slog.Logger
	// Modules, when set, serves module repositories (modules.go).
	// Default: they answer NAME_UNKNOWN.
	Modules Modules
}

// Door serves the OCI distribution API's pull side under /v2/.
type Door struct {
	cfg       Config
	providers Providers
	names     *memo.Memo[string, oci.Repository] // repository names parsed, so that a warm request parses none
	refs      *memo.Memo[string, manifestRef]    // manifest request paths parsed and answered
	hot       hotManifests                       // manifest answers by request path, while they hold
	failures  *proxy.Failures
}

// The layers in front of the door answer its requests in its format.
var _ proxy.Door = (*Door)(nil)

// New returns a Door answering from providers.
func New(cfg Config, providers Providers) (*Door, error) {
	if providers == nil {
		return nil, errors.New("ocidoor: the providers are required")
	}
	if cfg.Names.ProviderPrefix() == "" {
		return nil, errors.New("ocidoor: the repository names are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Door{cfg: cfg, providers: providers, names: memo.New[string, oci.Repository](4096),
		refs: memo.New[string, manifestRef](4096), failures: proxy.NewFailures()}, nil
}

var apiVersion = []string{"registry/2.0"}

// Limits on requests.
const (
	maxPathLen = 2048
	maxTagPage = 1000 // tags in one page of the tag list
)

// ServeHTTP serves /v2 and everything under /v2/.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if r.URL.RawPath != "" {
		// Escapes the default encoding would not make: read as sent, so
		// that they are refused below. (Without RawPath, the path as sent
		// is Path encoded, and only paths of names with nothing to encode
		// are answered, so Path is the path as sent wherever it matters.)
		path = r.URL.EscapedPath()
	}
	if len(path) > maxPathLen {
		d.fail(w, r, codeNameInvalid, http.StatusBadRequest, errors.New("path too long"))
		return
	}
	rest, _ := strings.CutPrefix(strings.TrimPrefix(path, "/v2"), "/")
	if rest == "" {
		// The version check clients make, answered or challenged.
		w.Header()["Docker-Distribution-Api-Version"] = apiVersion
	}
	if rest == "token" {
		d.token(w, r)
		return
	}
	if !d.authorized(w, r) {
		return
	}
	if d.cfg.Auth != nil {
		w = &privateWriter{ResponseWriter: w}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		_, _, route := oci.SplitPath(rest)
		allowed(w, route)
		d.fail(w, r, codeUnsupported, http.StatusMethodNotAllowed, errors.New("this registry is read-only: pushes and deletes are not supported"))
		return
	}
	if rest == "" {
		// The probe says whether credentials are needed: never reused
		// without asking, as it changes once client authentication is
		// turned on (with it, privateWriter keeps it unstored).
		w.Header()["Cache-Control"] = noCache
		writeJSON(w, r, http.StatusOK, "application/json", []byte("{}"))
		return
	}
	// A kept answer's host was served when it was made, and the hosts a
	// mirror serves only grow while it runs (the allowed origins are not
	// reloaded; imported hosts are only added), so it is served still.
	if a, ok := d.hot.get(path); ok && a.holds() {
		a.write(w, r, d.AnswerError)
		return
	}
	// A manifest request parsed before is answered at once: the call
	// serveManifest makes decides whether its provider is served now.
	if m, _, ok := d.refs.Get(path); ok {
		d.serveManifest(w, r, m)
		return
	}
	if strings.ContainsAny(rest, "%?#") {
		d.fail(w, r, codeNameUnknown, http.StatusNotFound, errors.New("repository names are lowercase letters, digits and separators"))
		return
	}
	name, ref, route := oci.SplitPath(rest)
	if d.serveModule(w, r, name, ref, route) {
		return
	}
	switch route {
	case oci.RouteTags:
		d.tags(w, r, name)
	case oci.RouteManifests:
		d.manifest(w, r, name, ref)
	case oci.RouteBlobs:
		d.blob(w, r, name, ref)
	case oci.RouteReferrers:
		d.referrers(w, r, name, ref)
	case oci.RouteUploads:
		allowed(w, route)
		d.fail(w, r, codeUnsupported, http.StatusMethodNotAllowed, errors.New("this registry is read-only: pushes are not supported"))
	default:
		d.fail(w, r, codeNameUnknown, http.StatusNotFound, errors.New("not an OCI distribution API path"))
	}
}

// allowed sets the Allow header of a 405 answer on a path of route (as
// the request's one oci.SplitPath read it), as RFC 9110 requires: GET
// and HEAD, but nothing on an upload's path, which a read-only registry
// has no method for.
func allowed(w http.ResponseWriter, route string) {
	allow := []string{"GET, HEAD"}
	if route == oci.RouteUploads {
		allow = []string{""}
	}
	w.Header()["Allow"] = allow
}

// provider parses a repository name of a provider; on an error it
// answers NAME_UNKNOWN. Whether the provider's host is served and the
// policy lets it through, the call the request makes of the providers
// decides (served, for the calls that make none).
func (d *Door) provider(w http.ResponseWriter, r *http.Request, name string) (addrs.Provider, bool) {
	repo, _, ok := d.names.Get(name)
	var err error
	if !ok {
		gen := d.names.Generation()
		if repo, err = d.cfg.Names.Parse(name); err == nil {
			d.names.Put(name, gen, repo)
		}
	}
	if err == nil && repo.Kind != oci.KindProvider {
		err = fmt.Errorf("%q: module repositories are not served here", name)
	}
	if err != nil {
		d.fail(w, r, codeNameUnknown, http.StatusNotFound, err)
		return addrs.Provider{}, false
	}
	return repo.Provider, true
}

// served answers NAME_UNKNOWN and returns false when refused, the error
// of the policy layer's check of a repository's package (a provider's
// CheckOrigin, a module's CheckModuleOrigin: a host the engine does not
// serve, or an address the policy refuses whatever the version), for an
// answer that asks the packages nothing else.
func (d *Door) served(w http.ResponseWriter, r *http.Request, refused error) bool {
	if refused != nil {
		d.fail(w, r, codeNameUnknown, http.StatusNotFound, refused)
		return false
	}
	return true
}

// tagList is the tag list answer.
type tagList struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

// tags serves NAME/tags/list: a tag per version of the origin's list (as
// the network mirror's index.json), in lexical order, paged by n and last.
func (d *Door) tags(w http.ResponseWriter, r *http.Request, name string) {
	p, ok := d.provider(w, r, name)
	if !ok {
		return
	}
	n, last, ok := d.tagPage(w, r)
	if !ok {
		return
	}
	list, st, err := d.providers.Versions(r.Context(), p)
	if err != nil {
		d.failEngine(w, r, codeNameUnknown, err)
		return
	}
	all := make([]string, 0, len(list.Versions))
	for _, e := range list.Versions {
		if tag, ok := oci.Tag(e.Version); ok {
			all = append(all, tag)
		}
	}
	writeTagPage(w, r, name, all, n, last, st.Stale)
}

// tagPage reads a tag list request's n (-1 when not given) and last; on
// an error it answers PAGINATION_NUMBER_INVALID. A count too large for an
// int asks for more than a page holds, as any count over maxTagPage does
// (writeTagPage): a page.
func (d *Door) tagPage(w http.ResponseWriter, r *http.Request) (n int, last string, ok bool) {
	q := r.URL.Query()
	n = -1
	if s := q.Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(s, "-") {
			v, err = maxTagPage, nil
		}
		if err != nil || v < 0 {
			d.fail(w, r, codePaginationInvalid, http.StatusBadRequest, fmt.Errorf("n %.20q: want a count", s))
			return 0, "", false
		}
		n = v
	}
	return n, q.Get("last"), true
}

// writeTagPage answers the page of the tags all that n and last ask for,
// in lexical order, with a Link to the next page when there is one.
// stale says the version list was served because the origin could not
// refresh it: the answer is marked so (proxy.MarkStale) and a cache in
// front must revalidate it, as every door's stale version list.
func writeTagPage(w http.ResponseWriter, r *http.Request, name string, all []string, n int, last string, stale bool) {
	slices.Sort(all)
	all = slices.Compact(all)
	start, _ := slices.BinarySearch(all, last)
	if last != "" && start < len(all) && all[start] == last {
		start++
	}
	page := all[start:]
	if n < 0 || n > maxTagPage {
		n = maxTagPage // none asked, or more than a page holds
	}
	if len(page) > n {
		page = page[:n]
		if len(page) > 0 {
			next := url.Values{"n": {strconv.Itoa(len(page))}, "last": {page[len(page)-1]}}
			w.Header().Set("Link", fmt.Sprintf(`</v2/%s/tags/list?%s>; rel="next"`, name, next.Encode()))
		}
	}
	body, _ := json.Marshal(tagList{Name: name, Tags: page})
	// The versions the policy lets through, reusable by a cache in front
	// no longer than the answers naming them by digest (byDigest): a deny
	// on a reload takes a version out of a CDN's copy too.
	w.Header()["Cache-Control"] = byDigest
	if stale {
		proxy.MarkStale(w, true)
		w.Header()["Cache-Control"] = noCache
	}
	writeJSON(w, r, http.StatusOK, "application/json", body)
}

// manifestRef is a parsed manifest request: a provider and a version
// (by tag) or a digest.
type manifestRef struct {
	p     addrs.Provider
	byTag bool
	v     versions.Version
	d     digest.Digest
}

// manifest serves NAME/manifests/REF: by tag, the version's image index;
// by digest, any document handed out for the repository.
func (d *Door) manifest(w http.ResponseWriter, r *http.Request, name, ref string) {
	gen := d.refs.Generation()
	p, ok := d.provider(w, r, name)
	if !ok {
		return
	}
	m := manifestRef{p: p}
	if strings.Contains(ref, ":") {
		dg, err := digest.Parse(ref)
		if err != nil {
			d.fail(w, r, codeDigestInvalid, http.StatusBadRequest, err)
			return
		}
		m.d = dg
	} else {
		version, ok := oci.ParseTag(ref)
		var err error
		if ok {
			m.v, err = addrs.ParseSemver(version)
		}
		if !ok || err != nil {
			d.fail(w, r, codeManifestUnknown, http.StatusNotFound, fmt.Errorf("tag %.140q names no version", ref))
			return
		}
		m.byTag = true
	}
	if d.serveManifest(w, r, m) {
		d.refs.Put(r.URL.EscapedPath(), gen, m)
	}
}

// serveManifest answers a parsed manifest request; it reports whether
// the answer was a document. A document that the engine says it may reuse
// is kept as the answer to the request's path (see hotManifest).
func (d *Door) serveManifest(w http.ResponseWriter, r *http.Request, m manifestRef) bool {
	var doc oci.Document
	var holds func() bool
	var err error
	cacheControl := byDigest
	if m.byTag {
		doc, holds, err = d.providers.IndexAnswer(r.Context(), m.p, m.v)
		cacheControl = noCache
	} else {
		doc, holds, err = d.providers.ManifestAnswer(r.Context(), m.p, m.d)
	}
	if err != nil {
		d.failEngine(w, r, codeManifestUnknown, err)
		return false
	}
	a := newHotManifest(m.p, doc, cacheControl, holds)
	if holds != nil {
		d.hot.put(r.URL.EscapedPath(), a)
	}
	a.write(w, r, d.AnswerError)
	return true
}

// hotManifest is a manifest answer kept by request path, with its
// headers made once, while holds says the engine would answer the same
// (its package answer's stamp: a new policy, a version list refreshed, a
// tag moved, anything the engine writes end it), so that a warm manifest
// is a map lookup, the stamp's check and a write, as the network
// mirror's warm documents are.
type hotManifest struct {
	p     addrs.Provider // whose origin must still be served
	holds func() bool
	body  []byte
	// headers, each set whole
	contentType, contentLength, dcd, etag, cacheControl []string
}

// hotManifests are the manifest answers kept, by escaped request path:
// read under a shared lock (a warm request takes no exclusive one),
// bounded by forgetting them all when full.
type hotManifests struct {
	mu sync.RWMutex
	m  map[string]hotManifest
}

// maxHotManifests bounds the answers kept.
const maxHotManifests = 4096

func (k *hotManifests) get(path string) (hotManifest, bool) {
	k.mu.RLock()
	a, ok := k.m[path]
	k.mu.RUnlock()
	return a, ok
}

func (k *hotManifests) put(path string, a hotManifest) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.m[path]; !ok && (k.m == nil || len(k.m) >= maxHotManifests) {
		k.m = make(map[string]hotManifest)
	}
	k.m[path] = a
}

func newHotManifest(p addrs.Provider, doc oci.Document, cacheControl []string, holds func() bool) hotManifest {
	return hotManifest{p: p, holds: holds, body: doc.Bytes,
		contentType:   []string{doc.MediaType},
		contentLength: []string{strconv.Itoa(len(doc.Bytes))},
		dcd:           []string{doc.Digest.String()},
		etag:          []string{`"` + doc.Digest.String() + `"`},
		cacheControl:  cacheControl,
	}
}

// write sends the answer; a HEAD gets the headers only, a request whose
// If-None-Match names it 304 (conditional), one whose Range it cannot
// satisfy fail's 416.
func (a hotManifest) write(w http.ResponseWriter, r *http.Request, fail proxy.ErrorFunc) {
	h := w.Header()
	h["Cache-Control"] = a.cacheControl
	h["Docker-Content-Digest"] = a.dcd
	h["Etag"] = a.etag
	h["Content-Type"] = a.contentType
	h["X-Content-Type-Options"] = nosniff
	if conditional(r) {
		proxy.ServeCached(w, r, time.Time{}, bytes.NewReader(a.body), fail)
		return
	}
	h["Content-Length"] = a.contentLength
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(a.body)
	}
}

// Header values set on every answer of their kind.
var (
	noCache   = []string{"no-cache"}
	immutable = []string{"max-age=31536000, immutable"} // the empty config blob alone: it names no package
	// byDigest is what a manifest by digest or a blob of a version is
	// reusable for by a cache in front: proxy.PackageCacheControl, never
	// immutable, as the package policy may refuse the version on a
	// reload.
	byDigest = []string{proxy.PackageCacheControl}
)

// blob serves NAME/blobs/DIGEST: the empty config, or a platform's zip,
// streamed through the engine like the network mirror's archives.
func (d *Door) blob(w http.ResponseWriter, r *http.Request, name, ref string) {
	p, ok := d.provider(w, r, name)
	if !ok {
		return
	}
	dg, err := digest.Parse(ref)
	if err != nil {
		d.fail(w, r, codeDigestInvalid, http.StatusBadRequest, err)
		return
	}
	h := w.Header()
	if dg == oci.EmptyConfig().Digest {
		if !d.served(w, r, d.providers.CheckOrigin(p)) {
			return
		}
		h.Set("Docker-Content-Digest", dg.String())
		h.Set("ETag", `"`+dg.String()+`"`)
		h["Cache-Control"] = immutable
		writeTagged(w, r, oci.MediaTypeEmptyConfig, oci.EmptyConfigBlob(), d.AnswerError)
		return
	}
	a, err := d.providers.Blob(r.Context(), p, dg)
	if err != nil {
		d.failEngine(w, r, codeBlobUnknown, err)
		return
	}
	defer a.Close()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Docker-Content-Digest", dg.String())
	h.Set("ETag", `"`+dg.String()+`"`)
	h["Cache-Control"] = byDigest
	h.Set("X-Tfmirror-Cache", a.Source.String())
	if content := a.Content(); content != nil {
		proxy.ServeCached(w, r, a.ModTime, content, d.AnswerError)
		return
	}
	// The length sent is the bytes' own, never the index's: a cached
	// archive's (ServeContent, above), or the one its origin announced
	// for the download under way, which the download holds it to. One
	// whose origin announced none is sent without a length (chunked):
	// the index's size is what the origin stated before any download,
	// and a length the bytes do not have would break the response where
	// the client could take it for whole. The client checks the bytes
	// against its descriptor's size and digest, as the spec has it. A
	// HEAD waits for the bytes, read as a GET reads them (verified,
	// whatever tier they come from), and is told their length
	// (StreamArchive): the clients take a blob's size from HEAD.
	proxy.StreamArchive(w, r, a, func(w http.ResponseWriter, r *http.Request, err error) {
		d.failEngine(w, r, codeBlobUnknown, err)
	})
}

// referrers answers NAME/referrers/DIGEST: no artifact refers to another
// here, so an empty index.
func (d *Door) referrers(w http.ResponseWriter, r *http.Request, name, ref string) {
	p, ok := d.provider(w, r, name)
	if !ok || !d.served(w, r, d.providers.CheckOrigin(p)) {
		return
	}
	if _, err := digest.Parse(ref); err != nil {
		d.fail(w, r, codeDigestInvalid, http.StatusBadRequest, err)
		return
	}
	writeReferrers(w, r)
}

// emptyReferrers is the referrers answer: an empty index.
var emptyReferrers = []byte(`{"schemaVersion":2,"mediaType":"` + oci.MediaTypeIndex + `","manifests":[]}`)

// writeReferrers answers a referrers request of a repository served:
// the empty index, reusable by a cache in front as the answers by digest
// beside it are (byDigest), so that a deny on a reload reaches a cache's
// copy within the same time (with client authentication, privateWriter
// keeps it private and unstored).
func writeReferrers(w http.ResponseWriter, r *http.Request) {
	w.Header()["Cache-Control"] = byDigest
	writeJSON(w, r, http.StatusOK, oci.MediaTypeIndex, emptyReferrers)
}

// writeJSON sends body with its media type and length; a HEAD gets the
// headers only.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, mediaType string, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{mediaType}
	h["X-Content-Type-Options"] = nosniff
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// writeTagged is writeJSON (200) for a document answered with its ETag
// (set by the caller): it answers the preconditions on it, and Range
// (conditional), with proxy.ServeCached, a Range it cannot satisfy with
// fail.
func writeTagged(w http.ResponseWriter, r *http.Request, mediaType string, body []byte, fail proxy.ErrorFunc) {
	if !conditional(r) {
		writeJSON(w, r, http.StatusOK, mediaType, body)
		return
	}
	h := w.Header()
	h["Content-Type"] = []string{mediaType}
	h["X-Content-Type-Options"] = nosniff
	proxy.ServeCached(w, r, time.Time{}, bytes.NewReader(body), fail)
}

var nosniff = []string{"nosniff"}

// conditional reports whether r has a header that http.ServeContent acts
// on for a document answered with its ETag and no modification time: a
// precondition on the ETag (a cache in front revalidating an index of a
// tag, which it may not reuse unasked, with If-None-Match), or Range.
// Such a request is answered by proxy.ServeCached, as the network
// mirror's documents are: 304 to an If-None-Match that names the
// document, 412 to an If-Match that does not.
func conditional(r *http.Request) bool {
	h := r.Header
	return len(h["If-None-Match"]) > 0 || len(h["If-Match"]) > 0 || len(h["Range"]) > 0
}

// The OCI error codes answered.
const (
	codeNameUnknown       = "NAME_UNKNOWN"
	codeNameInvalid       = "NAME_INVALID"
	codeManifestUnknown   = "MANIFEST_UNKNOWN"
	codeBlobUnknown       = "BLOB_UNKNOWN"
	codeDigestInvalid     = "DIGEST_INVALID"
	codeSizeInvalid       = "SIZE_INVALID"
	codePaginationInvalid = "PAGINATION_NUMBER_INVALID"
	codeUnsupported       = "UNSUPPORTED"
	codeUnauthorized      = "UNAUTHORIZED"
	codeDenied            = "DENIED"
	codeUnavailable       = "UNAVAILABLE"
	codeTooManyRequests   = "TOOMANYREQUESTS"
	codeUnknown           = "UNKNOWN"
)

type errorEnvelope struct {
	Errors []errorEntry `json:"errors"`
}

type errorEntry struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Detail  any    `json:"detail"`
}

// failEngine answers an engine error: what the engine calls not found
// with notFound (NAME_UNKNOWN for a repository's versions,
// MANIFEST_UNKNOWN or BLOB_UNKNOWN for what a version lacks; a document
// withdrawn for good, 410, is MANIFEST_UNKNOWN too), a refusal
// (a version the package policy holds back, 451) with DENIED, anything
// else with its status from httperr.Status, the one table.
func (d *Door) failEngine(w http.ResponseWriter, r *http.Request, notFound string, err error) {
	if r.Context().Err() != nil {
		err = httperr.Gone(r.Context(), err)
	}
	status := httperr.Status(err)
	code := codeUnknown
	switch {
	case status == http.StatusNotFound:
		code = notFound
		if !errors.Is(err, records.ErrVersionNotFound) && !errors.Is(err, records.ErrPlatformNotFound) && !errors.Is(err, ocistore.ErrDigestUnknown) {
			// Not something the repository lacks: the repository itself
			// (a provider the origin does not have).
			code = codeNameUnknown
		}
	case status == http.StatusGone:
		// A manifest withdrawn for good (made with a size its origin
		// stated wrongly): unknown, with the status that has OCI clients
		// show the message.
		code = notFound
	case status == http.StatusUnauthorized:
		code = codeUnauthorized
	case status == http.StatusUnavailableForLegalReasons || status == http.StatusForbidden:
		// The operator's package policy holds the version back, or the
		// mirror refuses what it could not verify: the spec's DENIED,
		// which OpenTofu does not take for "not here, try the next
		// source" as it takes NAME_UNKNOWN.
		code = codeDenied
	case status == http.StatusTooManyRequests:
		code = codeTooManyRequests
	case status == http.StatusServiceUnavailable:
		code = codeUnavailable
	case status == http.StatusRequestURITooLong:
		code = codeNameInvalid
	case status == http.StatusRequestedRangeNotSatisfiable:
		// A Range that names no byte of a blob or document
		// (proxy.ServeCached): the spec's codes have none for it
		// (RANGE_INVALID, the Docker registry API's, is not among them,
		// which a JSON error body must use); the length the client
		// took for the content's is not its length.
		code = codeSizeInvalid
	case status == http.StatusRequestEntityTooLarge:
		// A GET's body longer than any door reads (proxy.readBody):
		// a length not taken.
		code = codeSizeInvalid
	}
	httperr.SetRetryAfter(w.Header(), err)
	d.fail(w, r, code, status, err)
}

// AnswerError answers err, with which a layer in front of the door
// refused one of its requests (a path too long, a client address over
// the limit of failed attempts: proxy.Door) or proxy.ServeCached
// a Range (its proxy.ErrorFunc), in the door's error envelope, as
// failEngine answers the engine's errors.
func (d *Door) AnswerError(w http.ResponseWriter, r *http.Request, err error) {
	d.failEngine(w, r, codeUnknown, err)
}

// fail answers with the OCI error envelope and logs the error once, at a
// level that says whose fault it is (as the other front doors do).
func (d *Door) fail(w http.ResponseWriter, r *http.Request, code string, status int, err error) {
	msg := err.Error()
	if status == http.StatusInternalServerError {
		msg = "internal error"
	}
	h := w.Header()
	h.Del("ETag")
	h.Del("Docker-Content-Digest")
	h.Set("Cache-Control", "no-store")
	if status == httperr.StatusClientClosedRequest {
		// Told nothing, but counted and logged with its own code, not
		// as a 200 that delivered nothing.
		w.WriteHeader(status)
	} else {
		body, _ := json.Marshal(errorEnvelope{Errors: []errorEntry{{Code: code, Message: msg}}})
		writeJSON(w, r, status, "application/json", body)
	}
	d.failures.Log(d.cfg.Logger, w, r, status, "path", proxy.LoggedPath(r), "status", status, "code", code, "error", err)
}

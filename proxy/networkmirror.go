package proxy

// The provider network mirror protocol:
//
//	GET /HOST/NAMESPACE/TYPE/index.json
//	GET /HOST/NAMESPACE/TYPE/VERSION.json
//	GET /HOST/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip
//
// An archive request reads top to bottom here: routes, handleFile,
// serveArchive, StreamArchive.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/gorilla/mux"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// networkMirror serves the provider network mirror protocol.
type networkMirror struct {
	providerRoutes
	hot *hotDocs // where fresh documents are kept to send again; nil keeps none
}

// routes adds the network mirror protocol's routes to r.
func (n *networkMirror) routes(r *mux.Router) {
	protocol := r.Methods(http.MethodGet, http.MethodHead).Subrouter()
	protocol.Use(n.authorize(mirrorAuth))
	protocol.HandleFunc("/{host}/{namespace}/{type}/index.json", n.handleIndex)
	protocol.HandleFunc("/{host}/{namespace}/{type}/{file}", n.handleFile)
}

// mirrorAuth guards the provider network mirror protocol: index.json and
// VERSION.json need a bearer token, archives a signature.
var mirrorAuth = routeAuth{
	signed: func(r *http.Request) (addrs.Provider, string, bool, error) {
		vars := mux.Vars(r)
		if !strings.HasSuffix(vars["file"], ".zip") {
			return addrs.Provider{}, "", false, nil
		}
		p, err := parseProvider(vars["host"], vars["namespace"], vars["type"])
		if err != nil {
			return p, "", false, err
		}
		file, err := unescapePart("file name", vars["file"], 2*maxVersionLen+maxPartLen)
		return p, file, err == nil, err
	},
	badSignature: errBadArchiveSignature,
	unauthorized: func(*http.Request) error { return httperr.ErrUnauthorized },
}

// errBadArchiveSignature is ErrBadSignature for a network mirror
// archive, whose signed URL VERSION.json gives.
var errBadArchiveSignature = fmt.Errorf("%w: fetch VERSION.json again", httperr.ErrBadSignature)

// handleFile serves VERSION.json and archives, which share one path shape.
func (n *networkMirror) handleFile(w http.ResponseWriter, r *http.Request) {
	p, err := n.provider(r)
	if err != nil {
		n.fail(w, r, err)
		return
	}
	file, err := unescapePart("file name", mux.Vars(r)["file"], 2*maxVersionLen+maxPartLen)
	if err != nil {
		n.fail(w, r, err)
		return
	}
	switch {
	case strings.HasSuffix(file, ".json"):
		v, err := parseVersion(strings.TrimSuffix(file, ".json"))
		if err != nil {
			n.fail(w, r, err)
			return
		}
		n.serveVersion(w, r, p, v)
	case strings.HasSuffix(file, ".zip"):
		v, pl, err := parseArchiveName(p.Type, file)
		if err != nil {
			n.fail(w, r, err)
			return
		}
		n.serveArchive(w, r, p, v, pl)
	default:
		n.fail(w, r, &httperr.RequestError{Status: http.StatusNotFound, Msg: fmt.Sprintf("unknown file %q (want VERSION.json or an archive)", file)})
	}
}

func (n *networkMirror) serveArchive(w http.ResponseWriter, r *http.Request, p addrs.Provider, v versions.Version, pl addrs.Platform) {
	a, err := n.engine.OpenArchive(r.Context(), p, v, pl)
	if err != nil {
		n.fail(w, r, err)
		return
	}
	defer a.Close()
	n.setArchiveHeaders(w, a.SHA256, a.Source.String())
	if content := a.Content(); content != nil {
		// Cached: with Range, If-None-Match and If-Modified-Since support.
		ServeCached(w, r, a.ModTime, content, n.fail)
		return
	}
	StreamArchive(w, r, a, n.fail)
}

func (n *networkMirror) setArchiveHeaders(w http.ResponseWriter, sha, cacheState string) {
	h := w.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("ETag", `"`+sha+`"`)
	h["Cache-Control"] = n.cacheControl(false)
	h.Set("X-Tfmirror-Cache", cacheState)
}

// copyBufferSize is the unit in which archive bytes being downloaded move
// to clients.
const copyBufferSize = 256 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// ServeCached sends a cached archive or package (content), or a document
// asked for with a precondition or Range, with http.ServeContent, for
// every front door: with Range, If-None-Match and If-Modified-Since
// support. A Range it cannot satisfy is answered 416 by fail, the door's
// own error answer (refuseRange), not in net/http's text/plain, and a
// precondition that does not hold 412 (refusePrecondition), not with
// no body under the content's Content-Type; neither says X-Tfmirror-Cache
// (a download served from the cache, or not). A read
// that fails once the status is decided (the cached copy found damaged
// where it is stored) breaks the response off, as StreamArchive does a
// download that fails: its status goes out first, and the handler panics
// with http.ErrAbortHandler, so that the access log and
// tfmirror_http_responses_aborted_total count it as aborted rather than
// as a download served whole. (http.ServeContent itself ends a body cut
// short by a read error as if it were whole.)
func ServeCached(w http.ResponseWriter, r *http.Request, modTime time.Time, content io.ReadSeeker, fail ErrorFunc) {
	cr := &contentReader{ReadSeeker: content}
	held := &refusal{ResponseWriter: w}
	http.ServeContent(noStoreErrors{held}, r, "", modTime, cr)
	if held.code != 0 {
		// Refused, it serves nothing from the cache: neither the access
		// log nor the origin's row on the status page counts it a hit.
		w.Header().Del("X-Tfmirror-Cache")
	}
	switch held.code {
	case http.StatusRequestedRangeNotSatisfiable:
		refuseRange(w, r, cr, fail)
		return
	case http.StatusPreconditionFailed:
		refusePrecondition(w, r, fail)
		return
	}
	if cr.err == nil {
		return
	}
	_ = http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler)
}

// contentReader keeps the first error other than io.EOF its Read met,
// and the first its Seek met.
type contentReader struct {
	io.ReadSeeker
	err     error
	seekErr error
}

func (c *contentReader) Read(p []byte) (int, error) {
	n, err := c.ReadSeeker.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && c.err == nil {
		c.err = err
	}
	return n, err
}

func (c *contentReader) Seek(offset int64, whence int) (int64, error) {
	n, err := c.ReadSeeker.Seek(offset, whence)
	if err != nil && c.seekErr == nil {
		c.seekErr = err
	}
	return n, err
}

// StreamArchive sends an archive while it is being downloaded (for every
// front door that serves archives). Bytes reach
// the client as the engine releases them; if the download fails the
// response is aborted, so no client ever holds a complete unverified
// archive. A request whose If-None-Match names the ETag the door set (the
// archive's digest, known before its bytes) is answered 304, as for a
// cached archive: a cache in front revalidating its copy is not sent the
// archive again; the download goes on for the cache. One whose If-Match
// does not name it is answered 412 by fail (refusePrecondition), as a
// cached archive's is, not sent the archive it did not ask for. A HEAD, which has no
// body to break, waits for the download's outcome: 200 with the
// archive's length once it is verified, else fail's answer to the error,
// so that no HEAD is told 200 for an archive refused.
func StreamArchive(w http.ResponseWriter, r *http.Request, a *mirror.Archive, fail ErrorFunc) {
	if im := r.Header["If-Match"]; len(im) > 0 && !etagMatched(strings.Join(im, ","), w.Header().Get("Etag")) {
		refusePrecondition(w, r, fail)
		return
	}
	if inm := r.Header["If-None-Match"]; len(inm) > 0 && etagListed(strings.Join(inm, ","), w.Header().Get("Etag")) {
		h := w.Header()
		delete(h, "Content-Type")
		delete(h, "Content-Length")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	size := a.Size
	if r.Method == http.MethodHead {
		n, err := io.Copy(io.Discard, a)
		if err != nil {
			w.Header().Del("Etag") // an error answer names no archive
			fail(w, r, err)
			return
		}
		size = n
	}
	if size >= 0 {
		w.Header().Set("Content-Length", fmt.Sprint(size))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(w)
	// The client sees the status at once, not with the first released
	// bytes (the held-back tail may be all of a small archive): so that a
	// download failing later breaks a response the client has, which it
	// does not retry, rather than a connection that answered nothing,
	// which clients retry as a new request (and a new origin download).
	if err := rc.Flush(); err != nil {
		return
	}
	bufp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bufp)
	buf := *bufp
	for {
		n, err := a.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return // client went away; the download goes on for the others
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return
		case httperr.CutOff(r.Context()):
			// The mirror's shutdown, not the client, ended the request:
			// returning would end a body of no stated length cleanly,
			// and the client would take what it got for the archive.
			panic(http.ErrAbortHandler)
		case r.Context().Err() != nil:
			// The client went away, or closed only its sending side
			// (a half-close, which ends the request's context too) and
			// still reads: a body of no stated length that ended
			// cleanly would be taken for the archive. (One short of its
			// Content-Length breaks the connection anyway.)
			if a.Size < 0 {
				panic(http.ErrAbortHandler)
			}
			return
		default:
			// Headers are gone; only a broken connection tells the
			// client that the body is not to be trusted.
			panic(http.ErrAbortHandler)
		}
	}
}

// etagListed reports whether the If-None-Match value list names etag (a
// strong one), by the weak comparison the header takes; "*" names any.
func etagListed(list, etag string) bool {
	if etag == "" {
		return false
	}
	for t := range strings.SplitSeq(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// etagMatched reports whether the If-Match value list names etag (a
// strong one), by the strong comparison the header takes: a weak tag
// names nothing; "*" names any.
func etagMatched(list, etag string) bool {
	if etag == "" {
		return false
	}
	for t := range strings.SplitSeq(list, ",") {
		if t = strings.TrimSpace(t); t == "*" || t == etag {
			return true
		}
	}
	return false
}

func (n *networkMirror) handleIndex(w http.ResponseWriter, r *http.Request) {
	p, list, st, ok := n.versions(w, r)
	if !ok {
		return
	}
	doc := n.docs.index(p, list)
	n.hot.keep(r, doc, st.Stale, st.Stamp)
	writeDocument(w, r, doc, n.cacheControl(st.Stale), n.fail)
}

func (n *networkMirror) serveVersion(w http.ResponseWriter, r *http.Request, p addrs.Provider, v versions.Version) {
	pkg, err := n.engine.Package(r.Context(), p, v, nil)
	if err != nil {
		n.fail(w, r, err)
		return
	}
	MarkStale(w, pkg.Stale)
	var doc document
	if n.auth == nil {
		doc = n.docs.version(p, v, pkg)
		n.hot.keep(r, doc, pkg.Stale, pkg.Stamp)
	} else {
		// Signatures differ per request: render afresh.
		vd := newVersionDocument(p.Type, v, pkg.Archives)
		n.signArchiveURLs(p, &vd)
		doc = newDocument(renderJSON(vd))
	}
	writeDocument(w, r, doc, n.cacheControl(pkg.Stale), n.fail)
}

// signArchiveURLs appends a signature to every archive URL of doc.
func (n *networkMirror) signArchiveURLs(p addrs.Provider, doc *versionDocument) {
	if n.auth == nil {
		return
	}
	for name, a := range doc.Archives {
		a.URL += "?" + n.auth.sign(p, a.URL)
		doc.Archives[name] = a
	}
}

// providerRoutes is what the network mirror and the provider registry
// share: the engine's providers and the documents rendered from them.
type providerRoutes struct {
	*responder
	engine ProviderEngine
	docs   *renderMemo // rendered index.json, VERSION.json and registry versions answers
}

// provider parses the request's provider address. Whether its host is
// served and the policy lets it through, the engine behind the policy
// (mirror/served) decides, once, in the call the request makes of it.
func (pr *providerRoutes) provider(r *http.Request) (addrs.Provider, error) {
	vars := mux.Vars(r)
	return parseProvider(vars["host"], vars["namespace"], vars["type"])
}

// versions reads the version list of the request's provider, for the
// mirror's index.json and the registry's versions answer. On an error it
// answers the request and returns ok false.
func (pr *providerRoutes) versions(w http.ResponseWriter, r *http.Request) (p addrs.Provider, list *records.VersionList, st mirror.ListState, ok bool) {
	p, err := pr.provider(r)
	if err == nil {
		list, st, err = pr.engine.Versions(r.Context(), p)
	}
	if err != nil {
		pr.fail(w, r, err)
		return p, nil, st, false
	}
	MarkStale(w, st.Stale)
	return p, list, st, true
}

package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// What HTTP caches (a CDN, nginx, Varnish, a corporate proxy) in front of
// the mirror may do with its answers. Every successful mirror response
// carries a strong ETag, so a cache revalidates with If-None-Match and gets
// 304 Not Modified when nothing changed.

const (
	// documentMaxAge bounds how long a shared cache may reuse index.json
	// and VERSION.json. A version list changes when the origin publishes;
	// VERSION.json gains h1 hashes as its archives get cached.
	//
	// It bounds archives too. An archive's bytes are fixed by the
	// origin's signed checksum, but whether they may be served is not:
	// the package policy may refuse the version on any reload (a
	// deny_version for a compromised release). An archive is therefore
	// reusable by a cache in front for as long as the documents that list
	// it, never a year and never immutable: a refusal reaches the cache
	// within that time, when it revalidates (with If-None-Match: a 304
	// costs no archive bytes while the version is served).
	documentMaxAge = time.Minute

	// PackageCacheControl is the Cache-Control of the other front doors'
	// successful answers that carry a version's bytes or name it by
	// digest (the OCI door's manifests by digest and blobs, the CLI
	// releases door's archives and signed files): reusable for
	// documentMaxAge (TestPackageCacheControl), never immutable, so that
	// a version the package policy refuses on a reload stops being served
	// through a cache in front within a minute, as the network mirror's
	// archives do. It is not public: those doors take client credentials
	// in the Authorization header, with which a shared cache reuses only
	// what is marked public.
	PackageCacheControl = "max-age=60"

	// staleCacheControl is sent with answers served from the cache because
	// the origin failed: a shared cache may keep them but must ask again
	// (cheaply, with If-None-Match) before reusing them.
	staleCacheControl = "no-cache"

	// errorCacheControl is sent with every error answer: errors are often
	// transient (an origin outage) and must not be replayed by caches.
	errorCacheControl = "no-store"
)

// cacheControl is the one place that decides the Cache-Control header of
// successful mirror responses, documents and archives alike (see
// documentMaxAge). stale says the answer was served from the cache
// because the origin could not be reached. The value is from headerValue:
// it may be put in a header map as it is.
func (rs *responder) cacheControl(stale bool) []string {
	if stale {
		return staleCacheControlValue
	}
	return rs.documentCacheControl
}

var staleCacheControlValue = headerValue(staleCacheControl)

// documentCacheControl is the Cache-Control of fresh answers (index.json,
// VERSION.json, archives): shared caches may reuse them for a minute, or for
// the version-list TTL if that is shorter.
func documentCacheControl(versionsTTL time.Duration) string {
	age := min(documentMaxAge, versionsTTL)
	return fmt.Sprintf("public, max-age=%d", int(age/time.Second))
}

// document is a rendered JSON answer (as made by renderJSON; nil body: an
// internal error) with its strong ETag and Content-Length, kept together
// (as header values ready to put in a header map) so that remembered
// documents are not hashed and formatted again on every request.
type document struct {
	body   []byte
	etag   []string
	length []string
}

func newDocument(body []byte) document {
	if body == nil {
		return document{}
	}
	sum := sha256.Sum256(body)
	return document{
		body:   body,
		etag:   headerValue(`"` + hex.EncodeToString(sum[:]) + `"`),
		length: headerValue(strconv.Itoa(len(body))),
	}
}

// headerValue is a header value to put in header maps as it is, saving a
// slice per response. Its capacity is its length, so that an Add to the
// header appends to a copy; nothing in net/http modifies a value in
// place (it clones the map when the header is written).
func headerValue(v string) []string { return []string{v}[:1:1] }

// Header values shared by every document.
var (
	jsonContentType   = headerValue("application/json")
	nosniff           = headerValue("nosniff")
	acceptRangesBytes = headerValue("bytes")
)

// writeDocument answers 200 with doc, the given Cache-Control (from
// headerValue) and doc's ETag; a request whose If-None-Match matches gets
// 304. HEAD and Range are handled as for any static file; fail answers a
// Range that cannot be satisfied (ServeCached).
func writeDocument(w http.ResponseWriter, r *http.Request, doc document, cacheControl []string, fail ErrorFunc) {
	writeFile(w, r, doc, jsonContentType, cacheControl, fail)
}

// writeFile is writeDocument for a body of any content type (from
// headerValue).
func writeFile(w http.ResponseWriter, r *http.Request, doc document, contentType, cacheControl []string, fail ErrorFunc) {
	if doc.body == nil {
		writeJSONBody(w, http.StatusInternalServerError, nil)
		return
	}
	h := w.Header()
	h["Content-Type"] = contentType
	h["X-Content-Type-Options"] = nosniff
	h["Cache-Control"] = cacheControl
	sendDocument(w, r, doc, fail)
}

// ServeDocument sends body, a document made for r, under a strong ETag of
// its bytes (their sha256), for a door whose documents carry no ETag of
// their own (the CLI releases door's version lists, listings and signed
// files): a request whose If-None-Match names it gets 304, the other
// preconditions and Range are answered as for a cached file
// (ServeCached, fail answering a Range the document cannot satisfy), a
// HEAD the headers of the GET. The caller sets Content-Type and
// Cache-Control; the answer says nosniff, as writeFile's do.
func ServeDocument(w http.ResponseWriter, r *http.Request, body []byte, fail ErrorFunc) {
	if body == nil {
		body = []byte{}
	}
	w.Header()["X-Content-Type-Options"] = nosniff
	sendDocument(w, r, newDocument(body), fail)
}

// sendDocument answers with doc (not nil) under its ETag, the rest of the
// headers set: writeFile and ServeDocument.
func sendDocument(w http.ResponseWriter, r *http.Request, doc document, fail ErrorFunc) {
	h := w.Header()
	h["Etag"] = doc.etag
	if conditional(r) {
		// A zero modification time: no Last-Modified, validation by ETag only.
		ServeCached(w, r, time.Time{}, bytes.NewReader(doc.body), fail)
		return
	}
	// What http.ServeContent answers to a request without preconditions
	// or Range, without its checks and copying.
	h["Accept-Ranges"] = acceptRangesBytes
	h["Content-Length"] = doc.length
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(doc.body)
	}
}

// conditional reports whether r has a header that http.ServeContent acts
// on for a document without a modification time: a precondition on the
// ETag, or Range.
func conditional(r *http.Request) bool {
	h := r.Header
	return len(h["If-None-Match"]) > 0 || len(h["If-Match"]) > 0 || len(h["Range"]) > 0
}

// noStoreErrors is the ResponseWriter that http.ServeContent writes
// through, for every front door: an error it answers itself with the
// headers of the file still set (412 to an If-Match or
// If-Unmodified-Since that fails; its 416 and others drop them) is
// answered as every error is, errorCacheControl and no validators, so
// that no cache keeps it, or takes it for the file.
type noStoreErrors struct{ http.ResponseWriter }

func (w noStoreErrors) WriteHeader(code int) {
	if code >= 400 {
		h := w.Header()
		h.Set("Cache-Control", errorCacheControl)
		h.Del("Etag")
		h.Del("Last-Modified")
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the writer within.
func (w noStoreErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

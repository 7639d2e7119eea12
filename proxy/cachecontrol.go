package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"
)

// What HTTP caches (a CDN, nginx, Varnish, a corporate proxy) in front of
// the mirror may do with its answers. Every successful mirror response
// carries a strong ETag, so a cache revalidates with If-None-Match and gets
// 304 Not Modified when nothing changed.

// responseKind names the mirror responses that have a caching policy.
type responseKind int

const (
	// kindIndex is HOST/NAMESPACE/TYPE/index.json, the version list.
	kindIndex responseKind = iota
	// kindVersion is HOST/NAMESPACE/TYPE/VERSION.json, the archive list.
	kindVersion
	// kindArchive is a provider archive.
	kindArchive
)

const (
	// documentMaxAge bounds how long a shared cache may reuse index.json
	// and VERSION.json. A version list changes when the origin publishes;
	// VERSION.json gains h1 hashes as its archives get cached.
	documentMaxAge = time.Minute

	// archiveCacheControl: an archive URL names one version and platform,
	// and its bytes are fixed by the origin's signed checksum.
	archiveCacheControl = "public, max-age=31536000, immutable"

	// staleCacheControl is sent with answers served from the cache because
	// the origin failed: a shared cache may keep them but must ask again
	// (cheaply, with If-None-Match) before reusing them.
	staleCacheControl = "no-cache"

	// errorCacheControl is sent with every error answer: errors are often
	// transient (an origin outage) and must not be replayed by caches.
	errorCacheControl = "no-store"
)

// cacheControl is the one place that decides the Cache-Control header of
// successful mirror responses. stale says the answer was served from the
// cache because the origin could not be reached.
func (s *Server) cacheControl(kind responseKind, stale bool) string {
	if stale {
		return staleCacheControl
	}
	switch kind {
	case kindArchive:
		return archiveCacheControl
	default:
		return s.documentCacheControl
	}
}

// documentCacheControl is the Cache-Control of fresh index.json and
// VERSION.json answers: shared caches may reuse them for a minute, or for
// the version-list TTL if that is shorter.
func documentCacheControl(versionsTTL time.Duration) string {
	age := min(documentMaxAge, versionsTTL)
	return fmt.Sprintf("public, max-age=%d", int(age/time.Second))
}

// document is a rendered JSON answer (as made by renderJSON; nil body: an
// internal error) with its strong ETag, kept together so that remembered
// documents are not hashed again on every request.
type document struct {
	body []byte
	etag string
}

func newDocument(body []byte) document {
	if body == nil {
		return document{}
	}
	sum := sha256.Sum256(body)
	return document{body: body, etag: `"` + hex.EncodeToString(sum[:]) + `"`}
}

// writeDocument answers 200 with doc, the given Cache-Control and doc's
// ETag; a request whose If-None-Match matches gets 304. HEAD and Range are
// handled as for any static file.
func writeDocument(w http.ResponseWriter, r *http.Request, doc document, cacheControl string) {
	writeFile(w, r, doc, "application/json", cacheControl)
}

// writeFile is writeDocument for a body of any content type.
func writeFile(w http.ResponseWriter, r *http.Request, doc document, contentType, cacheControl string) {
	if doc.body == nil {
		writeJSONBody(w, http.StatusInternalServerError, nil)
		return
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", cacheControl)
	h.Set("ETag", doc.etag)
	// A zero modification time: no Last-Modified, validation by ETag only.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(doc.body))
}

package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/mirror"
)

// copyBufferSize is the unit in which archive bytes being downloaded move
// to clients.
const copyBufferSize = 256 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

func (s *Server) serveVersion(w http.ResponseWriter, r *http.Request, p addrs.Provider, v versions.Version) {
	pkg, err := s.engine.Package(r.Context(), p, v, nil)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	markStale(w, pkg.Stale)
	var doc document
	if s.cfg.Auth == nil {
		doc = s.docs.version(p, v, pkg)
		s.keepHot(r, doc, pkg.Stale, pkg.Stamp)
	} else {
		// Signatures differ per request: render afresh.
		vd := newVersionDocument(p.Type, v, pkg.Archives)
		s.signArchiveURLs(p, &vd)
		doc = newDocument(renderJSON(vd))
	}
	writeDocument(w, r, doc, s.cacheControl(kindVersion, pkg.Stale))
}

func (s *Server) serveArchive(w http.ResponseWriter, r *http.Request, p addrs.Provider, v versions.Version, pl addrs.Platform) {
	a, err := s.engine.OpenArchive(r.Context(), p, v, pl)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer a.Close()
	s.setArchiveHeaders(w, a.SHA256, a.Source.String())
	if content := a.Content(); content != nil {
		// Cached: with Range, If-None-Match and If-Modified-Since support.
		http.ServeContent(w, r, "", a.ModTime, content)
		return
	}
	s.streamArchive(w, r, a)
}

func (s *Server) setArchiveHeaders(w http.ResponseWriter, sha, cacheState string) {
	h := w.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("ETag", `"`+sha+`"`)
	h["Cache-Control"] = s.cacheControl(kindArchive, false)
	h.Set("X-Tfmirror-Cache", cacheState)
}

// streamArchive sends an archive while it is being downloaded. Bytes reach
// the client as the engine releases them; if the download fails the
// response is aborted, so no client ever holds a complete unverified
// archive.
func (s *Server) streamArchive(w http.ResponseWriter, r *http.Request, a *mirror.Archive) {
	if a.Size >= 0 {
		w.Header().Set("Content-Length", fmt.Sprint(a.Size))
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
		case r.Context().Err() != nil:
			return // client went away
		default:
			// Headers are gone; only a broken connection tells the
			// client that the body is not to be trusted.
			panic(http.ErrAbortHandler)
		}
	}
}

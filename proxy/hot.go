package proxy

import (
	"net/http"
	"sync"

	"github.com/tfmirror/tfmirror/mirror"
)

// hotDocs remembers, by request path, the index.json and VERSION.json
// documents last sent with the engine's stamp of the answer they were
// made from, so that a warm request is answered with a map lookup, a
// check of the stamp (two counters and the clock) and a write: no route
// matching, path parsing, engine lookups or rendering. Only fresh answers
// are kept, and none with client authentication (the URLs in VERSION.json
// are signed per request, and the token checked). Bounded like renderMemo,
// whose documents it shares.
type hotDocs struct {
	mu   sync.RWMutex
	docs map[string]hotDoc // by escaped request path
}

type hotDoc struct {
	doc   document
	stamp mirror.Stamp
}

func newHotDocs() *hotDocs { return &hotDocs{docs: make(map[string]hotDoc)} }

// keepHot remembers doc as the answer to r's path while stamp holds,
// unless the answer was stale (the origin must be tried again) or must
// not be reused.
func (s *Server) keepHot(r *http.Request, doc document, stale bool, stamp mirror.Stamp) {
	if stale || stamp.IsZero() || doc.body == nil || s.cfg.Auth != nil {
		return
	}
	key := r.URL.EscapedPath()
	s.hot.mu.Lock()
	remember(s.hot.docs, key, hotDoc{doc: doc, stamp: stamp})
	s.hot.mu.Unlock()
}

// serveHot answers r with the document remembered for its path if the
// engine says it still holds, and reports whether it did.
func (s *Server) serveHot(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead || s.cfg.Auth != nil {
		return false
	}
	s.hot.mu.RLock()
	d, ok := s.hot.docs[r.URL.EscapedPath()]
	s.hot.mu.RUnlock()
	if !ok || !s.engine.Reuse(d.stamp) {
		return false
	}
	writeDocument(w, r, d.doc, s.documentCacheControl)
	return true
}

package proxy

import (
	"net/http"
	"sync"

	"github.com/tfmirror/tfmirror/v2/mirror"
)

// hotDocs remembers, by request path, the index.json and VERSION.json
// documents last sent with the engine's stamp of the answer they were
// made from, so that a warm request is answered with a map lookup, a
// check of the stamp (two counters and the clock) and a write: no route
// matching, path parsing, engine lookups or rendering. Only fresh answers
// are kept, and none with client authentication (the URLs in VERSION.json
// are signed per request, and the token checked). Bounded like renderMemo,
// whose documents it shares. One document is kept under one path, the
// one its clients send (keep).
//
// A nil *hotDocs keeps and serves nothing.
type hotDocs struct {
	engine       reuser    // says whether a kept answer still holds
	cacheControl []string  // of the fresh documents kept
	fail         ErrorFunc // answers a Range the document cannot satisfy
	mu           sync.RWMutex
	docs         map[string]hotDoc // by escaped request path
}

// reuser is what hotDocs needs from the engine (see Engine.Reuse).
type reuser interface{ Reuse(st mirror.Stamp) bool }

type hotDoc struct {
	doc   document
	stamp mirror.Stamp
}

func newHotDocs(engine reuser, cacheControl []string, fail ErrorFunc) *hotDocs {
	return &hotDocs{engine: engine, cacheControl: cacheControl, fail: fail, docs: make(map[string]hotDoc)}
}

// keep remembers doc as the answer to r's path while stamp holds,
// unless the answer was stale (the origin must be tried again) or must
// not be reused, or r's path is spelt with percent-encodings it does not
// need (r.URL.RawPath set: hashi%63orp for hashicorp), which the clients
// never send: such a path is answered as the plain one is and not kept,
// where keeping it would let a client cycling through the spellings of
// one provider push the others' documents out of the bounded set.
func (h *hotDocs) keep(r *http.Request, doc document, stale bool, stamp mirror.Stamp) {
	if h == nil || stale || stamp.IsZero() || doc.body == nil || r.URL.RawPath != "" {
		return
	}
	key := r.URL.EscapedPath()
	h.mu.Lock()
	remember(h.docs, key, hotDoc{doc: doc, stamp: stamp})
	h.mu.Unlock()
}

// serve answers r with the document remembered for its path if the
// engine says it still holds, and reports whether it did.
func (h *hotDocs) serve(w http.ResponseWriter, r *http.Request) bool {
	if h == nil || r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	h.mu.RLock()
	d, ok := h.docs[r.URL.EscapedPath()]
	h.mu.RUnlock()
	if !ok || !h.engine.Reuse(d.stamp) {
		return false
	}
	writeDocument(w, r, d.doc, h.cacheControl, h.fail)
	return true
}

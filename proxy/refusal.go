package proxy

import (
	"fmt"
	"io"
	"net/http"

	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// ErrorFunc answers err in a front door's own error format and logs it as
// the door logs its errors: the mirror protocols' JSON errors
// (responder.fail), the OCI door's error envelope (its AnswerError), the
// CLI releases door's text. ServeCached hands it the 416 and the 412
// that http.ServeContent would answer in net/http's own way.
type ErrorFunc func(w http.ResponseWriter, r *http.Request, err error)

// refusal is the ResponseWriter http.ServeContent writes through (under
// noStoreErrors) in ServeCached: the two errors it answers itself, 416 to
// a Range that names no byte of the content (or is malformed) and 412 to
// an If-Match or If-Unmodified-Since that does not hold, are held back,
// their status and net/http's body (text/plain, or none with the
// content's Content-Type) never sent, for ServeCached to answer as the
// door answers every other error. Anything else passes through.
type refusal struct {
	http.ResponseWriter
	code int // the status held back, or 0
}

func (w *refusal) WriteHeader(code int) {
	if code == http.StatusRequestedRangeNotSatisfiable || code == http.StatusPreconditionFailed {
		w.code = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusal) Write(p []byte) (int, error) {
	if w.code != 0 {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the writer within.
func (w *refusal) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// refusePrecondition answers with fail the precondition that
// http.ServeContent found does not hold in ServeCached: 412 in the door's
// error format, no-store and without validators, as each door answers
// its errors, saying which header failed (ServeContent reads
// If-Unmodified-Since only without If-Match).
func refusePrecondition(w http.ResponseWriter, r *http.Request, fail ErrorFunc) {
	w.Header().Del("Content-Type")
	msg := "precondition failed: If-Match names no ETag of what is served here (ask without it for what is)"
	if len(r.Header["If-Match"]) == 0 {
		msg = "precondition failed: what is served here was modified after If-Unmodified-Since (ask without it for what is)"
	}
	fail(w, r, &httperr.RequestError{Status: http.StatusPreconditionFailed, Msg: msg})
}

// refuseRange answers with fail the Range that http.ServeContent refused
// in ServeCached: 416 with Content-Range: bytes */SIZE, the length of
// the content (RFC 9110 asks it of every 416 to a byte range; net/http
// sends it only for a range past the end, not for a malformed one), in
// the door's error format, no-store and without validators, as each
// door answers its errors. A Seek of the content that failed (where the
// range starts, in the cache) is the cache's failure, answered as such.
func refuseRange(w http.ResponseWriter, r *http.Request, cr *contentReader, fail ErrorFunc) {
	h := w.Header()
	h.Del("Content-Range")
	if cr.seekErr != nil {
		fail(w, r, cr.seekErr)
		return
	}
	size, err := cr.ReadSeeker.Seek(0, io.SeekEnd)
	if err != nil {
		fail(w, r, err)
		return
	}
	h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
	held := "it is empty"
	if size > 0 {
		held = fmt.Sprintf("bytes 0-%d", size-1)
	}
	fail(w, r, &httperr.RequestError{Status: http.StatusRequestedRangeNotSatisfiable,
		Msg: fmt.Sprintf("range not satisfiable: Range names no byte of the %d bytes served here (%s; ask without Range for the whole)", size, held)})
}

package proxy

import (
	"encoding/json"
	"net/http"

	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// errorBody is the JSON error envelope, the same shape registries use.
type errorBody struct {
	Errors []string `json:"errors"`
}

// writeError answers with err's status and a JSON body. Internal errors are
// not described to the client beyond their status.
func writeError(w http.ResponseWriter, err error) int {
	status := httperr.Status(err)
	msg := err.Error()
	if status == http.StatusInternalServerError {
		msg = "internal error"
	}
	w.Header().Set("Cache-Control", errorCacheControl)
	w.Header().Del("ETag")
	httperr.SetRetryAfter(w.Header(), err)
	writeJSON(w, status, errorBody{Errors: []string{msg}})
	return status
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	writeJSONBody(w, status, renderJSON(v))
}

// renderJSON encodes v with a trailing newline, or returns nil.
func renderJSON(v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return append(body, '\n')
}

// writeJSONBody sends body, as rendered by renderJSON (nil: an internal error).
func writeJSONBody(w http.ResponseWriter, status int, body []byte) {
	if body == nil {
		status = http.StatusInternalServerError
		body = []byte(`{"errors":["internal error"]}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	w.Write(body)
}

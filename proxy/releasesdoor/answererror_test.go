package releasesdoor_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
	"github.com/tfmirror/tfmirror/v2/proxy/releasesdoor"
)

// unusedReleases is a releases side the test never reaches.
type unusedReleases struct{ releasesdoor.Releases }

// A refusal of the layers in front of the door on its paths (a client
// address over the limit of failed attempts, a path too long) is
// answered as the door answers its own errors, in plain text as the
// releases site does, with the status, Retry-After and no-store, where
// it was the mirror protocols' JSON.
func TestAnswerErrorIsTheDoors(t *testing.T) {
	door, err := releasesdoor.New(releasesdoor.Config{Logger: slog.New(slog.DiscardHandler)}, unusedReleases{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err        error
		status     int
		retryAfter string
	}{
		{&httperr.TooManyFailuresError{Wait: 30 * time.Second}, http.StatusTooManyRequests, "30"},
		{&httperr.RequestError{Status: http.StatusRequestURITooLong, Msg: "path longer than 4096 bytes"}, http.StatusRequestURITooLong, ""},
	} {
		w := httptest.NewRecorder()
		door.AnswerError(w, httptest.NewRequest(http.MethodGet, "/releases/terraform/", nil), tc.err)
		h := w.Header()
		if w.Code != tc.status || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") || h.Get("Cache-Control") != "no-store" ||
			h.Get("Retry-After") != tc.retryAfter || strings.TrimSpace(w.Body.String()) != tc.err.Error() {
			t.Errorf("%v: %d %q %q Retry-After %q, body %q; want %d, text/plain, no-store, Retry-After %q and the error",
				tc.err, w.Code, h.Get("Content-Type"), h.Get("Cache-Control"), h.Get("Retry-After"), w.Body, tc.status, tc.retryAfter)
		}
	}
}

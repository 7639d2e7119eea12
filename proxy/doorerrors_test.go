package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// textDoor is a mounted door whose own errors are plain text, as the CLI
// releases door's are: it answers the refusals of the layers in front of
// it that way, saying it did.
type textDoor struct{ http.Handler }

func (textDoor) AnswerError(w http.ResponseWriter, _ *http.Request, err error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(httperr.Status(err))
	fmt.Fprintf(w, "door: %v\n", err)
}

// What the layers in front of the doors refuse (here a path longer than
// any door serves, and a Host the mirror cannot name itself by) is
// answered on each mounted door's paths by that door, in its format: the
// CLI releases door's under /releases/, the OCI door's under /v2/, the
// mirror protocols' JSON elsewhere. The releases door's were answered as
// the mirror protocols' JSON.
func TestRefusalsAnsweredByTheDoorOfThePath(t *testing.T) {
	t.Parallel()
	never := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("%s reached a door", r.URL.Path)
	})
	h := newHarness(t, harnessOptions{cfg: Config{OCI: mirrorErrorsDoor{never}, Releases: textDoor{never}}})
	long := strings.Repeat("x", MaxRequestPath)
	for _, tc := range []struct{ path, contentType, body string }{
		{"/releases/" + long, "text/plain; charset=utf-8", "door: path longer than"},
		{"/v2/" + long, "application/json", `{"errors":["path longer than`},
		{"/" + long, "application/json", `{"errors":["path longer than`},
	} {
		r := h.get(tc.path)
		if r.status != http.StatusRequestURITooLong || r.header.Get("Content-Type") != tc.contentType || !strings.HasPrefix(string(r.body), tc.body) {
			t.Errorf("%.20s...: %d %q %.60q; want 414, %s, %q", tc.path, r.status, r.header.Get("Content-Type"), r.body, tc.contentType, tc.body)
		}
	}
	addr := h.http.Listener.Addr().String()
	for _, tc := range []struct{ path, contentType, body string }{
		{"/releases/hashicorp/terraform/", "text/plain; charset=utf-8", "door: malformed Host header"},
		{"/v2/", "application/json", `{"errors":["malformed Host header`},
		{"/", "application/json", `{"errors":["malformed Host header`},
	} {
		resp, body := rawGet(t, addr, tc.path, "evil.example:99999")
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != tc.contentType || !strings.HasPrefix(body, tc.body) {
			t.Errorf("%s with a bad Host: %d %q %.60q; want 400, %s, %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.contentType, tc.body)
		}
	}
}

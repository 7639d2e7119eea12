package ocidoor

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/proxy"
)

// TestRequestBodyRefusedWithASpecCode: a GET under /v2/ whose body is
// longer than any door reads is refused 413 by the server in front of the
// door, in the door's error envelope, with the distribution spec's
// SIZE_INVALID (a length not taken), where it carried UNKNOWN, which is
// none of the spec's codes.
func TestRequestBodyRefusedWithASpecCode(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	req, err := http.NewRequest(http.MethodGet, r.http.URL+"/v2/", strings.NewReader(strings.Repeat("x", proxy.MaxRequestBody+1)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body of %d bytes: %s, want 413", proxy.MaxRequestBody+1, resp.Status)
	}
	var env errorEnvelope
	if err := json.Unmarshal(body, &env); err != nil || len(env.Errors) != 1 || env.Errors[0].Code != "SIZE_INVALID" {
		t.Errorf("413 body %q (%v); want the error envelope with SIZE_INVALID", body, err)
	}
}

package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestCLIReleaseFileAbsentIsNoOriginFailure: a file of a CLI release
// that its origin answers 404 for (OpenTofu's optional cosign .sig,
// which the door answers 404 as missing) is the origin's answer, not its
// failure: tfmirror_origin_requests_total counts it as not_found, as
// docs/metrics.md says of the origins' 404s, and the status page's row
// for the origin does not turn failing. Each request is counted under
// the operation docs/metrics.md names: the version list as document
// (a series there from start-up), the .gpgsig as signature.
func TestCLIReleaseFileAbsentIsNoOriginFailure(t *testing.T) {
	c := newCLIOrigin(t)
	c.origin.Withhold("tofu_1.8.0_SHA256SUMS.sig", true)
	c.start(t, t.TempDir())
	u, err := url.Parse(c.origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	series := func(op, outcome string) string {
		return fmt.Sprintf("tfmirror_origin_requests_total{operation=%q,origin=%q,outcome=%q}", op, u.Host, outcome)
	}
	value := func(body, name string) string {
		for line := range strings.Lines(body) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
				return v
			}
		}
		return "absent"
	}
	if v := value(c.get(t, "/metrics"), series("document", "success")); v != "0" {
		t.Errorf("at start-up, %s is %s, want 0", series("document", "success"), v)
	}

	c.get(t, "/releases/opentofu/v1.8.0/tofu_1.8.0_SHA256SUMS")
	resp, err := c.client(t).Get(c.url + "/releases/opentofu/v1.8.0/tofu_1.8.0_SHA256SUMS.sig")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the cosign .sig the origin lacks: %d, want 404", resp.StatusCode)
	}

	body := c.get(t, "/metrics")
	for _, want := range []struct{ op, outcome, value string }{
		{"document", "success", "1"},  // api.json, the version list
		{"shasums", "success", "1"},   // tofu_1.8.0_SHA256SUMS
		{"signature", "success", "1"}, // its .gpgsig
		{"signature", "not_found", "1"},
		{"signature", "error", "0"},
	} {
		if v := value(body, series(want.op, want.outcome)); v != want.value {
			t.Errorf("%s = %s, want %s", series(want.op, want.outcome), v, want.value)
		}
	}
	for _, o := range c.status(t).Origins {
		if o.Host == u.Host && (o.State != "ok" || o.LastHour.OriginFailures != 0) {
			t.Errorf("status page row of %s: state %q, %d failures in the last hour, last error %+v; want ok, none", o.Host, o.State, o.LastHour.OriginFailures, o.LastError)
		}
	}
}

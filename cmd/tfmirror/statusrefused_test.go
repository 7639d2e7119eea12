package main

import (
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// An origin that answers every request, but with packages that fail
// verification (a signature by a key it does not advertise, an archive
// whose bytes are not those its signed SHA256SUMS names), is not shown as
// answering on the status page: its row says its answers fail
// verification, when they last did, and how often in the hour.
func TestStatusOriginRowFailingVerification(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	origin.AddProvider("hashicorp", "null", []string{"3.2.0"}, []string{"linux_amd64"})
	tm := startMirror(t, origin, t.TempDir(), nil, "--insecure-http")

	row := func() proxy.OriginHealth {
		t.Helper()
		rows := originRows(t, tm)
		if len(rows) != 1 {
			t.Fatalf("origin rows: %+v", rows)
		}
		return rows[0]
	}

	// A signature by another key than the one advertised.
	origin.SetWrongSigningKey(true)
	if resp, body, err := tm.get(tfRegistry + "/hashicorp/null/3.2.0.json"); err != nil || resp.StatusCode < 500 {
		t.Fatalf("a version signed with the wrong key: %v %v %s", resp, err, body)
	}
	origin.SetWrongSigningKey(false)
	r := row()
	if r.State != "unverified" || r.LastVerificationFailure == nil || r.LastHour.VerificationFailures != 1 ||
		!strings.Contains(r.LastVerificationFailure.Cause, "signature") || r.LastVerificationFailure.At.IsZero() {
		t.Errorf("row of an origin whose signature failed: state %q, last verification failure %+v, last hour %+v; want unverified, the failure and its time, 1 in the hour",
			r.State, r.LastVerificationFailure, r.LastHour)
	}

	// An archive whose bytes do not match its signed sha256.
	origin.TamperArchive("hashicorp", "random", "3.6.0", "linux_amd64", true)
	if resp, _, err := tm.get(archiveURL("random", "3.6.0", "linux_amd64")); err == nil && resp.StatusCode == 200 {
		// Broken off, or refused before the first byte: never whole.
		t.Logf("tampered archive answered 200 (its body broken off)")
	}
	tm.idle()
	r = row()
	if r.State != "unverified" || r.LastVerificationFailure == nil || r.LastHour.VerificationFailures != 2 ||
		!strings.Contains(r.LastVerificationFailure.Cause, "sha256") {
		t.Errorf("row of an origin whose archive failed its checksum: state %q, last verification failure %+v, last hour %+v; want unverified, the checksum failure, 2 in the hour",
			r.State, r.LastVerificationFailure, r.LastHour)
	}
	if r.LastSuccess.IsZero() || r.LastError != nil {
		t.Errorf("the origin answered every request: last success %v, last error %+v", r.LastSuccess, r.LastError)
	}
	// The page says it in words.
	_, page, err := tm.get("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"answering, failing verification", "did not match the sha256", "2 packages failed verification"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the status page's origin row lacks %q", want)
		}
	}
}

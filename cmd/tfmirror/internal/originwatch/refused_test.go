package originwatch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// An origin that answers, with packages that fail verification, is
// "unverified" for the hour after the last such package, with the
// failure and its time; a failing request says more and comes first; an
// hour without one makes it "ok" again, its last failure kept.
func TestRowsUnverified(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	w, err := New([]string{"registry.terraform.io"}, fakeCircuits{}, nil, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	const host = "registry.terraform.io"
	w.OriginDone(host, discovery.OpVersions, nil)
	w.Refused(host, string(verify.ReasonSignature))
	w.Refused("evil.example", string(verify.ReasonSignature)) // not an allowed origin: not kept
	r := w.Rows()[0]
	if r.State != "unverified" || r.LastVerificationFailure == nil || !r.LastVerificationFailure.At.Equal(now) ||
		!strings.Contains(r.LastVerificationFailure.Cause, "signature") || r.LastHour.VerificationFailures != 1 {
		t.Fatalf("after a bad signature: %+v %+v", r, r.LastVerificationFailure)
	}

	now = now.Add(time.Minute)
	w.OriginDone(host, discovery.OpVersions, errors.New("connection refused"))
	if r := w.Rows()[0]; r.State != "failing" {
		t.Fatalf("after a failed request: %q, want failing", r.State)
	}
	now = now.Add(time.Minute)
	w.OriginDone(host, discovery.OpVersions, nil)
	if r := w.Rows()[0]; r.State != "unverified" {
		t.Fatalf("answering again, a refusal within the hour: %q, want unverified", r.State)
	}

	now = now.Add(time.Hour)
	w.OriginDone(host, discovery.OpVersions, nil)
	r = w.Rows()[0]
	if r.State != "ok" || r.LastHour.VerificationFailures != 0 || r.LastVerificationFailure == nil {
		t.Fatalf("an hour later: %+v, want ok, the last failure kept", r)
	}
}

package main

import (
	"crypto/x509"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestStatusOriginRows: a mirror that does not trust its origin's
// certificate authority (as behind a TLS-inspecting proxy whose CA is not
// configured) says so on the status page's row of that origin, in words
// that name the setting, with the breaker's state; once the origin is
// trusted, a mirror's row says it answers and counts the requests and
// cache hits of the hour.
func TestStatusOriginRows(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})

	untrusting := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{
		dialContext: routeRegistryTo(origin), origin: fastRetries, rootCAs: x509.NewCertPool(),
	}, "--insecure-http")
	if resp, _, err := untrusting.get(tfRegistry + "/hashicorp/random/index.json"); err != nil || resp.StatusCode < 500 {
		t.Fatalf("an untrusted origin: %v %v", resp, err)
	}
	got := originRows(t, untrusting)
	if len(got) != 1 || got[0].Host != tfRegistry || got[0].State != "failing" || got[0].LastError == nil ||
		!strings.Contains(got[0].LastError.Cause, "certificate signed by unknown authority") || !strings.Contains(got[0].LastError.Cause, "origin_ca_file") ||
		got[0].LastHour.Requests != 1 || got[0].LastHour.OriginFailures == 0 {
		t.Errorf("row of an untrusted origin: %+v %+v", got, got[0].LastError)
	}

	tm := startMirror(t, origin, t.TempDir(), nil, "--insecure-http")
	archive := archiveURL("random", "3.6.0", "linux_amd64")
	for range 2 {
		if resp, _, err := tm.get(archive); err != nil || resp.StatusCode != 200 {
			t.Fatalf("archive: %v %v", resp, err)
		}
		tm.idle()
	}
	got = originRows(t, tm)
	if len(got) != 1 || got[0].State != "ok" || got[0].Breaker != "closed" || got[0].LastSuccess.IsZero() || got[0].LastError != nil ||
		got[0].LastHour.Requests != 2 || got[0].LastHour.Downloads != 2 || got[0].LastHour.CacheHits != 1 || got[0].LastHour.OriginRequests == 0 {
		t.Errorf("row of a trusted origin: %+v", got)
	}
}

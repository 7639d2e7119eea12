package main

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

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

// TestStatusOriginRowsCountAbortedDownloads: a download broken off after
// its 200 went out (a tampered archive, found so at its last byte) is a
// client request for the origin's providers, and a download from it, on
// the origin's row as in the access log and tfmirror_http_requests_total:
// the row does not say the hour brought no request while its clients'
// downloads failed.
func TestStatusOriginRowsCountAbortedDownloads(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: 1 << 20})
	origin.AddProvider("hashicorp", "null", []string{"3.2.0"}, []string{"linux_amd64"})
	origin.TamperArchive("hashicorp", "null", "3.2.0", "linux_amd64", true)
	// Slow enough that the answer begins before the last byte is read.
	origin.SetArchiveRate(2 << 20)
	tm := startMirror(t, origin, t.TempDir(), nil)

	resp, _, _ := tm.get(archiveURL("null", "3.2.0", "linux_amd64"))
	tm.idle()
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("the tampered download: %v, want a 200 broken off mid-body", resp)
	}
	for deadline := time.Now().Add(time.Minute); metric(t, tm.m.registry, "tfmirror_http_responses_aborted_total", "route", "archive") != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the tampered download was not counted as aborted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := originRows(t, tm)
	if len(got) != 1 || got[0].LastHour.Requests != 1 || got[0].LastHour.Downloads != 1 || got[0].LastHour.CacheHits != 0 ||
		got[0].LastHour.VerificationFailures != 1 || got[0].State != "unverified" {
		t.Errorf("row after an aborted download: %+v, want 1 request, 1 download, no cache hit, 1 verification failure, unverified", got)
	}
}

// TestStatusOriginRowsCountRefusedRangesAsNoDownload: a request for a
// cached archive whose Range names no byte of it (416), or whose
// If-Match names another ETag (412), got no byte of the archive: the
// origin's row counts it as a request, not as a download served from the
// cache, and the access log does not say "hit" of it.
func TestStatusOriginRowsCountRefusedRangesAsNoDownload(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	tm := startMirror(t, origin, t.TempDir(), nil, "--insecure-http")
	archive := archiveURL("random", "3.6.0", "linux_amd64")
	if resp, _, err := tm.get(archive); err != nil || resp.StatusCode != 200 {
		t.Fatalf("archive: %v %v", resp, err)
	}
	tm.idle()
	for _, c := range []struct {
		header []string
		want   int
	}{
		{[]string{"Range", "bytes=999999999-"}, 416},
		{[]string{"If-Match", `"not-its-etag"`}, 412},
	} {
		resp, _, err := tm.get(archive, c.header...)
		if err != nil || resp.StatusCode != c.want {
			t.Fatalf("archive with %v: %v %v, want %d", c.header, resp, err, c.want)
		}
		if got := resp.Header.Get("X-Tfmirror-Cache"); got != "" {
			t.Errorf("a %d says X-Tfmirror-Cache: %s of an answer that served nothing", c.want, got)
		}
	}
	got := originRows(t, tm)
	if len(got) != 1 || got[0].LastHour.Requests != 3 || got[0].LastHour.Downloads != 1 || got[0].LastHour.CacheHits != 0 {
		t.Errorf("row after a download, a 416 and a 412: %+v, want 3 requests, 1 download, no cache hit", got)
	}
}

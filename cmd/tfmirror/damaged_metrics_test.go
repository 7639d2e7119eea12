package main

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A cached archive that a client's read finds damaged where it is stored
// is broken off after its 200 went out: docs/metrics.md counts it in
// tfmirror_http_responses_aborted_total ("a download that failed its
// verification, or found its cached copy damaged, as it streamed"), as
// the access log's aborted=true, so that the 200 does not pass for a
// download served whole.
func TestMetricsDamagedCachedArchiveCountsAsAborted(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: 3 << 20})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	want := origin.Archive("hashicorp", "random", "3.6.0", "linux_amd64")
	tm := startMirror(t, origin, t.TempDir(), nil)
	reg := tm.m.registry
	path := archiveURL("random", "3.6.0", "linux_amd64")

	if resp, _, err := tm.get(path); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first download: %v %v", resp, err)
	}
	tm.idle()
	sum := sha256.Sum256(want)
	// A byte of the second chunk (1 MiB each): the first chunk goes out
	// before the read finds the damage.
	if err := cachetest.FlipBlobByte(tm.m.store, hex.EncodeToString(sum[:]), 1<<20+4096); err != nil {
		t.Fatal(err)
	}
	before := metric(t, reg, "tfmirror_http_requests_total", "route", "archive", "code", "200")

	resp, body, err := tm.get(path)
	if err == nil && len(body) == len(want) {
		t.Fatalf("the damaged cached archive was sent whole")
	}
	if resp == nil || resp.StatusCode != 200 || resp.Header.Get("X-Tfmirror-Cache") != "hit" {
		t.Fatalf("the damaged read: %v, want a 200 from the cache broken off mid-body", resp)
	}
	if got := metric(t, reg, "tfmirror_cache_damaged_reads_total"); got != 1 {
		t.Errorf("tfmirror_cache_damaged_reads_total = %v, want 1", got)
	}
	// The disk's fault, not the origin's: docs/operations.md ("Checking
	// the cache") and docs/metrics.md count it apart from the
	// verification failures, whose critical alert points at the origin.
	if got := metric(t, reg, "tfmirror_verification_failures_total", "reason", "checksum_mismatch"); got != 0 {
		t.Errorf("tfmirror_verification_failures_total{reason=\"checksum_mismatch\"} = %v, want 0: a damaged read is the disk's, counted in tfmirror_cache_damaged_reads_total", got)
	}
	if got := metric(t, reg, "tfmirror_http_requests_total", "route", "archive", "code", "200"); got != before+1 {
		t.Errorf("tfmirror_http_requests_total{route=archive,code=200} = %v, want %v", got, before+1)
	}
	if got := metric(t, reg, "tfmirror_http_responses_aborted_total", "route", "archive"); got != 1 {
		t.Errorf("tfmirror_http_responses_aborted_total{route=\"archive\"} = %v, want 1: a 200 broken off because the cached copy is damaged is counted as a complete download", got)
	}
}

package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tfmirror/tfmirror/v2/verify"
)

func newTest(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{
		Version: "1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567", Origins: []string{"registry.terraform.io"},
		Cache: func() (int, int64) { return 3, 4096 }, MaxBytes: 1 << 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func TestCountersMove(t *testing.T) {
	m, _ := newTest(t)
	m.CacheLookup("archive", false)
	m.CacheLookup("archive", true)
	m.CacheLookup("archive", true)
	m.Coalesced("archive")
	m.VerificationFailed("signature")
	m.StaleServed("versions")
	m.OriginRequest("registry.terraform.io", "archive", "success", time.Second)
	m.OriginBytes("registry.terraform.io", 100)
	done := m.ArchiveFetchStarted()
	if got := testutil.ToFloat64(m.inflight); got != 1 {
		t.Errorf("in-flight fetches = %v, want 1", got)
	}
	done()
	m.ObserveRequest("archive", 200, time.Millisecond, 512, false)
	m.Synced("fetched", 300)
	m.Synced("cached", 0)
	m.Synced("failed", 0)
	m.AirGap("import", map[string]int{"imported": 3, "present": 1, "failed": 0}, 700)
	m.AirGap("export", map[string]int{"exported": 2, "failed": 1}, 50)
	m.AirGap("export", map[string]int{"exported": 1}, 25)

	tests := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"archive hits", m.cacheHits.WithLabelValues("archive"), 2},
		{"archive misses", m.cacheMisses.WithLabelValues("archive"), 1},
		{"coalesced", m.coalesced.WithLabelValues("archive"), 1},
		{"signature failures", m.verifyFails.WithLabelValues("signature"), 1},
		{"stale", m.stale.WithLabelValues("versions"), 1},
		{"origin requests", m.originReqs.WithLabelValues("registry.terraform.io", "archive", "success"), 1},
		{"origin bytes", m.originBytes.WithLabelValues("registry.terraform.io"), 100},
		{"in-flight after done", m.inflight, 0},
		{"http requests", m.httpRequests.WithLabelValues("archive", "200"), 1},
		{"http bytes", m.httpBytes.WithLabelValues("archive"), 512},
		{"synced fetched", m.syncPackages.WithLabelValues("fetched"), 1},
		{"synced failed", m.syncPackages.WithLabelValues("failed"), 1},
		{"synced bytes", m.syncBytes, 300},
		{"imported", m.airGapPkgs["import"].WithLabelValues("imported"), 3},
		{"import present", m.airGapPkgs["import"].WithLabelValues("present"), 1},
		{"imported bytes", m.airGapBytes["import"], 700},
		{"exported", m.airGapPkgs["export"].WithLabelValues("exported"), 3},
		{"export failed", m.airGapPkgs["export"].WithLabelValues("failed"), 1},
		{"exported bytes", m.airGapBytes["export"], 75},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := testutil.ToFloat64(tc.c); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Requests are counted by route and code, from many goroutines at once,
// for codes seen for the first time as for known ones, and for a route
// outside the fixed set; a code never served has no series.
func TestRequestsByRouteAndCode(t *testing.T) {
	m, reg := newTest(t)
	codes := []int{200, 304, 404, 200, 503}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				m.ObserveRequest("index", codes[i%len(codes)], time.Millisecond, 10, false)
			}
		}()
	}
	wg.Wait()
	m.ObserveRequest("elsewhere", 200, time.Millisecond, 7, false)
	tests := []struct {
		route, code string
		want        float64
	}{
		{"index", "200", 8 * 20}, {"index", "304", 8 * 10}, {"index", "404", 8 * 10}, {"index", "503", 8 * 10},
		{"elsewhere", "200", 1},
	}
	for _, tc := range tests {
		if got := testutil.ToFloat64(m.httpRequests.WithLabelValues(tc.route, tc.code)); got != tc.want {
			t.Errorf("requests{route=%q,code=%q} = %v, want %v", tc.route, tc.code, got, tc.want)
		}
	}
	if got := testutil.ToFloat64(m.httpBytes.WithLabelValues("index")); got != 8*50*10 {
		t.Errorf("index bytes = %v, want %v", got, 8*50*10)
	}
	if n, err := testutil.GatherAndCount(reg, "tfmirror_http_requests_total"); err != nil || n != 5 {
		t.Errorf("%d request series (%v), want 5: one per route and code served", n, err)
	}
}

func TestExposition(t *testing.T) {
	m, _ := newTest(t)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`tfmirror_build_info{goversion="go`,
		`revision="0123456789abcdef0123456789abcdef01234567",version="1.2.3"} 1`,
		"tfmirror_cache_archives 3",
		"tfmirror_cache_stored_bytes 4096",
		"tfmirror_cache_max_bytes 1.073741824e+09",
		// Pre-created series exist before anything happened.
		`tfmirror_verification_failures_total{reason="checksum_mismatch"} 0`,
		`tfmirror_origin_requests_total{operation="versions",origin="registry.terraform.io",outcome="timeout"} 0`,
		`tfmirror_sync_packages_total{outcome="failed"} 0`,
		"tfmirror_sync_bytes_total 0",
		"go_goroutines",
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

func TestNoGlobalRegistry(t *testing.T) {
	// Two instances on two registries do not collide.
	newTest(t)
	newTest(t)
}

// Every reason package verify refuses a package for has its series from
// the start.
func TestVerificationReasonsPreCreated(t *testing.T) {
	m, _ := newTest(t)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, r := range verify.Reasons() {
		if want := `tfmirror_verification_failures_total{reason="` + string(r) + `"} 0`; !strings.Contains(string(body), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

// TestConfigReloads: both outcomes' series exist from the start, and each
// reload counts under its own.
func TestConfigReloads(t *testing.T) {
	m, _ := newTest(t)
	m.ConfigReload("refused")
	m.ConfigReload("refused")
	m.ConfigReload("applied")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`tfmirror_config_reloads_total{outcome="applied"} 1`, `tfmirror_config_reloads_total{outcome="refused"} 2`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	m2, _ := newTest(t)
	rec = httptest.NewRecorder()
	m2.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ = io.ReadAll(rec.Body)
	if !strings.Contains(string(body), `tfmirror_config_reloads_total{outcome="refused"} 0`) {
		t.Error("the refused series does not exist before the first reload")
	}
}

// TestConfigLastReloadSuccessful: the gauge is 1 from the start (the
// process runs with a file it accepted), 0 after a refused reload (the
// file on disk is not the one in force), and 1 again once a reload is
// applied.
func TestConfigLastReloadSuccessful(t *testing.T) {
	m, _ := newTest(t)
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		return string(body)
	}
	for _, step := range []struct {
		outcome string
		want    string
	}{
		{"", "1"},
		{"refused", "0"},
		{"refused", "0"},
		{"applied", "1"},
	} {
		if step.outcome != "" {
			m.ConfigReload(step.outcome)
		}
		if want := "\ntfmirror_config_last_reload_successful " + step.want + "\n"; !strings.Contains(scrape(), want) {
			t.Errorf("after %q: exposition lacks %q", step.outcome, want)
		}
	}
}

// TestOriginLastSuccess: a success or a not-found answer sets the
// origin's last success to now; a failure leaves it.
func TestOriginLastSuccess(t *testing.T) {
	m, _ := newTest(t)
	m.OriginRequest("registry.terraform.io", "versions", "error", time.Second)
	if n := testutil.CollectAndCount(m.lastSuccess); n != 0 {
		t.Fatalf("a failure set the last success (%d series)", n)
	}
	before := float64(time.Now().Unix())
	m.OriginRequest("registry.terraform.io", "versions", "not_found", time.Second)
	if got := testutil.ToFloat64(m.lastSuccess.WithLabelValues("registry.terraform.io")); got < before || got > float64(time.Now().Unix()+1) {
		t.Errorf("last success %v, want about %v", got, before)
	}
}

package main

// Observability through the real wiring: metric values as clients and
// origins behave, the access log, health endpoints and the status page in a
// real browser.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

const tfRegistry = "registry.terraform.io"

// testMirror is a mirror wired by newServer and serving on loopback in
// front of a fake origin.
type testMirror struct {
	t      *testing.T
	m      *server
	origin *fakeorigin.Origin
	url    string // base URL with trailing slash
	client *http.Client
	stop   func()
}

// startMirror serves a mirror for registry.terraform.io on origin, with
// the data directory dir and extra serve flags. Logs go to logOut (nil: the
// test log).
func startMirror(t *testing.T, origin *fakeorigin.Origin, dir string, logOut io.Writer, args ...string) *testMirror {
	t.Helper()
	return startMirrorWith(t, origin, dir, logOut, nil, append([]string{"--allow-private-origins"}, args...)...)
}

// startMirrorWith is startMirror with overrides o: nil routes tfRegistry to
// origin with fast origin retries; a non-nil o is used as given (its
// rootCAs defaulting to origin's). The private-address guard applies
// unless args include --allow-private-origins or o has a dialContext.
func startMirrorWith(t *testing.T, origin *fakeorigin.Origin, dir string, logOut io.Writer, o *overrides, args ...string) *testMirror {
	t.Helper()
	cfg, err := parseServeFlags(append([]string{
		"--data-dir", dir,
		"--allowed-origins", tfRegistry,
	}, args...), func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logger *slog.Logger
	if logOut != nil {
		logger = slog.New(slog.NewJSONHandler(logOut, nil))
	} else {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if o == nil {
		o = &overrides{
			dialContext: routeRegistryTo(origin),
			origin:      fastRetries,
		}
	}
	if o.rootCAs == nil {
		o.rootCAs = origin.CertPool()
	}
	m, err := newServer(cfg, logger, *o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.serve(ctx, ln) }()
	tm := &testMirror{t: t, m: m, origin: origin, client: &http.Client{Transport: &http.Transport{}}}
	tm.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mirror stopped with: %v", err)
		}
	})
	t.Cleanup(tm.stop)
	// The admin socket comes up beside the HTTP listener: wait for it, so
	// that a subcommand run next works through this mirror instead of
	// finding the data directory without a server (bounded: a directory
	// whose socket cannot be made has none).
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if c, err := admin.Dial(context.Background(), dir); err == nil {
			c.Close()
			break
		}
	}
	tm.url = "http://" + ln.Addr().String() + "/"
	if m.tls != nil {
		tm.url = "https://" + ln.Addr().String() + "/"
		tm.client = trustingClient(t, m.caFile)
	}
	return tm
}

func newOrigin(t *testing.T, opts fakeorigin.Options) *fakeorigin.Origin {
	t.Helper()
	opts.Hostnames = []string{tfRegistry}
	return enginetest.StartOrigin(t, opts)
}

// get requests path (relative to the mirror's base URL) and reads the body.
func (tm *testMirror) get(path string, header ...string) (*http.Response, []byte, error) {
	tm.t.Helper()
	req, err := http.NewRequest(http.MethodGet, tm.url+strings.TrimPrefix(path, "/"), nil)
	if err != nil {
		tm.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := tm.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// idle waits until no archive fetch is running.
func (tm *testMirror) idle() {
	tm.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mirror.WaitIdle(ctx, tm.m.engine); err != nil {
		tm.t.Fatalf("archive fetches did not end: %v", err)
	}
}

// metric returns the value of the counter or gauge name with exactly the
// given labels (name=value pairs); a series that does not exist is 0.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			}
			t.Fatalf("%s is neither a counter nor a gauge", name)
		}
		return 0
	}
	t.Fatalf("metric family %s is not registered", name)
	return 0
}

// expect checks several metric values at once.
type expectation struct {
	name   string
	labels []string
	want   float64
}

func expectMetrics(t *testing.T, reg *prometheus.Registry, when string, exps ...expectation) {
	t.Helper()
	for _, e := range exps {
		if got := metric(t, reg, e.name, e.labels...); got != e.want {
			t.Errorf("%s: %s%v = %v, want %v", when, e.name, e.labels, got, e.want)
		}
	}
}

func archiveURL(typ, version, platform string) string {
	return fmt.Sprintf("%s/hashicorp/%s/terraform-provider-%s_%s_%s.zip", tfRegistry, typ, typ, version, platform)
}

func TestMetricsColdThenWarmTerraformInit(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	host := runtime.GOOS + "_" + runtime.GOARCH
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{host, "windows_386"})
	reg := e.mirror.registry
	providers := map[string]string{"random": "hashicorp/random@3.6.0"}

	// Terraform asks for each archive twice (HEAD, then GET). On a cold
	// init the first request misses and starts the download; the second
	// joins it or, if it has finished, hits.
	if out, err := e.terraform(writeConfig(t, providers), "init", "-no-color"); err != nil {
		t.Fatalf("cold terraform init failed: %v\n%s", err, out)
	}
	waitIdle(e.mirror.engine)
	misses := metric(t, reg, "tfmirror_cache_misses_total", "kind", "archive")
	hits := metric(t, reg, "tfmirror_cache_hits_total", "kind", "archive")
	if misses < 1 || misses+hits != 2 {
		t.Errorf("after a cold init: archive misses %v hits %v, want at least one miss and two lookups", misses, hits)
	}
	size := float64(len(e.origin.Archive("hashicorp", "random", "3.6.0", host)))
	expectMetrics(t, reg, "after a cold init",
		expectation{"tfmirror_origin_requests_total", []string{"origin", tfRegistry, "operation", "archive", "outcome", "success"}, 1},
		expectation{"tfmirror_http_requests_total", []string{"route", "archive", "code", "200"}, 2},
		expectation{"tfmirror_origin_bytes_total", []string{"origin", tfRegistry}, size},
		expectation{"tfmirror_cache_archives", nil, 1},
		expectation{"tfmirror_cache_stored_bytes", nil, size},
		expectation{"tfmirror_origin_inflight_archive_fetches", nil, 0},
	)

	if out, err := e.terraform(writeConfig(t, providers), "init", "-no-color"); err != nil {
		t.Fatalf("warm terraform init failed: %v\n%s", err, out)
	}
	expectMetrics(t, reg, "after a warm init",
		expectation{"tfmirror_cache_misses_total", []string{"kind", "archive"}, misses},
		expectation{"tfmirror_cache_hits_total", []string{"kind", "archive"}, hits + 2},
		expectation{"tfmirror_origin_requests_total", []string{"origin", tfRegistry, "operation", "archive", "outcome", "success"}, 1},
		expectation{"tfmirror_http_requests_total", []string{"route", "archive", "code", "200"}, 4},
	)
}

// A tampered archive is counted as a failed verification, and its
// download, broken off after its 200 went out, as an aborted response:
// counted under code 200, as sent, it would pass for a success.
func TestMetricsTamperedArchive(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: 1 << 20})
	origin.AddProvider("hashicorp", "null", []string{"3.2.0"}, []string{"linux_amd64"})
	origin.TamperArchive("hashicorp", "null", "3.2.0", "linux_amd64", true)
	// Slow enough (half a second for the archive) that the answer begins
	// before the last byte, whose check fails, is read.
	origin.SetArchiveRate(2 << 20)
	tm := startMirror(t, origin, t.TempDir(), nil)

	resp, body, err := tm.get(archiveURL("null", "3.2.0", "linux_amd64"))
	if err == nil && resp.StatusCode == 200 && bytes.Equal(body, origin.Archive("hashicorp", "null", "3.2.0", "linux_amd64")) {
		t.Fatal("a tampered archive was served complete")
	}
	tm.idle()
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("the tampered download: %v %v, want a 200 broken off mid-body (1 MiB streams before it is verified)", resp, err)
	}
	for deadline := time.Now().Add(time.Minute); metric(t, tm.m.registry, "tfmirror_http_responses_aborted_total", "route", "archive") != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("tfmirror_http_responses_aborted_total{route=\"archive\"} = %v, want 1", metric(t, tm.m.registry, "tfmirror_http_responses_aborted_total", "route", "archive"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := metric(t, tm.m.registry, "tfmirror_http_responses_aborted_total", "route", "index"); n != 0 {
		t.Errorf("aborted index responses: %v, want 0", n)
	}
	expectMetrics(t, tm.m.registry, "after a tampered download",
		expectation{"tfmirror_verification_failures_total", []string{"reason", "checksum_mismatch"}, 1},
		expectation{"tfmirror_verification_failures_total", []string{"reason", "signature"}, 0},
		expectation{"tfmirror_cache_archives", nil, 0},
		expectation{"tfmirror_cache_stored_bytes", nil, 0},
	)
}

func TestMetricsCoalescedDownload(t *testing.T) {
	const clients = 6
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: 256 << 10})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	want := origin.Archive("hashicorp", "random", "3.6.0", "linux_amd64")
	tm := startMirror(t, origin, t.TempDir(), nil)
	reg := tm.m.registry
	release := origin.GateArchives()
	defer release()

	// Response headers reach a client only once it has joined the fetch
	// and the origin has answered, so when every request has returned its
	// response, all clients have joined the one gated fetch.
	url := tm.url + archiveURL("random", "3.6.0", "linux_amd64")
	resps := make(chan *http.Response, clients)
	errs := make(chan error, clients)
	for range clients {
		go func() {
			resp, err := tm.client.Get(url)
			if err != nil {
				errs <- err
				return
			}
			resps <- resp
		}()
	}
	var got []*http.Response
	for range clients {
		select {
		case r := <-resps:
			defer r.Body.Close()
			got = append(got, r)
		case err := <-errs:
			t.Fatal(err)
		}
	}
	expectMetrics(t, reg, "while all clients wait on the gated fetch",
		expectation{"tfmirror_origin_inflight_archive_fetches", nil, 1},
		expectation{"tfmirror_coalesced_requests_total", []string{"kind", "archive"}, clients - 1},
		expectation{"tfmirror_cache_misses_total", []string{"kind", "archive"}, clients},
	)
	release()
	for i, r := range got {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.StatusCode != 200 || !bytes.Equal(body, want) {
			t.Errorf("client %d: status %d err %v, %d bytes (want %d)", i, r.StatusCode, err, len(body), len(want))
		}
	}
	tm.idle()
	expectMetrics(t, reg, "after the download",
		expectation{"tfmirror_origin_requests_total", []string{"origin", tfRegistry, "operation", "archive", "outcome", "success"}, 1},
		expectation{"tfmirror_coalesced_requests_total", []string{"kind", "archive"}, clients - 1},
		expectation{"tfmirror_origin_inflight_archive_fetches", nil, 0},
		expectation{"tfmirror_origin_bytes_total", []string{"origin", tfRegistry}, float64(len(want))},
	)
	if n := origin.ArchiveHits("hashicorp", "random", "3.6.0", "linux_amd64"); n != 1 {
		t.Errorf("origin archive requests = %d, want 1", n)
	}
}

func TestMetricsCacheGaugesAfterRestart(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	plats := []string{"linux_amd64", "darwin_arm64"}
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, plats)
	dir := t.TempDir()
	tm := startMirror(t, origin, dir, nil)
	var total int
	for _, pl := range plats {
		if resp, _, err := tm.get(archiveURL("random", "3.6.0", pl)); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", pl, resp, err)
		}
		total += len(origin.Archive("hashicorp", "random", "3.6.0", pl))
	}
	tm.idle()
	tm.stop()

	// A new process on the same data directory reports what the cache
	// holds before any request, on /metrics as a scraper sees it.
	tm = startMirror(t, origin, dir, nil)
	resp, body, err := tm.get("metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %v %v", resp, err)
	}
	for _, line := range []string{
		"tfmirror_cache_archives 2",
		fmt.Sprintf("tfmirror_cache_stored_bytes %d", total),
		`tfmirror_cache_misses_total{kind="archive"} 0`,
	} {
		if !bytes.Contains(body, []byte("\n"+line+"\n")) {
			t.Errorf("/metrics after restart lacks %q", line)
		}
	}
}

func TestOriginDownReadyAndStale(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	tm := startMirror(t, origin, t.TempDir(), nil, "--versions-ttl", "1ns")
	index := tfRegistry + "/hashicorp/random/index.json"
	if resp, body, err := tm.get(index); err != nil || resp.StatusCode != 200 {
		t.Fatalf("index.json with the origin up: %v %v %s", resp, err, body)
	}
	origin.SetDown(http.StatusServiceUnavailable)

	resp, body, err := tm.get(index)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Tfmirror-Stale") != "1" {
		t.Fatalf("index.json with the origin down: %v %v %s", resp, err, body)
	}
	for _, path := range []string{"readyz", "healthz"} {
		if resp, body, err := tm.get(path); err != nil || resp.StatusCode != 200 {
			t.Errorf("/%s with the origin down: %v %v %s", path, resp, err, body)
		}
	}
	expectMetrics(t, tm.m.registry, "with the origin down",
		expectation{"tfmirror_stale_responses_total", []string{"kind", "versions"}, 1},
		expectation{"tfmirror_cache_misses_total", []string{"kind", "versions"}, 2},
		expectation{"tfmirror_origin_requests_total", []string{"origin", tfRegistry, "operation", "versions", "outcome", "success"}, 1},
	)
	var failed float64
	for _, out := range []string{"not_found", "error", "timeout", "refused"} {
		failed += metric(t, tm.m.registry, "tfmirror_origin_requests_total", "origin", tfRegistry, "operation", "versions", "outcome", out)
	}
	if failed < 1 {
		t.Errorf("no failed origin versions request was counted")
	}
}

// freeLoopbackAddr is a loopback address with a port no listener holds
// as it returns, for a setting (--metrics-listen) whose address the test
// must know before the mirror starts.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer free.Close()
	return free.Addr().String()
}

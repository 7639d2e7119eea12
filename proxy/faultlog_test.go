package proxy

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// A stranger's requests for made-up names, unknown hosts and malformed
// paths (those no route serves too), in a loop, get an access-log line each and no more at info: the
// "request failed" line of each was logged at info too, a second line
// per request, so that any client could grow the log twice as fast as it
// asked. The first are logged at info, the rest at debug with their
// number on the next. Each names its request's id.
func TestClientFaultsBoundedInTheLog(t *testing.T) {
	t.Parallel()
	logs := &observed.Logs{}
	h := newHarness(t, harnessOptions{cfg: Config{Logger: slog.New(logs)}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	srv := httptest.NewServer(Instrument(h.server, slog.New(logs), nil))
	t.Cleanup(srv.Close)

	paths := []string{
		"/nope.example/a/b/index.json",       // a host not allowed
		"/" + originHost + "/a/b/index.json", // a provider the origin does not have
		providerPath("9.9.9.json"),           // a version it does not have
		providerPath("bad.json"),             // not a version
		"/%00/a/b/index.json",                // not a host
		"/registry/" + originHost + "/v1/providers/a/b/versions",
		modBase + "a/b/c/1.0.0/download",
		"/not/a/mirror/path",                        // no route serves it
		"/" + strings.Repeat("a", MaxRequestPath+1), // longer than any door serves
	}
	const n = 200
	for i := range n {
		method := http.MethodGet
		if i%5 == 0 {
			method = http.MethodHead
		}
		req, err := http.NewRequest(method, srv.URL+paths[i%len(paths)], nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Request-Id", fmt.Sprintf("fault-%d", i))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Fatalf("%s %s: status %d, want a client error", method, req.URL.Path, resp.StatusCode)
		}
	}
	access, failedInfo, failedDebug := 0, 0, 0
	ids := map[string]bool{} // the request ids of the "request failed" lines
	for _, r := range logs.Records() {
		if r.Message == "request failed" {
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "request_id" {
					ids[a.Value.String()] = true
				}
				return true
			})
		}
		switch {
		case r.Message == "request" && r.Level == slog.LevelInfo:
			access++
		case r.Message == "request failed" && r.Level == slog.LevelInfo:
			failedInfo++
		case r.Message == "request failed" && r.Level == slog.LevelDebug:
			failedDebug++
		case r.Level >= slog.LevelInfo:
			t.Errorf("logged at %v: %s", r.Level, r.Message)
		}
	}
	if access != n {
		t.Errorf("%d access-log lines, want one per request (%d)", access, n)
	}
	// The burst, and what the rate lets through while the loop runs
	// (one every 10 seconds).
	if failedInfo == 0 || failedInfo > faultBurst+10 {
		t.Errorf("%d \"request failed\" lines at info for %d requests, want at least one and at most %d", failedInfo, n, faultBurst+10)
	}
	if failedInfo+failedDebug != n {
		t.Errorf("%d \"request failed\" lines in all, want one per request (%d)", failedInfo+failedDebug, n)
	}
	// Each names the request id its client was sent (X-Request-Id), as
	// the access log does, so that the error is found by that id.
	for i := range n {
		if !ids[fmt.Sprintf("fault-%d", i)] {
			t.Errorf("no \"request failed\" line with request_id fault-%d (its X-Request-Id); %d lines name one", i, len(ids))
			break
		}
	}
}

// While an origin is down, every request for what the mirror has not
// cached fails with the origin's trouble: the first are logged at warn,
// the rest at debug, so that clients asking in a loop (CI jobs retrying,
// or a stranger) do not grow the log by a warning a request; the circuit
// breaker's own lines say that the origin is down.
func TestOriginFaultsBoundedInTheLog(t *testing.T) {
	t.Parallel()
	logs := &observed.Logs{}
	h := newHarness(t, harnessOptions{cfg: Config{Logger: slog.New(logs)}})
	h.origin.SetDown(http.StatusServiceUnavailable)
	srv := httptest.NewServer(Instrument(h.server, slog.New(logs), nil))
	t.Cleanup(srv.Close)
	const n = 200
	for i := range n {
		resp, err := srv.Client().Get(srv.URL + providerPath("index.json"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 500 || resp.StatusCode == http.StatusInternalServerError {
			t.Fatalf("request %d: status %d, want the origin's trouble", i, resp.StatusCode)
		}
	}
	warned, other := 0, map[string]int{}
	for _, r := range logs.Records() {
		switch {
		case r.Message == "request failed" && r.Level >= slog.LevelWarn:
			warned++
		case r.Level >= slog.LevelWarn:
			other[r.Message]++
		}
	}
	if warned == 0 || warned > faultBurst+10 {
		t.Errorf("%d \"request failed\" lines at warn for %d requests, want at least one and at most %d", warned, n, faultBurst+10)
	}
	for msg, count := range other {
		if count > 10 {
			t.Errorf("%q logged %d times at warn or above for %d requests", msg, count, n)
		}
	}
}

// While an origin is down, a cached version list served stale to every
// request logs the first few times at warn, not once a request.
func TestStaleListsBoundedInTheLog(t *testing.T) {
	t.Parallel()
	logs := &observed.Logs{}
	h := newHarness(t, harnessOptions{cfg: Config{Logger: slog.New(logs)}, engine: mirror.Config{Logger: slog.New(logs), VersionsTTL: 1}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.AddTarball("net.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("#")}))
	h.origin.AddModule("acme", "net", "aws", "1.0.0", h.origin.TarballURL("net.tar.gz"))
	srv := httptest.NewServer(Instrument(h.server, slog.New(logs), nil))
	t.Cleanup(srv.Close)
	paths := []string{providerPath("index.json"), registryPath("versions"), modBase + "acme/net/aws/versions"}
	get := func(path string) int {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range paths {
		if code := get(p); code != http.StatusOK {
			t.Fatalf("warm-up %s: %d", p, code)
		}
	}
	h.origin.SetDown(http.StatusServiceUnavailable)
	const n = 200
	for i := range n {
		if code := get(paths[i%len(paths)]); code != http.StatusOK {
			t.Fatalf("%s, origin down: %d, want the stale list", paths[i%len(paths)], code)
		}
	}
	byMsg := map[string]int{}
	for _, r := range logs.Records() {
		if r.Level >= slog.LevelWarn {
			byMsg[r.Message]++
		}
	}
	for msg, count := range byMsg {
		if count > 30 {
			t.Errorf("%q logged %d times at warn or above for %d requests", msg, count, n)
		}
	}
}

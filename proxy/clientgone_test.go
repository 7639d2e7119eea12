package proxy

import (
	"log/slog"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// A client that goes away while the mirror waits for the origin (on the
// network mirror's, the provider registry's and the module registry's
// routes) is not a server error: the request is counted with its own code, 499, and its
// failure is logged at debug, not as an error that pages someone.
func TestClientGoneWhileWaitingForOrigin(t *testing.T) {
	t.Parallel()
	logs := &observed.Logs{}
	h := newHarness(t, harnessOptions{cfg: Config{Logger: slog.New(logs)}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.AddTarball("net.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("#")}))
	h.origin.AddModule("acme", "net", "aws", "1.0.0", h.origin.TarballURL("net.tar.gz"))
	// The origin answers much later than the client gives up (at once).
	h.origin.SetLatency(time.Second)
	obs := &observed.Requests{}
	handler := Instrument(h.server, slog.New(logs), obs)

	paths := []string{providerPath("index.json"), providerPath("1.0.0.json"), archivePath("1.0.0", "linux_amd64"),
		registryPath("versions"), registryPath("1.0.0/download/linux/amd64"),
		modBase + "acme/net/aws/versions", modBase + "acme/net/aws/1.0.0/download"}
	for i, code := range observed.AskGone(handler, paths) {
		if code != httperr.StatusClientClosedRequest {
			t.Errorf("%s: status %d, want %d", paths[i], code, httperr.StatusClientClosedRequest)
		}
	}
	obs.Expect(t, paths, httperr.StatusClientClosedRequest)
	if level, ok := logs.LevelOf("request failed"); !ok || level != slog.LevelDebug {
		t.Errorf(`"request failed" logged at %v (logged: %v), want debug`, level, ok)
	}
	for _, r := range logs.AtLeast(slog.LevelError) {
		t.Errorf("logged at %v: %s", r.Level, r.Message)
	}
}

// A request whose client went away before it was answered (499) sent no
// byte of a body: the JSON error its handler wrote went to no one, and is
// not counted in tfmirror_http_response_bytes_total (nor the access log's
// bytes) as if it had been served.
func TestClientGoneCountsNoBytesSent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.SetLatency(time.Second)
	obs := &observed.Requests{}
	handler := Instrument(h.server, slog.New(&observed.Logs{}), obs)
	paths := []string{providerPath("index.json"), providerPath("1.0.0.json"), registryPath("versions")}
	for i, code := range observed.AskGone(handler, paths) {
		if code != httperr.StatusClientClosedRequest {
			t.Fatalf("%s: status %d, want %d", paths[i], code, httperr.StatusClientClosedRequest)
		}
	}
	seen := obs.Seen()
	if len(seen) != len(paths) {
		t.Fatalf("observed %d requests, want %d", len(seen), len(paths))
	}
	for i, r := range seen {
		if r.Bytes != 0 {
			t.Errorf("%s: answered 499 and counted with %d body bytes, want 0: nothing was sent", paths[i], r.Bytes)
		}
	}
}

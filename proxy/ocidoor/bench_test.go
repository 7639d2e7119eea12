package ocidoor

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// benchRig is a mirror with both front doors over a fake origin whose
// provider has 8 MiB archives, with version 1.0.0's OCI index built and
// its linux_amd64 archive cached.
func benchRig(b *testing.B) (http.Handler, string) {
	b.Helper()
	r := newRig(b, rigOptions{origin: fakeorigin.Options{ArchiveSize: 8 << 20}})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, fakeorigin.BenchPlatforms)
	h := r.http.Config.Handler
	resp := serve(b, h, "/v2/providers/"+originHost+"/acme/net/manifests/1.0.0")
	blob := "sha256:" + r.origin.SHA256("acme", "net", "1.0.0", "linux_amd64")
	serve(b, h, "/v2/providers/"+originHost+"/acme/net/blobs/"+blob)
	r.waitIdle()
	return h, resp.Header().Get("Docker-Content-Digest")
}

func serve(b *testing.B, h http.Handler, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	if w.Code != http.StatusOK {
		b.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	return w
}

// discardWriter is a ResponseWriter that keeps nothing of the body, so
// that a throughput figure is the mirror's, not a recorder's copying.
type discardWriter struct {
	h    http.Header
	code int
	n    int64
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func benchArchive(b *testing.B, path string) {
	h, _ := benchRig(b)
	req := httptest.NewRequest(http.MethodGet, path, nil)
	b.SetBytes(8 << 20)
	b.ReportAllocs()
	for b.Loop() {
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK || w.n != 8<<20 {
			b.Fatalf("status %d, %d bytes", w.code, w.n)
		}
	}
}

// BenchmarkWarmBlob and BenchmarkWarmNetworkMirrorArchive are a pair: the
// same cached 8 MiB archive through the OCI front door and the network
// mirror, in process.
func BenchmarkWarmBlob(b *testing.B) {
	benchArchive(b, "/v2/providers/"+originHost+"/acme/net/blobs/sha256:"+fakeBlob(b))
}

func BenchmarkWarmNetworkMirrorArchive(b *testing.B) {
	benchArchive(b, "/"+originHost+"/acme/net/terraform-provider-net_1.0.0_linux_amd64.zip")
}

// fakeBlob is the sha256 of the bench archive (the fake origin builds
// the same bytes for the same package and size every time).
func fakeBlob(b *testing.B) string {
	o, err := fakeorigin.Start(fakeorigin.Options{ArchiveSize: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	o.AddProvider("acme", "net", []string{"1.0.0"}, fakeorigin.BenchPlatforms)
	return o.SHA256("acme", "net", "1.0.0", "linux_amd64")
}

func benchDoc(b *testing.B, path func(indexDigest string) string) {
	h, d := benchRig(b)
	req := httptest.NewRequest(http.MethodGet, path(d), nil)
	b.ReportAllocs()
	for b.Loop() {
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
	_ = io.Discard
}

// BenchmarkWarmManifestByTag, BenchmarkWarmManifestByDigest and
// BenchmarkWarmVersionJSON compare a warm index (what OpenTofu resolves a
// tag to) with the network mirror's warm VERSION.json of the same version.
func BenchmarkWarmManifestByTag(b *testing.B) {
	benchDoc(b, func(string) string { return "/v2/providers/" + originHost + "/acme/net/manifests/1.0.0" })
}

func BenchmarkWarmManifestByDigest(b *testing.B) {
	benchDoc(b, func(d string) string { return "/v2/providers/" + originHost + "/acme/net/manifests/" + d })
}

func BenchmarkWarmVersionJSON(b *testing.B) {
	benchDoc(b, func(string) string { return "/" + originHost + "/acme/net/1.0.0.json" })
}

// BenchmarkWarmManifestPair is the warm manifest figure measured against
// the warm VERSION.json on the same mirror, in alternating rounds (each
// first in turn) of the same number of requests (about 200 ms each), so
// that other load on the machine, which only ever slows a round down,
// weighs on both alike. It reports the best round of each and the ratios
// manifest/VERSION.json, which should stay at or below 1. Its ns/op is
// the manifest by tag's; one run of it is the measurement, whatever b.N.
func BenchmarkWarmManifestPair(b *testing.B) {
	const rounds = 7
	h, digest := benchRig(b)
	paths := []string{
		"/" + originHost + "/acme/net/1.0.0.json",
		"/v2/providers/" + originHost + "/acme/net/manifests/1.0.0",
		"/v2/providers/" + originHost + "/acme/net/manifests/" + digest,
	}
	reqs := make([]*http.Request, len(paths))
	for i, p := range paths {
		reqs[i] = httptest.NewRequest(http.MethodGet, p, nil)
	}
	round := func(i, n int) time.Duration {
		start := time.Now()
		for range n {
			w := &discardWriter{h: http.Header{}}
			h.ServeHTTP(w, reqs[i])
			if w.code != http.StatusOK {
				b.Fatalf("GET %s: status %d", paths[i], w.code)
			}
		}
		return time.Since(start)
	}
	n := max(1, int(200*time.Millisecond/max(round(0, 2000)/2000, 1)))
	best := []float64{math.Inf(1), math.Inf(1), math.Inf(1)}
	for r := range rounds {
		for j := range reqs {
			i := (r + j) % len(reqs)
			best[i] = min(best[i], float64(round(i, n).Nanoseconds())/float64(n))
		}
	}
	b.ReportMetric(best[1], "ns/op")
	b.ReportMetric(best[0], "version-json-ns/op")
	b.ReportMetric(best[2], "by-digest-ns/op")
	b.ReportMetric(best[1]/best[0], "tag-ratio")
	b.ReportMetric(best[2]/best[0], "digest-ratio")
	b.Logf("VERSION.json %.0f ns/op, manifest by tag %.0f ns/op (ratio %.3f), by digest %.0f ns/op (ratio %.3f); best of %d rounds of %d requests",
		best[0], best[1], best[1]/best[0], best[2], best[2]/best[0], rounds, n)
}

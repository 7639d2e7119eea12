package ocidoor

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tfmirror/tfmirror/internal/fakeorigin"
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

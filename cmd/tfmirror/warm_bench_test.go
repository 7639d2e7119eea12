package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tfmirror/tfmirror/internal/fakeorigin"
)

// benchHandler returns the handler `tfmirror serve` serves (router,
// authorization middleware, access log in JSON at info level, metrics)
// in front of a fake origin whose provider has 40 versions for 6
// platforms, as in figure 2 of BENCHMARKS.md, and the provider's path.
func benchHandler(b *testing.B) (http.Handler, string) {
	b.Helper()
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: []string{tfRegistry}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(origin.Close)
	origin.AddProvider("hashicorp", "random", fakeorigin.BenchVersions(), fakeorigin.BenchPlatforms)
	cfg, err := parseServeFlags([]string{
		"--data-dir", b.TempDir(),
		"--allowed-origins", tfRegistry,
		"--allow-private-origins",
		"--insecure-http", // the handler is the same; TLS is the server's
	}, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	logger, err := newLogger(cfg.LogFormat, cfg.LogLevel, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	m, err := newServer(cfg, logger, overrides{dialContext: routeRegistryTo(origin), rootCAs: origin.CertPool()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.shutdown(context.Background()) })
	return m.handler, "/" + tfRegistry + "/hashicorp/random/"
}

// discardWriter is a ResponseWriter that keeps only the status, reusing
// its header map, so that the benchmark counts the handler's allocations
// and not the recorder's.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}

// benchServe requests path once to warm the cache, then in a loop, with
// the headers Go's HTTP client sends.
func benchServe(b *testing.B, path string) {
	h, base := benchHandler(b)
	req := httptest.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("User-Agent", "Go-http-client/1.1")
	req.Header.Set("Accept-Encoding", "gzip")
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, req)
	if w.status != http.StatusOK {
		b.Fatalf("status %d", w.status)
	}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.status, w.n = 0, 0
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK || w.n == 0 {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
}

// BenchmarkServeWarmIndexJSON measures a cached index.json through the
// whole handler stack of `tfmirror serve`, without the network.
func BenchmarkServeWarmIndexJSON(b *testing.B) { benchServe(b, "index.json") }

// BenchmarkServeWarmVersionJSON measures a cached VERSION.json through the
// whole handler stack of `tfmirror serve`, without the network.
func BenchmarkServeWarmVersionJSON(b *testing.B) { benchServe(b, "4.9.0.json") }

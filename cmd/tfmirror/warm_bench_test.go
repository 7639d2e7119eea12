package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// benchHandler returns the handler `tfmirror serve` serves (router,
// authorization middleware, access log in JSON at info level, metrics)
// in front of a fake origin whose provider has 40 versions for 6
// platforms, as in figure 2 of BENCHMARKS.md, and the provider's path.
// With withPolicy, the package policy of benchPolicy is in force and
// every version was signed a year ago: each is judged on every answer,
// age gate included, and all are served.
func benchHandler(b *testing.B, withPolicy bool) (http.Handler, string) {
	b.Helper()
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: []string{tfRegistry}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(origin.Close)
	origin.AddProvider("hashicorp", "random", fakeorigin.BenchVersions(), fakeorigin.BenchPlatforms)
	for _, v := range fakeorigin.BenchVersions() {
		origin.SetSignedAt("hashicorp", "random", v, time.Now().Add(-365*24*time.Hour))
	}
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
	if withPolicy {
		pol, diags := policy.Decode(benchPolicy(b))
		if diags.HasErrors() || pol.Len() != 50 {
			b.Fatalf("bench policy: %d rules, %v", pol.Len(), diags)
		}
		m.engine.SetPolicy(pol)
	}
	return m.handler, "/" + tfRegistry + "/hashicorp/random/"
}

// benchPolicy is a policy block's body of 50 rules of every kind, a
// minimum release age and deny_version blocks among them applying to the
// benchmark's provider (none holds one of its versions).
func benchPolicy(b *testing.B) hcl.Body {
	var src strings.Builder
	src.WriteString("minimum_release_age = \"72h\"\nallow = [\n")
	for i := range 20 {
		fmt.Fprintf(&src, "  \"registry.terraform.io/ns%d/*\",\n", i)
	}
	src.WriteString("  \"registry.terraform.io/hashicorp/*\",\n  \"*/acme/*\",\n]\ndeny = [\n")
	for i := range 10 {
		fmt.Fprintf(&src, "  \"registry.terraform.io/hashicorp/deny%d\",\n", i)
	}
	src.WriteString("]\nrelease_age_exemptions = [\"registry.terraform.io/ns1/*\", \"registry.terraform.io/ns2/*\"]\n")
	for i := range 10 {
		fmt.Fprintf(&src, "deny_version \"registry.terraform.io/hashicorp/*\" {\n  versions = \"= 0.%d.99\"\n  reason = \"CVE\"\n}\n", i)
	}
	for i := range 5 {
		fmt.Fprintf(&src, "release_age \"registry.terraform.io/ns%d/*\" {\n  minimum = \"24h\"\n}\n", i+3)
	}
	f, diags := hclsyntax.ParseConfig([]byte(src.String()), "bench.hcl", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	return f.Body
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
func benchServe(b *testing.B, path string, withPolicy bool) {
	h, base := benchHandler(b, withPolicy)
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
func BenchmarkServeWarmIndexJSON(b *testing.B) { benchServe(b, "index.json", false) }

// BenchmarkServeWarmIndexJSONPolicy is BenchmarkServeWarmIndexJSON with a
// package policy of 50 rules judging every version.
func BenchmarkServeWarmIndexJSONPolicy(b *testing.B) { benchServe(b, "index.json", true) }

// BenchmarkServeWarmVersionJSON measures a cached VERSION.json through the
// whole handler stack of `tfmirror serve`, without the network.
func BenchmarkServeWarmVersionJSON(b *testing.B) { benchServe(b, "4.9.0.json", false) }

// BenchmarkServeWarmVersionJSONPolicy is BenchmarkServeWarmVersionJSON
// with a package policy of 50 rules.
func BenchmarkServeWarmVersionJSONPolicy(b *testing.B) { benchServe(b, "4.9.0.json", true) }

package proxy

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// benchServer is a mirror in front of a fake origin whose provider has 40
// versions for 6 platforms, with its metadata already cached.
func benchServer(b *testing.B) *Server { return benchServerWith(b, nil) }

// benchServerWith is benchServer with the package policy pol.
func benchServerWith(b *testing.B, pol *policy.Policy) *Server {
	b.Helper()
	origin := enginetest.StartOrigin(b, fakeorigin.Options{})
	origin.AddProvider(ns, typ, fakeorigin.BenchVersions(), fakeorigin.BenchPlatforms)
	if pol != nil {
		// Released a year ago: the minimum release age holds none back.
		for _, v := range fakeorigin.BenchVersions() {
			origin.SetSignedAt(ns, typ, v, time.Now().AddDate(-1, 0, 0))
		}
	}
	store := enginetest.OpenStore(b, "", cache.Options{})
	b.Cleanup(func() { store.Close() })
	engine, err := mirror.New(mirror.Config{AllowedOrigins: []string{originHost}, Logger: slog.New(slog.DiscardHandler)},
		enginetest.OriginClient(b, origin), store)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { engine.Close() })
	engine.SetPolicy(pol)
	srv, err := New(Config{Logger: slog.New(slog.DiscardHandler)}, packagesOf(b, engine))
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

func benchGet(b *testing.B, srv *Server, path string) {
	b.Helper()
	req := warm(b, srv, path)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}

// warm answers path once, so that what follows is warm, and returns the
// request.
func warm(b *testing.B, srv *Server, path string) *http.Request {
	b.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
	return req
}

// BenchmarkWarmIndexJSON measures a cached index.json, without the network.
func BenchmarkWarmIndexJSON(b *testing.B) { benchGet(b, benchServer(b), providerPath("index.json")) }

// BenchmarkWarmVersionJSON measures a cached VERSION.json, without the network.
func BenchmarkWarmVersionJSON(b *testing.B) { benchGet(b, benchServer(b), providerPath("4.9.0.json")) }

// benchPolicy is a package policy of 50 rules of every kind, as an
// operator might write it, that applies to the benchmarks' provider: its
// address is allowed, one of its versions denied (4.8.0, left out of
// index.json), and a minimum release age applies to it.
func benchPolicy(b *testing.B) *policy.Policy {
	b.Helper()
	var src strings.Builder
	src.WriteString("allow = [\n  \"" + originHost + "/" + ns + "/*\",\n")
	for i := range 19 {
		fmt.Fprintf(&src, "  \"registry.example.test/team%d/*\",\n", i)
	}
	src.WriteString("]\ndeny = [\n")
	for i := range 10 {
		fmt.Fprintf(&src, "  \"%s/%s/legacy%d\",\n", originHost, ns, i)
	}
	src.WriteString("]\nminimum_release_age = \"72h\"\nrelease_age_exemptions = [\"registry.example.test/team0/*\", \"registry.example.test/team1/*\"]\n")
	for i := range 17 {
		addr := fmt.Sprintf("registry.example.test/team%d/tool", i)
		if i == 0 {
			addr = originHost + "/" + ns + "/" + typ
		}
		fmt.Fprintf(&src, "deny_version %q {\n  versions = \"= 4.8.0\"\n  reason   = \"CVE-2026-%04d\"\n}\n", addr, i)
	}
	pol := enginetest.DecodePolicy(b, src.String())
	if pol.Len() != 50 {
		b.Fatalf("the policy has %d rules, want 50", pol.Len())
	}
	return pol
}

// BenchmarkWarmPolicy measures warm index.json and VERSION.json with a
// package policy of 50 rules and with none, on two mirrors built alike,
// as served (from the hot path: the kept answer ends when the policy
// changes or a held version's gate is reached) and with every request
// answered by the engine (/engine: the policy applied to each),
// in alternating rounds (each first in turn) of the same number of requests (about 200 ms
// each), and reports the best round of each (other load only ever slows
// a round down) and their ratio, which should stay within 1.05. Its
// ns/op is the figure with the policy; one run of it is the measurement,
// whatever b.N.
func BenchmarkWarmPolicy(b *testing.B) {
	const rounds = 7
	for _, doc := range []struct {
		name, path string
		hot        bool // answered from the hot path, else by the engine each time
	}{
		{"index.json", providerPath("index.json"), true},
		{"VERSION.json", providerPath("4.9.0.json"), true},
		{"index.json/engine", providerPath("index.json"), false},
		{"VERSION.json/engine", providerPath("4.9.0.json"), false},
	} {
		b.Run(doc.name, func(b *testing.B) {
			servers := []*Server{benchServerWith(b, nil), benchServerWith(b, benchPolicy(b))}
			if !doc.hot {
				for _, srv := range servers {
					srv.hot = nil // every request asks the engine, which applies the policy
				}
			}
			reqs := []*http.Request{warm(b, servers[0], doc.path), warm(b, servers[1], doc.path)}
			if doc.path == providerPath("index.json") {
				w := httptest.NewRecorder()
				servers[1].ServeHTTP(w, reqs[1])
				if strings.Contains(w.Body.String(), "4.8.0") || !strings.Contains(w.Body.String(), "4.9.0") {
					b.Fatalf("index.json under the policy: %s", w.Body)
				}
			}
			round := func(i, n int) time.Duration {
				start := time.Now()
				for range n {
					w := httptest.NewRecorder()
					servers[i].ServeHTTP(w, reqs[i])
					if w.Code != http.StatusOK {
						b.Fatalf("status %d", w.Code)
					}
				}
				return time.Since(start)
			}
			n := max(1, int(200*time.Millisecond/max(round(0, 2000)/2000, 1)))
			best := []float64{math.Inf(1), math.Inf(1)}
			for r := range rounds {
				for j := range servers {
					i := (r + j) % 2 // each goes first in turn
					best[i] = min(best[i], float64(round(i, n).Nanoseconds())/float64(n))
				}
			}
			b.ReportMetric(best[1], "ns/op")
			b.ReportMetric(best[0], "none-ns/op")
			b.ReportMetric(best[1]/best[0], "ratio")
			b.Logf("%s: no policy %.0f ns/op, 50-rule policy %.0f ns/op, ratio %.3f (best of %d rounds of %d requests)",
				doc.name, best[0], best[1], best[1]/best[0], rounds, n)
		})
	}
}

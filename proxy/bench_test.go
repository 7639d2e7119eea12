package proxy

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/internal/enginetest"
	"github.com/tfmirror/tfmirror/internal/fakeorigin"
	"github.com/tfmirror/tfmirror/mirror"
)

// benchServer is a mirror in front of a fake origin whose provider has 40
// versions for 6 platforms, with its metadata already cached.
func benchServer(b *testing.B) *Server {
	b.Helper()
	origin := enginetest.StartOrigin(b, fakeorigin.Options{})
	origin.AddProvider(ns, typ, fakeorigin.BenchVersions(), fakeorigin.BenchPlatforms)
	store := enginetest.OpenStore(b, "", cache.Options{})
	b.Cleanup(func() { store.Close() })
	engine, err := mirror.New(mirror.Config{AllowedOrigins: []string{originHost}, Logger: slog.New(slog.DiscardHandler)},
		enginetest.OriginClient(b, origin), store)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { engine.Close() })
	srv, err := New(Config{Logger: slog.New(slog.DiscardHandler)}, engine)
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

func benchGet(b *testing.B, srv *Server, path string) {
	b.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	// Warm the cache.
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}

// BenchmarkWarmIndexJSON measures a cached index.json, without the network.
func BenchmarkWarmIndexJSON(b *testing.B) { benchGet(b, benchServer(b), providerPath("index.json")) }

// BenchmarkWarmVersionJSON measures a cached VERSION.json, without the network.
func BenchmarkWarmVersionJSON(b *testing.B) { benchGet(b, benchServer(b), providerPath("4.9.0.json")) }

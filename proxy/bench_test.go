package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/internal/fakeorigin"
	"github.com/tfmirror/tfmirror/mirror"
)

// benchServer is a mirror in front of a fake origin whose provider has 40
// versions for 6 platforms, with its metadata already cached.
func benchServer(b *testing.B) *Server {
	b.Helper()
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: []string{originHost}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(origin.Close)
	var vs []string
	for i := range 40 {
		vs = append(vs, fmt.Sprintf("%d.%d.0", 1+i/10, i%10))
	}
	origin.AddProvider(ns, typ, vs, []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64", "windows_amd64", "freebsd_amd64"})
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	var d net.Dialer
	client, err := discovery.New(discovery.Config{
		AllowPrivate: true,
		RootCAs:      origin.CertPool(),
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, origin.Addr)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	engine, err := mirror.New(mirror.Config{AllowedOrigins: []string{originHost}, Logger: slog.New(slog.DiscardHandler)}, client, store)
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

// Package enginetest holds what the tests of the pull-through engine
// (package mirror) and of its front doors (package proxy) both set up: a
// fake origin registry on loopback, a cache, an origin client that sends
// the registry's host name to that origin, a test logger, and waits for
// archive fetches to end (through a Waiter: mirror.WaitIdle, which the
// engine offers test rigs only). It imports neither mirror nor proxy, so
// that mirror's own tests can use it. Tests only: the shipped binary
// links none of it.
package enginetest

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// OriginHost is the provider host the tests use; its name resolves, for
// the origin client of OriginClient only, to the fake origin.
const OriginHost = "registry.terraform.io"

// StartOrigin starts a fake origin (serving OriginHost unless opts names
// other hosts), closed when the test ends.
func StartOrigin(t testing.TB, opts fakeorigin.Options) *fakeorigin.Origin {
	t.Helper()
	if opts.Hostnames == nil {
		opts.Hostnames = []string{OriginHost}
	}
	origin, err := fakeorigin.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	return origin
}

// OpenStore opens a cache in dir, or in memory when dir is "", with the
// further options opts, closed when the test ends (the caller may close
// it before).
func OpenStore(t testing.TB, dir string, opts cache.Options) *cache.Store {
	t.Helper()
	opts.Dir, opts.InMemory = dir, dir == ""
	store, err := cache.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() }) // closing twice is allowed
	return store
}

// ReleasesClient returns an origin client for the CLI releases stand-in
// o: o's host (returned too) its one allowed origin, o's certificate
// trusted, private addresses allowed, retries without the production
// backoff.
func ReleasesClient(t testing.TB, o *fakeorigin.Releases) (client *discovery.Client, host string) {
	t.Helper()
	u, err := url.Parse(o.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(o.CACertPEM)
	client, err = discovery.New(discovery.Config{AllowedOrigins: []string{u.Host}, AllowPrivate: true, RootCAs: pool,
		RetryBaseDelay: time.Millisecond, RetryMaxDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return client, u.Host
}

// OriginClient returns an origin client that trusts origin's certificate
// and connects to origin for every host name but loopback addresses
// (other test servers), private addresses allowed; mods change its
// configuration before it is made.
func OriginClient(t testing.TB, origin *fakeorigin.Origin, mods ...func(*discovery.Config)) *discovery.Client {
	t.Helper()
	var d net.Dialer
	cfg := discovery.Config{
		AllowPrivate: true,
		RootCAs:      origin.CertPool(),
		// Retries still happen, as many as by default, without the
		// production backoff (250 ms doubling) that tests would wait out.
		RetryBaseDelay: time.Millisecond,
		RetryMaxDelay:  5 * time.Millisecond,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err == nil && host != "127.0.0.1" && host != "localhost" {
				addr = origin.Addr
			}
			return d.DialContext(ctx, network, addr)
		},
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	client, err := discovery.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// Logger writes to the test's log, debug level and up.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Waiter returns when no origin fetch or archive download of an engine
// runs, or ctx is done: mirror.WaitIdle bound to the engine, which this
// package cannot name (mirror's own tests import it).
type Waiter func(ctx context.Context) error

// WaitIdle waits (30 s at most) until no archive fetch runs, by wait.
func WaitIdle(t testing.TB, wait Waiter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wait(ctx); err != nil {
		t.Fatalf("archive fetch did not end: %v", err)
	}
}

// WaitStored waits (30 s at most, asking every 10 ms) until store holds
// the archive with sha, whatever else the engine still does: for a test
// whose own client holds an archive open, which WaitIdle waits for too.
func WaitStored(t testing.TB, store *cache.Store, sha string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := store.StatBlob(sha)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("archive %s not cached after 30 s: %v", sha, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitCommitted waits until the fetches end, by wait, and checks that the
// archive with sha is in store.
func WaitCommitted(t testing.TB, wait Waiter, store *cache.Store, sha string) {
	t.Helper()
	WaitIdle(t, wait)
	if _, err := store.StatBlob(sha); err != nil {
		t.Fatalf("archive %s not cached: %v", sha, err)
	}
}

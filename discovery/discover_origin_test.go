package discovery

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// TestDiscoveryNotFoundIsNotRememberedForTheTTL: a host whose discovery
// document answered 404 is not remembered as "no registry"
// (docs/operations.md, "What the origin lacks": the next request asks
// again), and above all one 404 does not replace a registry the host
// served before: its providers are not answered 404 ("not a provider
// registry") for the whole DiscoveryTTL after one 404 of its
// /.well-known/terraform.json (a deployment, a CDN or a proxy's
// moment), while the host answers again.
func TestDiscoveryNotFoundIsNotRememberedForTheTTL(t *testing.T) {
	var missing atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc(wellKnown, func(w http.ResponseWriter, r *http.Request) {
		if missing.Load() {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, discoveryDoc("/v1/providers/"))
	})
	mux.HandleFunc(versionsPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, `{"versions":[{"version":"1.0.0"}]}`)
	})
	s := newTestServer(t, mux)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.DiscoveryTTL = time.Hour
		cfg.Now = clock.Now
	})
	ctx := context.Background()
	p := testProvider(s)

	if _, err := c.Versions(ctx, p); err != nil {
		t.Fatalf("first listing: %v", err)
	}
	// The TTL ends; the refresh of the discovery meets one 404.
	clock.Advance(61 * time.Minute)
	missing.Store(true)
	_, err := c.Versions(ctx, p)
	t.Logf("listing while the discovery document answers 404: %v", err)
	missing.Store(false)

	// Two minutes on, the host answers its discovery document again.
	clock.Advance(2 * time.Minute)
	if _, err := c.Versions(ctx, p); err != nil {
		t.Errorf("listing two minutes after one 404 of the discovery document, with the host answering again: %v", err)
		if errors.Is(err, ErrNoProviderService) {
			t.Errorf("the 404 is remembered: the host is taken for no registry until the TTL ends (%d discovery requests)", s.count(wellKnown))
		}
	}
}

// TestModuleOnlyRegistry: a registry whose discovery document lists
// modules.v1 and no providers.v1 (GitLab's Terraform module registry,
// a private module registry) serves its modules through the mirror: that
// it has no provider registry says nothing of its modules.
func TestModuleOnlyRegistry(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, `{"modules.v1": "/api/modules/v1/"}`)
	})
	mux.HandleFunc("GET /api/modules/v1/acme/vpc/aws/versions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, `{"modules":[{"source":"acme/vpc/aws","versions":[{"version":"1.0.0"}]}]}`)
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, nil)
	m := addrs.Module{Hostname: s.host, Namespace: "acme", Name: "vpc", System: "aws"}
	vs, err := c.ModuleVersions(context.Background(), m)
	if err != nil || len(vs) != 1 || vs[0] != "1.0.0" {
		t.Fatalf("ModuleVersions of a module-only registry = %v, %v; want [1.0.0]", vs, err)
	}
	if _, err := c.Versions(context.Background(), testProvider(s)); !errors.Is(err, ErrNoProviderService) {
		t.Errorf("Versions of a provider of a module-only registry: %v, want ErrNoProviderService", err)
	}
}

// TestDeadHostDiscoveryBounded: an allowed host that has never answered
// its discovery document (it times out, or answers 5xx) costs it a
// bounded number of attempts however many requests name it, at once or
// one after another: the circuit breaker opens after BreakerThreshold
// failed attempts and the requests after it fail fast, for the
// cooldown, rather than each trying again with its retries.
func TestDeadHostDiscoveryBounded(t *testing.T) {
	for name, fail := range map[string]func(http.ResponseWriter, *http.Request){
		"503": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
		"timeout": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc(wellKnown, fail)
			s := newTestServer(t, mux)
			c := newTestClient(t, s, func(cfg *Config) { cfg.RequestTimeout = 50 * time.Millisecond })
			p := testProvider(s)
			const requests = 20
			errs := make(chan error, requests)
			for range requests {
				go func() {
					_, err := c.Versions(context.Background(), p)
					errs <- err
				}()
			}
			for range requests {
				if err := <-errs; err == nil {
					t.Fatal("a listing of a host that never answered its discovery document")
				}
			}
			for range requests {
				if _, err := c.Versions(context.Background(), p); err == nil {
					t.Fatal("a listing of a host that never answered its discovery document")
				}
			}
			const bound = 5 // the default BreakerThreshold
			t.Logf("%d requests, half at once: %d discovery attempts", 2*requests, s.count(wellKnown))
			if n := s.count(wellKnown); n > bound {
				t.Errorf("%d requests, half at once, made %d discovery attempts, want at most %d", 2*requests, n, bound)
			}
		})
	}
}

package admin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// A sync asks the origin whatever the engine remembers it lacks: a
// provider and a module published since a client was told they do not
// exist are synced at once, while clients are still given the
// remembered answer until sync asked.
func TestSyncForgetsNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{engine: mirror.Config{NotFoundTTL: time.Hour}})
	a := h.newAPI(t, nil, nil, Options{})
	ctx := context.Background()
	p := addrs.Provider{Hostname: originHost, Namespace: "hashicorp", Type: "late"}
	m := addrs.Module{Hostname: originHost, Namespace: "acme", Name: "late", System: "aws"}
	for range 2 {
		if _, _, err := h.engine.Versions(ctx, p); !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("provider before it is published: %v, want not found", err)
		}
		if _, _, err := h.engine.Modules().ModuleVersions(ctx, m); !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("module before it is published: %v, want not found", err)
		}
	}
	h.origin.AddProvider("hashicorp", "late", []string{"1.0.0"}, []string{"linux_amd64"})
	h.origin.AddModule("acme", "late", "aws", "1.0.0", "https://"+h.origin.Addr+"/tarballs/late-1.0.0.tar.gz")
	if _, _, err := h.engine.Versions(ctx, p); !errors.Is(err, discovery.ErrNotFound) {
		t.Fatalf("a client within the period: %v, want the remembered not found", err)
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != 1 {
		t.Fatalf("the origin was asked %d times before the sync, want 1", n)
	}

	vs, err := a.Versions(ctx, p)
	if err != nil || len(vs) != 1 || vs[0].Version != "1.0.0" {
		t.Fatalf("sync's versions of the provider: %v, %v; want 1.0.0", vs, err)
	}
	mvs, err := a.ModuleVersions(ctx, m)
	if err != nil || len(mvs) != 1 || mvs[0] != "1.0.0" {
		t.Fatalf("sync's versions of the module: %v, %v; want 1.0.0", mvs, err)
	}
	// Clients find them too now.
	if _, _, err := h.engine.Versions(ctx, p); err != nil {
		t.Fatalf("a client after the sync: %v", err)
	}
	if e := h.engine.NotFound().Entries(originHost); e != 0 {
		t.Fatalf("%d answers remembered after the sync, want 0", e)
	}
}

package discovery

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// TestModuleSourceFailuresLeaveTheOriginsBreakerAlone: a module's source
// host is whatever host the module's download location names (on many
// registries, its publisher's choice), not the origin. An archive host
// that keeps failing must not open the origin's circuit breaker, which
// would make every request to the origin (its providers' and modules'
// versions, downloads and discovery) fail at once: Git sources already
// do not count (SourceHTTPClient), and archive sources must not either.
func TestModuleSourceFailuresLeaveTheOriginsBreakerAlone(t *testing.T) {
	origin := moduleServer(t)
	failing := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	c := newTestClient(t, origin, func(cfg *Config) { cfg.RootCAs.AddCert(failing.srv.Certificate()) })
	ctx := context.Background()
	m := addrs.Module{Hostname: origin.host, Namespace: "acme", Name: "vpc", System: "aws"}

	// A client asks twice for a module version whose archive host fails.
	for range 2 {
		if _, _, err := c.OpenSource(ctx, origin.host, failing.url("/pkg.tar.gz")); err == nil {
			t.Fatal("OpenSource of a failing source host succeeded")
		}
	}
	if st := c.Circuit(string(origin.host)).State; st != "closed" {
		t.Errorf("the origin's circuit breaker is %q after its module source host failed, want closed", st)
	}
	if _, err := c.ModuleVersions(ctx, m); err != nil {
		t.Errorf("the origin itself answers, but ModuleVersions = %v", err)
		if errors.Is(err, ErrCircuitOpen) {
			t.Errorf("(another host's failures opened the origin's circuit breaker)")
		}
	}
}

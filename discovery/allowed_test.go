package discovery

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// TestAllowedOriginsRefusedBeforeAnyConnection asks a client that allows
// only host A for providers of host B, which the dialer would route to the
// same server: every method must fail with ErrHostNotAllowed without a
// dial, a proxy decision (which may resolve the name) or a request, while
// host A keeps working through the same client.
func TestAllowedOriginsRefusedBeforeAnyConnection(t *testing.T) {
	s := newTestServer(t, registry(map[string]http.HandlerFunc{
		"/v1/providers/hashicorp/random/versions": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, `{"versions":[{"version":"1.0.0"}]}`)
		},
	}))
	const hostB = "registry.example.com"
	var dials, proxyCalls atomic.Int32
	inner := mapDialer(hostB)
	c := newTestClient(t, s, func(cfg *Config) {
		// Host A in another spelling: allowed hosts compare as svchost does.
		cfg.AllowedOrigins = []string{" " + string(s.host) + " "}
		cfg.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return inner(ctx, network, addr)
		}
		cfg.Proxy = func(*http.Request) (*url.URL, error) {
			proxyCalls.Add(1)
			return nil, nil
		}
	})
	ctx := context.Background()
	b := addrs.Provider{Hostname: svchost.Hostname(hostB), Namespace: "hashicorp", Type: "random"}
	sameServer := s.url("/releases/a.zip") // a download URL on an allowed host does not make B allowed
	calls := map[string]func() error{
		"Discover": func() error { _, err := c.Discover(ctx, b.Hostname); return err },
		"ProvidersURL": func() error {
			_, err := c.ProvidersURL(ctx, b.Hostname)
			return err
		},
		"Versions": func() error { _, err := c.Versions(ctx, b); return err },
		"Package": func() error {
			_, err := c.Package(ctx, b, "1.0.0", addrs.Platform{OS: "linux", Arch: "amd64"})
			return err
		},
		"FetchDocument": func() error { _, err := c.FetchDocument(ctx, b, sameServer, 0); return err },
		"FetchSums": func() error {
			_, _, err := c.FetchSums(ctx, b, &Package{SHASumsURL: sameServer, SHASumsSignatureURL: sameServer + ".sig"}, 0, 0)
			return err
		},
		"OpenArchive": func() error {
			body, _, err := c.OpenArchive(ctx, b, sameServer)
			if body != nil {
				body.Close()
			}
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrHostNotAllowed) {
			t.Errorf("%s for %s: err = %v, want ErrHostNotAllowed", name, hostB, err)
		}
		if err != nil && !strings.Contains(err.Error(), "allowed_origins") {
			t.Errorf("%s for %s: %q does not name the setting that allows a host", name, hostB, err)
		}
		var oe *OriginError
		if errors.As(err, &oe) {
			t.Errorf("%s: refusal %v must not be an origin failure", name, err)
		}
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d dials for a host that is not allowed", n)
	}
	if n := proxyCalls.Load(); n != 0 {
		t.Errorf("%d proxy decisions for a host that is not allowed", n)
	}
	if n := s.total(); n != 0 {
		t.Errorf("origin saw %d requests for a host that is not allowed: %v", n, s.hits)
	}
	if got := Outcome(calls["Versions"]()); got != "refused" {
		t.Errorf("Outcome = %q, want refused", got)
	}

	// The allowed host works through the same client.
	if _, err := c.Versions(ctx, testProvider(s)); err != nil {
		t.Fatalf("Versions for allowed host %s: %v", s.host, err)
	}
	if dials.Load() == 0 || s.total() == 0 {
		t.Fatalf("allowed host: %d dials, %d requests", dials.Load(), s.total())
	}
}

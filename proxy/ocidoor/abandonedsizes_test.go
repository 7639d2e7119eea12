package ocidoor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
)

// TestAbandonedSizeAsksBounded: a client that asks for the manifests of
// a provider's versions whose archives' sizes the origin does not state,
// and goes away at once, leaves at most lifetime.MaxAbandoned of the
// mirror's asks of their sizes under way, whatever the number of its
// requests: each ask went on for the origin timeout (two minutes) apart
// from the coalesced work's bound, 600 requests holding 1,800 origin
// requests open.
func TestAbandonedSizeAsksBounded(t *testing.T) {
	t.Parallel()
	const ns, typ, n = "acme", "many", 600
	r := newRig(t, rigOptions{})
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("1.0.%d", i)
	}
	r.origin.AddProvider(ns, typ, vs, []string{"linux_amd64", "darwin_arm64", "windows_amd64"})
	p := addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	for _, v := range vs {
		if _, err := r.engine.Package(context.Background(), p, versions.MustParseVersion(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	r.origin.SetLatency(time.Minute) // the origin answers long after the client gave up
	t.Cleanup(r.origin.Close)        // before the rig stops: the origin's requests end
	paths := make([]string, n)
	for i, v := range vs {
		paths[i] = fmt.Sprintf("/v2/providers/%s/%s/%s/manifests/%s", originHost, ns, typ, v)
	}
	observed.AskGone(r.server, paths)
	// The asks ended let their origin requests go.
	deadline := time.Now().Add(5 * time.Second)
	for {
		open := r.origin.Delayed()
		if open <= lifetime.MaxAbandoned {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d origin requests still open for %d manifest requests of clients gone, want at most %d", open, n, lifetime.MaxAbandoned)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

package records

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
)

// An origin's version list is read within the origin client's bounds (16
// MiB, a million JSON elements), which let one version list 100,000
// distinct protocols and as many platforms in a few MiB. A version keeps
// the first MaxProtocols and MaxPlatforms of them, in the origin's order,
// and the rest are reported as skipped; and merging them costs time in
// proportion to what was listed: compared each with every one kept
// before, they took minutes of a core at each refresh, and every request
// for the version went through all of them.
func TestTranslateVersionsBoundsWhatAVersionOffers(t *testing.T) {
	const n = 100_000
	protos := make([]string, n)
	pls := make([]addrs.Platform, n)
	for i := range n {
		protos[i] = strconv.Itoa(i)
		pls[i] = addrs.Platform{OS: "linux", Arch: "a" + strconv.Itoa(i)}
	}
	// The same version twice over: what the second brings is merged
	// with what the first did.
	infos := []discovery.VersionInfo{
		{Version: "1.0.0", Protocols: protos, Platforms: pls},
		{Version: "1.0.0", Protocols: protos, Platforms: pls},
	}
	type result struct {
		list                 *VersionList
		protocols, platforms int
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.list = TranslateVersions(infos, func(_ string, err error) {
			switch {
			case errors.Is(err, errTooManyProtocols):
				r.protocols++
			case errors.Is(err, errTooManyPlatforms):
				r.platforms++
			}
		})
		done <- r
	}()
	select {
	case r := <-done:
		if len(r.list.Versions) != 1 {
			t.Fatalf("got %d versions, want 1", len(r.list.Versions))
		}
		e := r.list.Versions[0]
		if len(e.Protocols) != MaxProtocols || len(e.Platforms) != MaxPlatforms {
			t.Fatalf("got %d protocols and %d platforms, want %d and %d", len(e.Protocols), len(e.Platforms), MaxProtocols, MaxPlatforms)
		}
		if e.Protocols[0] != "0" || e.Protocols[MaxProtocols-1] != strconv.Itoa(MaxProtocols-1) {
			t.Errorf("not the first protocols in the origin's order: first %q, last %q", e.Protocols[0], e.Protocols[MaxProtocols-1])
		}
		kept := map[string]bool{}
		for _, p := range e.Platforms {
			kept[p] = true
		}
		for i := range MaxPlatforms {
			if !kept[pls[i].String()] {
				t.Fatalf("platform %s, among the first %d the origin listed, not kept", pls[i], MaxPlatforms)
			}
		}
		if want := 2 * (n - MaxProtocols); r.protocols != want {
			t.Errorf("%d protocols reported skipped, want %d", r.protocols, want)
		}
		if want := 2 * (n - MaxPlatforms); r.platforms != want {
			t.Errorf("%d platforms reported skipped, want %d", r.platforms, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("translating a version list of %d protocols and platforms took more than 10s", n)
	}
}

package admin

import (
	"context"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// What the cache knows of a release is asked of one version in every
// spelling the doors accept: a module's "v1.1.0" is 1.1.0, a provider's
// "1.1" is 1.1.0, and each gives the answer of the canonical spelling.
func TestReleaseEverySpelling(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	o := h.origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# m\n")}))
	o.AddModule("acme", "vpc", "aws", "v1.1.0", o.TarballURL("m.tar.gz"))
	o.AddProvider("hashicorp", "random", []string{"1.1.0"}, []string{"linux_amd64"})
	ctx := context.Background()
	m, _ := addrs.ParseModule("registry.terraform.io/acme/vpc/aws")
	if _, _, err := h.engine.Modules().ModuleVersions(ctx, m); err != nil {
		t.Fatal(err)
	}
	a := h.newAPI(t, nil, nil, Options{})
	for _, c := range []struct {
		kind, addr string
		spellings  []string
	}{
		{"module", m.String(), []string{"1.1.0", "v1.1.0"}},
		{"provider", originHost + "/hashicorp/random", []string{"1.1.0", "1.1"}},
	} {
		var first KnownRelease
		for i, v := range c.spellings {
			got, err := a.Release(ctx, PolicyRequest{Kind: c.kind, Address: c.addr, Version: v, Window: 72 * time.Hour})
			if err != nil {
				t.Errorf("%s %s: %v", c.kind, v, err)
				continue
			}
			if i == 0 {
				first = got
			} else if got != first {
				t.Errorf("%s %s: %+v, but %s gives %+v", c.kind, v, got, c.spellings[0], first)
			}
		}
	}
}

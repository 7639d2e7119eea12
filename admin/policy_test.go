package admin

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/policy"
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

// Explain judges an address or a version by the policy in force now,
// through the socket as in process: the deciding rule and its reason, a
// version the policy lets through, and how many rules it has (none: no
// policy, everything allowed); a request that names no address is
// refused (400).
func TestExplainThroughSocket(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	a := h.newAPI(t, nil, nil, Options{})
	dataDir, post := socket(t, a)
	c, err := Dial(context.Background(), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	widget := originHost + "/acme/widget"
	got, err := c.Explain(ctx, PolicyRequest{Kind: "provider", Address: widget, Version: "1.0.0"})
	if err != nil || !got.Allowed || got.Rules != 0 || got.Detail != "" {
		t.Errorf("no policy: %+v, %v; want allowed by default", got, err)
	}
	h.engine.SetPolicy(enginetest.DecodePolicy(t, `deny_version "`+widget+`" {
  versions = "= 1.0.0"
  reason   = "broken release, use 1.0.1"
}
`))
	got, err = c.Explain(ctx, PolicyRequest{Kind: "provider", Address: widget, Version: "1.0"})
	if err != nil || got.Allowed || got.Rules != 1 || got.Rule != policy.RuleDenyVersion || got.Reason != "broken release, use 1.0.1" ||
		!strings.Contains(got.Detail, "policy.hcl:1") {
		t.Errorf("a denied version: %+v, %v", got, err)
	}
	ex := got.Explanation(policy.Provider, widget, "1.0.0").String()
	if !strings.Contains(ex, "refused (deny_version)") || !strings.Contains(ex, "reason:     broken release, use 1.0.1") {
		t.Errorf("as policy explain prints it:\n%s", ex)
	}
	if got, err := a.Explain(ctx, PolicyRequest{Kind: "provider", Address: widget, Version: "1.0.1"}); err != nil || !got.Allowed {
		t.Errorf("another version: %+v, %v", got, err)
	}
	if got, err := a.Explain(ctx, PolicyRequest{Kind: "provider", Address: widget}); err != nil || !got.Allowed || got.Rules != 1 {
		t.Errorf("the address: %+v, %v", got, err)
	}
	if code, body := post("/v1/policy/explain", `{"kind":"provider"}`); code != http.StatusBadRequest {
		t.Errorf("no address: %d %s", code, body)
	}
}

// TestExplainClientOfAnEarlierServe: `tfmirror policy explain` of this
// release asking a serve of 2.0.0 (the binary replaced, the serve not yet
// restarted), which has no explain route, is told what the 404 means, as
// the CLI release calls are, not "404 page not found".
func TestExplainClientOfAnEarlierServe(t *testing.T) {
	c := dialEarlierServe(t)
	_, err := c.Explain(context.Background(), PolicyRequest{Kind: "provider", Address: "registry.terraform.io/hashicorp/null", Version: "3.2.0"})
	if err == nil || !strings.Contains(err.Error(), "does not explain by its package policy (is it of an earlier release? restart it)") {
		t.Fatalf("explain from an earlier serve: %v", err)
	}
}

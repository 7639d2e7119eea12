package retention

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// The policy decides what is served, retention what is kept: a version
// the policy denies takes no place among the --keep-versions newest, a
// denied version newer than the oldest kept one stays (it may be allowed
// later), and a pinned denied version is kept.
func TestRetentionKeepVersionsSkipsRefused(t *testing.T) {
	t.Parallel()
	p := addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	f, diags := hclsyntax.ParseConfig([]byte(`
deny_version "`+p.String()+`" {
  versions = ["5.0.0", "3.0.0", "1.0.0", "0.5.0"]
  reason   = "broken"
}
`), "mirror.hcl", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	pol, diags := policy.Decode(f.Body)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	now := time.Now()
	refused := func(kind, address, version string) bool {
		return !pol.Version(policy.Kind(kind), address, version, policy.Release{}, now).Allowed
	}
	h := newHarness(t, harnessOptions{
		origin: fakeorigin.Options{ArchiveSize: 1 << 10},
		ret:    Config{KeepVersions: 2, Interval: -1, Refused: refused, Pins: pinVersions(t, p.String(), "1.0.0")},
	})
	all := []string{"0.5.0", "0.9.0", "1.0.0", "2.0.0", "3.0.0", "4.0.0", "5.0.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...)
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removalNames(done), []string{"0.5.0 keep-versions", "0.9.0 keep-versions"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v: 4.0.0 and 2.0.0 are the two newest served; 5.0.0 and 3.0.0 are denied but newer; 1.0.0 is pinned", got, want)
	}
	for _, v := range []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0", "5.0.0"} {
		if !h.isCached(v) {
			t.Errorf("%s was removed", v)
		}
	}
}

// Terraform and OpenTofu pick a prerelease only when a configuration
// names it exactly: the newest N kept are the newest N releases, and a
// prerelease tried once does not push a release the teams use out of
// the cache. A prerelease newer than the oldest release kept stays; one
// older goes. A product with fewer releases than N keeps its newest
// prereleases in their place.
func TestRetentionKeepVersionsCountsReleases(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{
		origin: fakeorigin.Options{ArchiveSize: 1 << 10},
		ret:    Config{KeepVersions: 2, Interval: -1},
	})
	all := []string{"0.9.0", "1.0.0", "2.0.0-rc1", "2.0.0", "3.0.0", "4.0.0-beta1", "4.0.0-rc1"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...)
	// Another provider with prereleases only.
	const early = "early"
	h.origin.AddProvider(ns, early, []string{"0.1.0-alpha1", "0.1.0-alpha2", "0.1.0-alpha3"}, []string{"linux_amd64"})
	h.readAllOf(early, "0.1.0-alpha1", "0.1.0-alpha2", "0.1.0-alpha3")
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rm := range done {
		got = append(got, rm.Address[strings.LastIndex(rm.Address, "/")+1:]+" "+rm.Version)
	}
	want := []string{early + " 0.1.0-alpha1", typ + " 0.9.0", typ + " 1.0.0", typ + " 2.0.0-rc1"}
	slices.Sort(got)
	slices.Sort(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v: 3.0.0 and 2.0.0 are the two newest releases, the 4.0.0 prereleases are newer; of %s, the two newest prereleases stay", got, want, early)
	}
}

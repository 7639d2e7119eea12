package main

import (
	"fmt"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestStrangerInputAddsNoMetricSeries: what a client sends (hosts,
// namespaces, types, versions, module and OCI names, CLI products and
// versions, other paths, User-Agent and request ids) is never a metric
// label: rounds of requests that name only things never asked for before,
// through the mirror as serve wires it, add no series once the first
// round has seen each kind of answer.
func TestStrangerInputAddsNoMetricSeries(t *testing.T) {
	t.Parallel()
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"1.0.0"}, []string{"linux_amd64"})
	tm := startMirror(t, origin, t.TempDir(), nil, "--insecure-http")
	series := func() int {
		mfs, err := tm.m.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			n += len(mf.GetMetric())
		}
		return n
	}
	round := func(r int) {
		for i := range 10 {
			u := fmt.Sprintf("%d-%d", r, i)
			for _, path := range []string{
				"made-up-" + u + ".example/ns/type/index.json",
				tfRegistry + "/ns-" + u + "/type/index.json",
				tfRegistry + "/hashicorp/random/9." + u[:1] + "." + u[2:] + ".json",
				tfRegistry + "/hashicorp/random/terraform-provider-random_1.0.0_os" + u + "_amd64.zip",
				"registry/" + tfRegistry + "/v1/providers/ns-" + u + "/type/versions",
				"registry/" + tfRegistry + "/v1/modules/ns-" + u + "/name/aws/versions",
				"registry/" + tfRegistry + "/v1/modules/ns-" + u + "/name/aws/1.0." + u[2:] + "/download",
				"v2/providers/" + tfRegistry + "/ns-" + u + "/type/manifests/1.0.0",
				"v2/made-up-" + u + "/blobs/sha256:" + fmt.Sprintf("%064d", r*100+i),
				"releases/hashicorp/product-" + u + "/index.json",
				"releases/publisher-" + u + "/terraform/index.json",
				"elsewhere-" + u + "/a/b?q=" + u,
				"?format=json&prefix=" + u + "&limit=" + fmt.Sprint(i+1),
			} {
				if _, _, err := tm.get(path, "User-Agent", "agent-"+u, "X-Request-Id", "req-"+u); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
			}
		}
	}
	round(0)
	first := series()
	for r := 1; r < 4; r++ {
		round(r)
	}
	if n := series(); n != first {
		t.Errorf("%d metric series after three rounds of names never seen, %d after the first: a client's input is a label", n, first)
	}
}

package admin

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/retention"
)

// manyRemovals is a pruner whose every prune removes n versions of 14
// platforms each: what the retention rules remove of a large cache.
type manyRemovals struct{ n int }

func (p manyRemovals) Prune(context.Context, retention.PruneRequest) ([]retention.Removal, error) {
	out := make([]retention.Removal, p.n)
	for i := range out {
		arcs := make([]string, 14)
		for j := range arcs {
			arcs[j] = fmt.Sprintf("%064x", i*100+j)
		}
		out[i] = retention.Removal{Kind: "provider", Address: fmt.Sprintf("registry.terraform.io/acme/provider%05d", i/10),
			Version: fmt.Sprintf("1.0.%d", i%10), Rule: retention.RuleKeepVersions, Archives: arcs, Bytes: 1 << 20}
	}
	return out, nil
}

// TestLargeAnswerThroughTheSocket: a prune of a large cache through the
// socket (its answer, every removal, is tens of MiB) reaches the client
// whole: the command lists what was removed (or, dry run, what would be)
// as when it opens the data directory itself, instead of failing on an
// answer cut short after the serve did the work. An answer past the
// client's bound is an error that says so.
func TestLargeAnswerThroughTheSocket(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	const n = 20000 // about 22 MiB of JSON
	a, err := New(h.engine, h.packages(t), manyRemovals{n}, nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dataDir, _ := socket(t, a)
	c, err := Dial(context.Background(), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Prune(context.Background(), PruneRequest{DryRun: true})
	if err != nil {
		t.Fatalf("prune of %d versions through the socket: %v", n, err)
	}
	if res.Versions != n || len(res.Removals) != n || res.Bytes != n<<20 || res.Removals[n-1].Version != "1.0.9" {
		t.Fatalf("prune through the socket: %d versions, %d listed, %d bytes", res.Versions, len(res.Removals), res.Bytes)
	}

	defer func(was int64) { maxAnswer = was }(maxAnswer)
	maxAnswer = 1 << 20
	_, err = c.Prune(context.Background(), PruneRequest{DryRun: true})
	if err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") || strings.Contains(err.Error(), "JSON") {
		t.Fatalf("an answer past the client's bound: %v", err)
	}
}

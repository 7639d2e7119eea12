package metrics

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// tfmirror_origin_circuit_open is read from Options.Circuits at each
// scrape, for the allowed origins and those a breaker told of; without
// it, it is what CircuitOpen last said.
func TestCircuitGaugeReadAtScrape(t *testing.T) {
	var failsFast atomic.Bool
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{Version: "test", Origins: []string{"registry.terraform.io"},
		Circuits: func(string) bool { return failsFast.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	want := func(when string, v string) {
		t.Helper()
		exp := "# HELP tfmirror_origin_circuit_open " + circuitHelp + "\n# TYPE tfmirror_origin_circuit_open gauge\n" +
			`tfmirror_origin_circuit_open{origin="registry.terraform.io"} ` + v + "\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "tfmirror_origin_circuit_open"); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	want("closed", "0")
	m.CircuitOpen("registry.terraform.io", true)
	want("told open, the breaker lets the next request through", "0")
	failsFast.Store(true)
	want("failing fast", "1")

	bare, err := New(prometheus.NewRegistry(), Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	bare.CircuitOpen("registry.opentofu.org", true)
	if n := testutil.CollectAndCount(bare.circuitOpen); n != 1 {
		t.Fatalf("%d series, want the origin told of", n)
	}
}

// tfmirror_shared_store_down is read from Options.SharedDown at each
// scrape: the shared store's breaker, whose cooldown passes on an idle
// replica without a call to tell of it; without it, it is what
// SharedStoreDown last said.
func TestSharedStoreDownReadAtScrape(t *testing.T) {
	var down atomic.Bool
	reg := prometheus.NewRegistry()
	m, err := New(reg, Options{Version: "test", SharedDown: down.Load})
	if err != nil {
		t.Fatal(err)
	}
	want := func(reg *prometheus.Registry, when, v string) {
		t.Helper()
		exp := "# HELP tfmirror_shared_store_down " + sharedDownOpts.Help + "\n# TYPE tfmirror_shared_store_down gauge\n" +
			"tfmirror_shared_store_down " + v + "\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "tfmirror_shared_store_down"); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	want(reg, "answering", "0")
	m.SharedStoreDown(true)
	want(reg, "told down, the breaker lets the next call through", "0")
	down.Store(true)
	want(reg, "failing fast", "1")

	bareReg := prometheus.NewRegistry()
	bare, err := New(bareReg, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	bare.SharedStoreDown(true)
	want(bareReg, "told down, no breaker to read", "1")
}

package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// CircuitState says at scrape time whether origin's circuit breaker
// fails its requests fast (discovery.Circuit.FailsFast).
type CircuitState func(origin string) bool

// circuitGauge is tfmirror_origin_circuit_open: a series for each origin
// pre-created or told of by CircuitOpen. Its value is read at scrape time
// from state when set, since a breaker's cooldown passes without anything
// to tell of it (the next request is the probe); else it is the last that
// CircuitOpen said.
type circuitGauge struct {
	desc  *prometheus.Desc
	state CircuitState // nil: the last CircuitOpen

	mu   sync.Mutex
	open map[string]bool
}

const circuitHelp = "1 while an origin's circuit breaker fails requests to it fast (open, or its probe request under way), 0 otherwise (closed, or its cooldown passed: the next request is the probe)."

func newCircuitGauge(state CircuitState) *circuitGauge {
	return &circuitGauge{
		desc:  prometheus.NewDesc("tfmirror_origin_circuit_open", circuitHelp, []string{"origin"}, nil),
		state: state,
		open:  map[string]bool{},
	}
}

// set records what the breaker of origin told (pre-created: false).
func (g *circuitGauge) set(origin string, open bool) {
	g.mu.Lock()
	g.open[origin] = open
	g.mu.Unlock()
}

func (g *circuitGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *circuitGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	told := make(map[string]bool, len(g.open))
	for o, open := range g.open {
		told[o] = open
	}
	g.mu.Unlock()
	for o, open := range told {
		if g.state != nil {
			open = g.state(o)
		}
		v := 0.0
		if open {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, o)
	}
}

// breakerGauge is a gauge of one breaker without labels
// (tfmirror_shared_store_down): read at scrape time from state when set,
// else the last that set said.
type breakerGauge struct {
	desc  *prometheus.Desc
	state func() bool // nil: the last set
	told  atomic.Bool
}

func newBreakerGauge(opts prometheus.GaugeOpts, state func() bool) *breakerGauge {
	return &breakerGauge{desc: prometheus.NewDesc(opts.Name, opts.Help, nil, nil), state: state}
}

// set records what the breaker told.
func (g *breakerGauge) set(open bool) { g.told.Store(open) }

func (g *breakerGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *breakerGauge) Collect(ch chan<- prometheus.Metric) {
	open := g.told.Load()
	if g.state != nil {
		open = g.state()
	}
	v := 0.0
	if open {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v)
}

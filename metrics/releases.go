package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// releasesMetrics are the CLI releases side's collectors (releases.Metrics),
// by publisher and product: the products are the operator's configured
// few, so the label sets stay small.
type releasesMetrics struct {
	served  *prometheus.CounterVec
	refused *prometheus.CounterVec
}

func (rm *releasesMetrics) collectors() []prometheus.Collector {
	rm.served = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_cli_served_total", Help: "CLI release answers, by publisher, product, kind (list, sums, signature, archive, missing: an optional file the origin lacks, answered 404 from memory) and whether a list was served stale.",
	}, []string{"publisher", "product", "kind", "stale"})
	rm.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_cli_refused_total", Help: "CLI release refusals, by publisher, product and reason (a verification reason or a package policy rule).",
	}, []string{"publisher", "product", "reason"})
	return []prometheus.Collector{rm.served, rm.refused}
}

// CLIServed counts one answer of the CLI releases side.
func (m *Metrics) CLIServed(publisher, product, kind string, stale bool) {
	m.releases.served.WithLabelValues(publisher, product, kind, strconv.FormatBool(stale)).Inc()
}

// CLIRefused counts one refusal of the CLI releases side.
func (m *Metrics) CLIRefused(publisher, product, reason string) {
	m.releases.refused.WithLabelValues(publisher, product, reason).Inc()
}

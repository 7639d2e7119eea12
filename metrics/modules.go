package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ModuleSourceKinds and ModuleOutcomes are the label values of registry
// module package fetches (see modules.Metrics).
var (
	ModuleSourceKinds = []string{"git", "archive"}
	ModuleOutcomes    = []string{"success", "error", "timeout", "too_large", "unsupported", "changed"}
)

// moduleMetrics are the collectors of registry module package fetches.
type moduleMetrics struct {
	fetches  *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// collectors builds the collectors, with every label value pre-created.
func (mm *moduleMetrics) collectors() []prometheus.Collector {
	mm.fetches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_module_fetches_total", Help: "Registry module packages fetched from their source hosts, by source kind (git, archive) and outcome (success, error, timeout, too_large, unsupported, changed: a refetch that did not give the package first mirrored).",
	}, []string{"kind", "outcome"})
	mm.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_module_fetch_bytes_total", Help: "Bytes of the normalized registry module packages stored, by source kind.",
	}, []string{"kind"})
	mm.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tfmirror_module_fetch_duration_seconds", Help: "Duration of registry module package fetches (clone or download, and normalization), by source kind.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
	}, []string{"kind"})
	for _, k := range ModuleSourceKinds {
		mm.bytes.WithLabelValues(k)
		mm.duration.WithLabelValues(k)
		for _, o := range ModuleOutcomes {
			mm.fetches.WithLabelValues(k, o)
		}
	}
	return []prometheus.Collector{mm.fetches, mm.bytes, mm.duration}
}

// ModuleFetch records one registry module package fetch (modules.Metrics).
func (m *Metrics) ModuleFetch(kind, outcome string, bytes int64, d time.Duration) {
	m.modules.fetches.WithLabelValues(kind, outcome).Inc()
	if outcome == "success" {
		m.modules.bytes.WithLabelValues(kind).Add(float64(bytes))
	}
	m.modules.duration.WithLabelValues(kind).Observe(d.Seconds())
}

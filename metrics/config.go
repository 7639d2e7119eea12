package metrics

import "github.com/prometheus/client_golang/prometheus"

// ReloadOutcomes are the outcomes of a reload of the configuration file
// (SIGHUP): put in force, or refused whole.
var ReloadOutcomes = []string{"applied", "refused"}

// configMetrics are the collectors of the configuration file's reloads
// (settings.ReloadMetrics).
type configMetrics struct {
	reloads *prometheus.CounterVec
}

func (cm *configMetrics) collectors() []prometheus.Collector {
	cm.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_config_reloads_total", Help: "Reloads of the configuration file (SIGHUP), by outcome: applied, or refused whole (the configuration in force stays).",
	}, []string{"outcome"})
	for _, o := range ReloadOutcomes {
		cm.reloads.WithLabelValues(o)
	}
	return []prometheus.Collector{cm.reloads}
}

// ConfigReload counts a reload of the configuration file with outcome,
// one of ReloadOutcomes.
func (m *Metrics) ConfigReload(outcome string) {
	m.config.reloads.WithLabelValues(outcome).Inc()
}

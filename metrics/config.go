package metrics

import "github.com/prometheus/client_golang/prometheus"

// ReloadOutcomes are the outcomes of a reload of the configuration file
// (SIGHUP): put in force, or refused whole.
var ReloadOutcomes = []string{"applied", "refused"}

// configMetrics are the collectors of the configuration file's reloads
// (settings.ReloadMetrics).
type configMetrics struct {
	reloads *prometheus.CounterVec
	inForce prometheus.Gauge
}

func (cm *configMetrics) collectors() []prometheus.Collector {
	cm.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_config_reloads_total", Help: "Reloads of the configuration file (SIGHUP), by outcome: applied, or refused whole (the configuration in force stays).",
	}, []string{"outcome"})
	for _, o := range ReloadOutcomes {
		cm.reloads.WithLabelValues(o)
	}
	cm.inForce = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tfmirror_config_last_reload_successful", Help: "1 when the last reading of the configuration file (at start, or on SIGHUP) was put in force; 0 when the last reload was refused, so that the file on disk is not the configuration in force.",
	})
	cm.inForce.Set(1) // a process runs only with a file it accepted
	return []prometheus.Collector{cm.reloads, cm.inForce}
}

// ConfigReload counts a reload of the configuration file with outcome,
// one of ReloadOutcomes.
// tfmirror_config_last_reload_successful follows the outcome.
func (m *Metrics) ConfigReload(outcome string) {
	m.config.reloads.WithLabelValues(outcome).Inc()
	if outcome == "applied" {
		m.config.inForce.Set(1)
	} else {
		m.config.inForce.Set(0)
	}
}

// tokensMetrics are the collectors of the client tokens file's reloads.
type tokensMetrics struct {
	reloads *prometheus.CounterVec
	inForce prometheus.Gauge
}

func (tm *tokensMetrics) collectors() []prometheus.Collector {
	tm.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_auth_tokens_reloads_total", Help: "Reloads of the client tokens file (--auth-tokens-file; tfmirror reload or SIGHUP), by outcome: applied, or refused whole (the tokens in force stay).",
	}, []string{"outcome"})
	for _, o := range ReloadOutcomes {
		tm.reloads.WithLabelValues(o)
	}
	tm.inForce = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tfmirror_auth_tokens_last_reload_successful", Help: "1 when the last reading of the client tokens file (at start, or on a reload) was put in force; 0 when the last reload was refused, so that the tokens on disk are not those in force (a token removed from the file is still accepted).",
	})
	tm.inForce.Set(1) // a process runs only with a file it accepted
	return []prometheus.Collector{tm.reloads, tm.inForce}
}

// TokensReload counts a reload of the client tokens file with outcome,
// one of ReloadOutcomes; tfmirror_auth_tokens_last_reload_successful
// follows the outcome.
func (m *Metrics) TokensReload(outcome string) {
	m.tokens.reloads.WithLabelValues(outcome).Inc()
	if outcome == "applied" {
		m.tokens.inForce.Set(1)
	} else {
		m.tokens.inForce.Set(0)
	}
}

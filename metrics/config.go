package metrics

import "github.com/prometheus/client_golang/prometheus"

// ReloadOutcomes are the outcomes of a reload of a file read at start
// and again on a reload (SIGHUP, tfmirror reload): put in force, or
// refused whole.
var ReloadOutcomes = []string{"applied", "refused"}

// reloadMetrics are the collectors of one file's reloads: a counter of
// reloads by outcome, and a gauge of whether the last reading is in
// force. The configuration file's (settings.ReloadMetrics), the client
// tokens file's, the trusted keys files' and the TLS certificate's are
// four of them.
type reloadMetrics struct {
	reloads *prometheus.CounterVec
	inForce prometheus.Gauge
}

// collectors makes the collectors named prefix+"_reloads_total" and
// prefix+"_last_reload_successful", with their help texts.
func (rm *reloadMetrics) collectors(prefix, reloadsHelp, inForceHelp string) []prometheus.Collector {
	rm.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "_reloads_total", Help: reloadsHelp}, []string{"outcome"})
	for _, o := range ReloadOutcomes {
		rm.reloads.WithLabelValues(o)
	}
	rm.inForce = prometheus.NewGauge(prometheus.GaugeOpts{Name: prefix + "_last_reload_successful", Help: inForceHelp})
	rm.inForce.Set(1) // a process runs only with a file it accepted
	return []prometheus.Collector{rm.reloads, rm.inForce}
}

// count counts a reload with outcome, one of ReloadOutcomes; the gauge
// follows the outcome.
func (rm *reloadMetrics) count(outcome string) {
	rm.reloads.WithLabelValues(outcome).Inc()
	if outcome == "applied" {
		rm.inForce.Set(1)
	} else {
		rm.inForce.Set(0)
	}
}

func (rm *reloadMetrics) configCollectors() []prometheus.Collector {
	return rm.collectors("tfmirror_config",
		"Reloads of the configuration file (SIGHUP), by outcome: applied, or refused whole (the configuration in force stays).",
		"1 when the last reading of the configuration file (at start, or on SIGHUP) was put in force; 0 when the last reload was refused, so that the file on disk is not the configuration in force.")
}

func (rm *reloadMetrics) tokensCollectors() []prometheus.Collector {
	return rm.collectors("tfmirror_auth_tokens",
		"Reloads of the client tokens file (--auth-tokens-file; tfmirror reload or SIGHUP), by outcome: applied, or refused whole (the tokens in force stay).",
		"1 when the last reading of the client tokens file (at start, or on a reload) was put in force; 0 when the last reload was refused, so that the tokens on disk are not those in force (a token removed from the file is still accepted).")
}

func (rm *reloadMetrics) trustCollectors() []prometheus.Collector {
	return rm.collectors("tfmirror_trusted_keys",
		"Reloads of the files of the keys imports trust (--trusted-export-keys, --trusted-publisher-keys; tfmirror reload or SIGHUP), by outcome: applied, or refused whole (the keys in force stay).",
		"1 when the last reading of the files of the keys imports trust (at start, or on a reload) was put in force; 0 when the last reload was refused, so that the keys on disk are not those in force (a key removed from its file to revoke it is still trusted).")
}

func (rm *reloadMetrics) certCollectors() []prometheus.Collector {
	return rm.collectors("tfmirror_tls_certificate",
		"Certificates of the mirror's port put in force while it serves, by outcome: applied, or refused (the certificate in force stays). The operator's certificate (--tls-cert) is read again when its files change (checked once a minute, and at tfmirror reload or SIGHUP); the generated one is issued again weeks before it expires.",
		"1 when the last certificate read or issued while serving was put in force (and at start); 0 when it was refused: the operator's files hold a certificate that is not served (its key another's, expired), or the generated one could not be issued again and the one in force draws near its end.")
}

func (rm *reloadMetrics) originCACollectors() []prometheus.Collector {
	return rm.collectors("tfmirror_origin_ca",
		"Readings of the files of origin_ca_file (the CAs trusted for TLS to origins, download hosts, module source hosts and an https:// upstream proxy) that changed while the mirror serves, by outcome: applied, or refused (the CAs in force stay). The files are read again once a minute and at tfmirror reload or SIGHUP.",
		"1 when the last reading of origin_ca_file's files that changed was put in force (and at start); 0 when it was refused: the files hold CAs that are not trusted yet (one missing, one others may write, one without a certificate), and a CA removed from them is still trusted.")
}

// ConfigReload counts a reload of the configuration file with outcome,
// one of ReloadOutcomes; tfmirror_config_last_reload_successful follows
// the outcome.
func (m *Metrics) ConfigReload(outcome string) { m.config.count(outcome) }

// TokensReload counts a reload of the client tokens file with outcome,
// one of ReloadOutcomes; tfmirror_auth_tokens_last_reload_successful
// follows the outcome.
func (m *Metrics) TokensReload(outcome string) { m.tokens.count(outcome) }

// TrustReload counts a reload of the files of the keys imports trust
// with outcome, one of ReloadOutcomes;
// tfmirror_trusted_keys_last_reload_successful follows the outcome.
func (m *Metrics) TrustReload(outcome string) { m.trust.count(outcome) }

// OriginCAReload counts a reading of origin_ca_file's files that changed
// while serving with outcome, one of ReloadOutcomes;
// tfmirror_origin_ca_last_reload_successful follows the outcome.
func (m *Metrics) OriginCAReload(outcome string) { m.originCA.count(outcome) }

// CertificateReload counts a certificate of the mirror's port read or
// issued while serving with outcome, one of ReloadOutcomes;
// tfmirror_tls_certificate_last_reload_successful follows the outcome.
func (m *Metrics) CertificateReload(outcome string) { m.cert.count(outcome) }

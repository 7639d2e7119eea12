package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// authKinds are the kinds of client credentials refused (proxy's
// Failure* names), pre-created as label values.
var authKinds = []string{"token", "issued", "signature"}

// authMetrics are client authentication's collectors (proxy.AuthMetrics).
type authMetrics struct {
	failures *prometheus.CounterVec
	limited  prometheus.Counter
}

func (am *authMetrics) collectors() []prometheus.Collector {
	am.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_auth_failures_total", Help: "Client credentials refused, by kind: token (a client token, as Bearer or Basic password), issued (a token claiming to be one the OCI door issued that does not verify), signature (an archive URL's signature that does not verify; expired ones the mirror made are not counted). Each counts against its client address's limit of failed attempts.",
	}, []string{"kind"})
	for _, k := range authKinds {
		am.failures.WithLabelValues(k)
	}
	am.limited = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tfmirror_auth_limited_total", Help: "Requests with credentials answered 429 (Retry-After) unchecked, because their client address failed authentication too often.",
	})
	return []prometheus.Collector{am.failures, am.limited}
}

// AuthFailed counts a client credential refused, by kind.
func (m *Metrics) AuthFailed(kind string) { m.auth.failures.WithLabelValues(kind).Inc() }

// AuthLimited counts a request refused for its address's failed attempts.
func (m *Metrics) AuthLimited() { m.auth.limited.Inc() }

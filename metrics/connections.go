package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tfmirror/tfmirror/v2/internal/httpserve"
)

// connMetrics are the main port's connection collectors: how many are
// open and how many may be (--max-connections).
type connMetrics struct {
	open  prometheus.Gauge
	limit prometheus.Gauge
	// handshakes are the TLS handshakes that failed, by reason.
	handshakes *prometheus.CounterVec
}

func (cm *connMetrics) collectors() []prometheus.Collector {
	cm.open = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tfmirror_http_connections", Help: "Client connections open on the mirror's port (the metrics listener's and the admin socket's not counted), a TLS handshake under way or a kept-alive connection waiting for its next request included.",
	})
	cm.limit = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tfmirror_http_connections_limit", Help: "Most client connections open at once on the mirror's port (--max-connections); a connection beyond them waits, unaccepted, for one to close.",
	})
	cm.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_tls_handshake_failures_total", Help: "TLS handshakes on the mirror's port that failed, by reason: certificate_refused (the client refused the mirror's certificate: a CA it does not trust, a name the certificate lacks, expired), not_tls (plain HTTP or anything else that is not TLS), other (the connection closed or timed out in the middle, nothing in common).",
	}, []string{"reason"})
	for _, r := range []string{httpserve.HandshakeCertificateRefused, httpserve.HandshakeNotTLS, httpserve.HandshakeOther} {
		cm.handshakes.WithLabelValues(r)
	}
	return []prometheus.Collector{cm.open, cm.limit, cm.handshakes}
}

// TLSHandshakeFailed counts a TLS handshake on the mirror's port that
// failed, by its reason (httpserve.ErrorLog's).
func (m *Metrics) TLSHandshakeFailed(reason string) { m.conns.handshakes.WithLabelValues(reason).Inc() }

// ConnectionsLimit records the most connections the mirror's port takes
// at once.
func (m *Metrics) ConnectionsLimit(n int) { m.conns.limit.Set(float64(n)) }

// ConnectionOpened counts a connection the mirror's port accepted.
func (m *Metrics) ConnectionOpened() { m.conns.open.Inc() }

// ConnectionClosed counts a connection ConnectionOpened counted closed.
func (m *Metrics) ConnectionClosed() { m.conns.open.Dec() }

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// connMetrics are the main port's connection collectors: how many are
// open and how many may be (--max-connections).
type connMetrics struct {
	open  prometheus.Gauge
	limit prometheus.Gauge
}

func (cm *connMetrics) collectors() []prometheus.Collector {
	cm.open = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tfmirror_http_connections", Help: "Client connections open on the mirror's port (the metrics listener's and the admin socket's not counted), a TLS handshake under way or a kept-alive connection waiting for its next request included.",
	})
	cm.limit = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tfmirror_http_connections_limit", Help: "Most client connections open at once on the mirror's port (--max-connections); a connection beyond them waits, unaccepted, for one to close.",
	})
	return []prometheus.Collector{cm.open, cm.limit}
}

// ConnectionsLimit records the most connections the mirror's port takes
// at once.
func (m *Metrics) ConnectionsLimit(n int) { m.conns.limit.Set(float64(n)) }

// ConnectionOpened counts a connection the mirror's port accepted.
func (m *Metrics) ConnectionOpened() { m.conns.open.Inc() }

// ConnectionClosed counts a connection ConnectionOpened counted closed.
func (m *Metrics) ConnectionClosed() { m.conns.open.Dec() }

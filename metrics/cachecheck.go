package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// cacheCheckMetrics are the collectors of `tfmirror cache verify`
// (cachecheck.Metrics).
type cacheCheckMetrics struct {
	last    prometheus.Gauge
	damaged prometheus.Gauge
}

func (cm *cacheCheckMetrics) collectors() []prometheus.Collector {
	cm.last = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tfmirror_cache_check_timestamp_seconds", Help: "When the last check of the whole cache (tfmirror cache verify) by this process ended, in Unix seconds; 0 before the first.",
	})
	cm.damaged = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tfmirror_cache_check_damaged_packages", Help: "Packages the last check of the whole cache found damaged.",
	})
	return []prometheus.Collector{cm.last, cm.damaged}
}

// CacheChecked records a check of the whole cache that ended at at.
func (m *Metrics) CacheChecked(at time.Time, _, failed int) {
	m.cacheCheck.last.Set(float64(at.UnixNano()) / 1e9)
	m.cacheCheck.damaged.Set(float64(failed))
}

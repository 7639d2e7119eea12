package metrics

import "github.com/prometheus/client_golang/prometheus"

// RetentionRules are the label values of removals (package retention's rule names).
var RetentionRules = []string{"keep-versions", "unused", "named", "unnamed"}

// RetentionSharedRules are the rules of the removals from the shared
// store's bucket (label store="shared").
var RetentionSharedRules = []string{"keep-versions", "unused"}

// retentionMetrics are the collectors of retention (retention.Metrics).
type retentionMetrics struct {
	versions *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	kept     prometheus.Gauge
	unmet    prometheus.Gauge
}

func (rm *retentionMetrics) collectors() []prometheus.Collector {
	rm.versions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_retention_removed_versions_total", Help: "Versions whose packages retention removed, by rule (keep-versions, unused, named: tfmirror cache prune naming them; unnamed: archives no record names, counted in bytes only) and store (cache: this replica's; shared: the shared store's bucket).",
	}, []string{"rule", "store"})
	rm.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_retention_removed_bytes_total", Help: "Bytes of packages retention removed, by rule and store.",
	}, []string{"rule", "store"})
	rm.kept = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tfmirror_cache_kept_bytes", Help: "Bytes of cached packages the size limit may not evict: they cannot be fetched again (imported, local-only hosts, a sealed mirror) or are pinned.",
	})
	rm.unmet = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tfmirror_cache_limit_unmet", Help: "1 when the packages the size limit may not evict alone exceed --cache-max-bytes (they are kept), else 0.",
	})
	for _, r := range RetentionRules {
		rm.versions.WithLabelValues(r, "cache")
		rm.bytes.WithLabelValues(r, "cache")
	}
	for _, r := range RetentionSharedRules {
		rm.versions.WithLabelValues(r, "shared")
		rm.bytes.WithLabelValues(r, "shared")
	}
	return []prometheus.Collector{rm.versions, rm.bytes, rm.kept, rm.unmet}
}

// RetentionRemoved records the packages of versions removed by rule from
// the cache.
func (m *Metrics) RetentionRemoved(rule string, versions int, bytes int64) {
	m.retention.versions.WithLabelValues(rule, "cache").Add(float64(versions))
	m.retention.bytes.WithLabelValues(rule, "cache").Add(float64(bytes))
}

// RetentionSharedRemoved records the packages of versions removed by rule
// from the shared store's bucket.
func (m *Metrics) RetentionSharedRemoved(rule string, versions int, bytes int64) {
	m.retention.versions.WithLabelValues(rule, "shared").Add(float64(versions))
	m.retention.bytes.WithLabelValues(rule, "shared").Add(float64(bytes))
}

// RetentionKept records the bytes the size limit may not evict, and
// whether they alone exceed it.
func (m *Metrics) RetentionKept(bytes int64, limitUnmet bool) {
	m.retention.kept.Set(float64(bytes))
	v := 0.0
	if limitUnmet {
		v = 1
	}
	m.retention.unmet.Set(v)
}

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// policyRules are the rules a refusal names (package policy's Rule*
// names), pre-created as label values.
var policyRules = []string{"allow_list", "deny", "deny_version", "min_release_age"}

// policyMetrics are the package policy's collectors (mirror/gate.Metrics).
type policyMetrics struct {
	refused *prometheus.CounterVec
}

func (pm *policyMetrics) collectors() []prometheus.Collector {
	pm.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfmirror_policy_refusals_total", Help: "Refusals by the package policy, by rule: documents and archives refused, and versions first left out of a version list.",
	}, []string{"rule"})
	for _, r := range policyRules {
		pm.refused.WithLabelValues(r)
	}
	return []prometheus.Collector{pm.refused}
}

// PolicyRefused counts one refusal by the package policy's rule.
func (m *Metrics) PolicyRefused(rule string) { m.policy.refused.WithLabelValues(rule).Inc() }

package deploy_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestHelmChartGeneratedCA: without tls.existingSecret and insecureHTTP,
// tfmirror makes a CA in its data directory. On a volume that does not
// outlive its pod (the shared store's local caches, persistence.enabled
// false) each pod, and each restart, made a CA of its own, and clients
// that trusted one refused the next pod: the chart refuses it, naming
// what to set. Behind an Ingress, which may speak TLS to the pods
// without checking their certificate (the clients check the Ingress's),
// it renders, and the NOTES say that only the Ingress can trust the
// pods; on a claim, which keeps the CA, it renders as before.
func TestHelmChartGeneratedCA(t *testing.T) {
	t.Parallel()
	const shared = "replicaCount: 3\nsharedStore: {enabled: true, url: s3://b/p, key: {existingSecret: k}}\nconfig: {cache-max-bytes: 6GiB}\n"
	const noClaim = "persistence: {enabled: false}\nconfig: {cache-max-bytes: 6GiB}\n"
	const ingress = "ingress: {enabled: true, hosts: [{host: mirror.example.com}], annotations: {nginx.ingress.kubernetes.io/backend-protocol: HTTPS}}\n"
	for _, tc := range []struct{ name, values string }{
		{"replicas sharing a store", shared},
		{"one pod without a claim", noClaim},
		{"one pod sharing a store", "sharedStore: {enabled: true, url: s3://b/p, key: {existingSecret: k}}\nconfig: {cache-max-bytes: 6GiB}\n"},
		// A Gateway reaches HTTPS backends only through a BackendTLSPolicy,
		// which checks their certificate against a CA it is given.
		{"behind an HTTPRoute", shared + "httpRoute: {enabled: true, parentRefs: [{name: public}]}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			refusedSaying(t, tc.values, "a CA of its own: set tls.existingSecret")
			refusedSaying(t, tc.values, "or insecureHTTP behind an Ingress or Gateway that terminates TLS")
		})
	}
	const warning = "only the Ingress"
	for _, tc := range []struct {
		name, values string
		warned       bool
	}{
		{"replicas with a certificate", shared + "tls: {existingSecret: tfmirror-tls}\n", false},
		{"one pod without a claim, plain HTTP behind a gateway", noClaim + "insecureHTTP: true\nhttpRoute: {enabled: true, parentRefs: [{name: public}]}\n", false},
		{"replicas behind an Ingress speaking TLS to them", shared + ingress, true},
		{"one pod on a claim", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var values map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			m, notes := helmTemplate(t, tc.name, values)
			checkWorkload(t, m)
			if got := strings.Contains(notes, warning); got != tc.warned {
				t.Errorf("NOTES.txt says only the Ingress can trust the pods' certificates: %v, want %v:\n%s", got, tc.warned, notes)
			}
		})
	}
}

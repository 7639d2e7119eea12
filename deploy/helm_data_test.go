package deploy_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
			m, notes := helmTemplate(t, tc.name, valuesOf(t, tc.values))
			checkWorkload(t, m)
			if got := strings.Contains(notes, warning); got != tc.warned {
				t.Errorf("NOTES.txt says only the Ingress can trust the pods' certificates: %v, want %v:\n%s", got, tc.warned, notes)
			}
		})
	}
}

// TestHelmChartEphemeralVolume: with ephemeralVolume.enabled the data
// volume without a claim (each shared-store replica's local cache, or
// persistence.enabled false) is a generic ephemeral volume, a
// ReadWriteOnce claim of ephemeralVolume.size the cluster provisions
// for each pod of the Deployment from ephemeralVolume.storageClass (its
// default when empty), in place of an emptyDir on the node's disk: the
// pods request no ephemeral-storage for it, and the cache's limit is
// checked against its size as against a claim's.
func TestHelmChartEphemeralVolume(t *testing.T) {
	t.Parallel()
	const shared = "replicaCount: 3\nsharedStore: {enabled: true, url: s3://b/p, key: {existingSecret: k}}\ntls: {existingSecret: t}\n"
	for _, tc := range []struct {
		name, values, class string
		size                int64
	}{
		{"replicas sharing a store", shared + "ephemeralVolume: {enabled: true, size: 100Gi, storageClass: fast-ssd}\nconfig: {cache-max-bytes: 64GiB}\n", "fast-ssd", 100 << 30},
		{"one pod without a claim, the default class", "persistence: {enabled: false}\ninsecureHTTP: true\nephemeralVolume: {enabled: true}\nconfig: {cache-max-bytes: 13GiB}\n", "", 20 << 30},
		{"a size in bytes", shared + "ephemeralVolume: {enabled: true, size: 53687091200}\n", "", 50 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, _ := helmTemplate(t, tc.name, valuesOf(t, tc.values))
			w := checkWorkload(t, m)
			v := w.dataVolume
			if v.Ephemeral == nil || v.Ephemeral.VolumeClaimTemplate == nil {
				t.Fatalf("the data volume %+v is not a generic ephemeral volume", v)
			}
			spec := v.Ephemeral.VolumeClaimTemplate.Spec
			if got := ptrOr(spec.StorageClassName, ""); got != tc.class || (tc.class == "") != (spec.StorageClassName == nil) {
				t.Errorf("storageClassName %v, want %q (none: the cluster's default)", spec.StorageClassName, tc.class)
			}
			if got := spec.Resources.Requests.Storage().Value(); got != tc.size {
				t.Errorf("the volume requests %d bytes, want %d", got, tc.size)
			}
			if req, ok := w.container.Resources.Requests[corev1.ResourceEphemeralStorage]; ok {
				t.Errorf("ephemeral-storage request %v: the cache is not on the node's disk", req.String())
			}
			if len(m.claims) != 0 || m.deployments[0].Spec.Strategy.Type != "RollingUpdate" {
				t.Errorf("%d claims of the chart's own and strategy %q: want each pod's volume alone, rolling", len(m.claims), m.deployments[0].Spec.Strategy.Type)
			}
		})
	}
	for _, tc := range []struct{ name, values, want string }{
		// The data directory holds up to 1.25 times the limit: the volume
		// would fill, the cache stop taking archives and /readyz fail.
		{"a cache of more than 2/3 of the volume", shared + "ephemeralVolume: {enabled: true, size: 20Gi}\nconfig: {cache-max-bytes: 17GiB}\n",
			"config.cache-max-bytes 17GiB does not fit the data volume, an ephemeral volume of ephemeralVolume.size 20Gi"},
		{"the default cache on the default volume", shared + "ephemeralVolume: {enabled: true}\n", "config.cache-max-bytes 32GiB does not fit"},
		// One replica on its claim has no ephemeral volume: the value would
		// be ignored without a word.
		{"beside a claim", "ephemeralVolume: {enabled: true}\n", "ephemeralVolume.enabled: the cache is on the claim"},
		{"a misspelt switch", "ephemeralVolume: {enable: true}\n", "enable"},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedSaying(t, tc.values, tc.want) })
	}
}

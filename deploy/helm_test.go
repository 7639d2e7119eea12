package deploy_test

import (
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestHelmChart renders the chart with its default values and with each
// values file in its ci/ directory (one per mode, as chart-testing runs
// them), lints it as `helm lint --strict` would, and checks what it
// renders as the kustomizations are checked, and what each mode adds.
func TestHelmChart(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	modes := []string{""}
	for _, f := range files {
		modes = append(modes, filepath.Base(f))
	}
	for _, want := range []string{"single-replica-values.yaml", "shared-store-values.yaml", "shared-store-volumes-values.yaml", "ingress-monitoring-values.yaml"} {
		if !slices.Contains(modes, want) {
			t.Errorf("no ci/%s", want)
		}
	}
	for _, mode := range modes {
		name := mode
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			values := chartValues(t, mode)
			helmLint(t, name, values)
			m, notes := helmTemplate(t, name, values)
			w := checkWorkload(t, m)
			if w.kind != "Deployment" {
				t.Fatalf("a %s, want a Deployment", w.kind)
			}
			if !strings.Contains(notes, "network_mirror") {
				t.Errorf("NOTES.txt does not say how to point Terraform at the mirror:\n%s", notes)
			}
			// One ConfigMap, the one the pods load.
			if len(m.configMaps) != 1 {
				t.Errorf("%d ConfigMaps, want 1", len(m.configMaps))
			}
			d := m.deployments[0]
			if len(m.claims) == 1 || w.dataVolume.PersistentVolumeClaim != nil {
				checkClaim(t, m, w)
			} else if d.Spec.Strategy.Type == "Recreate" {
				t.Error("the Recreate strategy without a claim: an update takes the mirror down for nothing")
			}
			switch mode {
			case "":
				// Defaults: one replica on a claim, nothing that needs a
				// Secret, CRD or controller the cluster may not have.
				if len(m.claims) != 1 || w.replicas != 1 {
					t.Errorf("defaults: %d claims for %d replicas, want one replica with its claim", len(m.claims), w.replicas)
				}
				if len(m.ingresses)+len(m.httpRoutes)+len(m.serviceMonitors)+len(m.prometheusRules) != 0 {
					t.Error("defaults render an Ingress, HTTPRoute, ServiceMonitor or PrometheusRule")
				}
				for _, v := range w.volumes {
					if v.Secret != nil || v.ConfigMap != nil && v.ConfigMap.Name != m.configMaps[0].Name {
						t.Errorf("defaults mount volume %s from a Secret or ConfigMap nobody created", v.Name)
					}
				}
			case "single-replica-values.yaml":
				for _, k := range []string{"TFMIRROR_TLS_CERT", "TFMIRROR_AUTH_TOKENS_FILE", "TFMIRROR_EXPORT_KEY", "TFMIRROR_TRUSTED_EXPORT_KEYS", "TFMIRROR_TRUSTED_PUBLISHER_KEYS", "HTTPS_PROXY",
					"TFMIRROR_KEEP_VERSIONS", "TFMIRROR_KEEP_VERSIONS_PER_MAJOR", "TFMIRROR_EVICT_UNUSED_AFTER", "TFMIRROR_RETENTION_INTERVAL",
					"TFMIRROR_PINS_DIR", "TFMIRROR_ARCHIVE_MAX_UNPACKED_BYTES", "TFMIRROR_ARCHIVE_MAX_ENTRIES"} {
					if w.env[k] == "" {
						t.Errorf("no %s", k)
					}
				}
				if !slices.Contains(w.args, "--http2") {
					t.Errorf("args %v: extraArgs --http2 missing", w.args)
				}
				if mountAt(w.mounts, "/etc/tfmirror/extra") == "" || w.volumes["extra"].Secret == nil {
					t.Errorf("extraVolumes and extraVolumeMounts: extra not mounted (mounts %v)", w.mounts)
				}
				if f := w.env["TFMIRROR_CREDENTIALS_FILE"]; f != "/etc/tfmirror/origin-credentials/credentials.tfrc" {
					t.Errorf("credentials_file %q: want originCredentials' Secret, mounted", f)
				}
				if ca := w.env["TFMIRROR_ORIGIN_CA_FILE"]; ca != "/etc/tfmirror/origin-ca/company-ca.pem" || w.volumes[mountAt(w.mounts, "/etc/tfmirror/origin-ca")].ConfigMap == nil {
					t.Errorf("origin_ca_file %q: want the originCA ConfigMap's key, mounted", ca)
				}
			case "shared-store-values.yaml":
				checkSharedStore(t, m, w)
				if ref := w.fromSecrets["TFMIRROR_UPSTREAM_PROXY"]; ref == nil || ref.Name != "tfmirror-egress" || ref.Key != "upstream-proxy" {
					t.Errorf("TFMIRROR_UPSTREAM_PROXY from %+v, want the Secret tfmirror-egress's key upstream-proxy", ref)
				}
				for _, k := range []string{"TFMIRROR_MODULE_SOURCE_CREDENTIALS", "TFMIRROR_ALLOW_UNSIGNED_HOSTS"} {
					if w.env[k] == "" {
						t.Errorf("no %s", k)
					}
				}
				if len(m.claims) != 0 {
					t.Errorf("%d PersistentVolumeClaims: the replicas' local caches are emptyDirs", len(m.claims))
				}
			case "shared-store-volumes-values.yaml":
				checkSharedStore(t, m, w)
				if v := w.dataVolume; v.Ephemeral == nil || len(m.claims) != 0 {
					t.Errorf("the local caches %+v and %d claims of the chart's own: want each pod's ephemeral volume", v, len(m.claims))
				}
				if _, ok := w.container.Resources.Requests[corev1.ResourceEphemeralStorage]; ok {
					t.Error("ephemeral-storage requested for a cache that is not on the node's disk")
				}
			case "ingress-monitoring-values.yaml":
				if len(m.ingresses) != 1 || len(m.httpRoutes) != 1 || len(m.serviceMonitors) != 1 || len(m.prometheusRules) != 1 {
					t.Errorf("%d Ingresses, %d HTTPRoutes, %d ServiceMonitors, %d PrometheusRules; want one of each",
						len(m.ingresses), len(m.httpRoutes), len(m.serviceMonitors), len(m.prometheusRules))
				}
				if w.scheme != "http" {
					t.Error("TLS ends at the ingress and gateway: want --insecure-http and HTTP probes")
				}
				if got := w.env["TFMIRROR_TRUSTED_PROXIES"]; got != "10.244.0.0/16,fd00:10:244::/56" {
					t.Errorf("trusted_proxies %q: want the ingress controller's and gateway's pods, whose X-Forwarded-For names the client", got)
				}
			}
		})
	}
}

// checkClaim checks a single replica's cache on a claim: one replica, the
// Recreate strategy (a ReadWriteOnce volume, and Badger's lock on the
// directory, admit one pod at a time), a claim of the chart that requests
// storage and is kept on uninstall.
func checkClaim(t *testing.T, m *manifests, w *workload) {
	t.Helper()
	d := m.deployments[0]
	if w.replicas != 1 || d.Spec.Strategy.Type != "Recreate" {
		t.Errorf("%s: a cache on a claim with %d replicas and strategy %q: want 1 replica and Recreate", m.where, w.replicas, d.Spec.Strategy.Type)
	}
	v := w.dataVolume
	if v.PersistentVolumeClaim == nil || len(m.claims) != 1 || m.claims[0].Name != v.PersistentVolumeClaim.ClaimName {
		t.Fatalf("%s: the data volume %+v is not the chart's claim", m.where, v)
	}
	c := m.claims[0]
	if !slices.Contains(c.Spec.AccessModes, corev1.ReadWriteOnce) || c.Spec.Resources.Requests.Storage().IsZero() {
		t.Errorf("%s: claim %s: access modes %v, storage %v: want ReadWriteOnce and a size", m.where, c.Name, c.Spec.AccessModes, c.Spec.Resources.Requests.Storage())
	}
	if c.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("%s: claim %s is deleted with the release, and the cache with it", m.where, c.Name)
	}
	// The data directory holds up to 1.25 times the limit plus the
	// reserve, and the file system keeps some of the volume.
	if limit := byteSize(t, w.env["TFMIRROR_CACHE_MAX_BYTES"]); limit == 0 || limit > c.Spec.Resources.Requests.Storage().Value()/3*2 {
		t.Errorf("%s: TFMIRROR_CACHE_MAX_BYTES=%q: want a limit of at most 2/3 of the claim's %v", m.where, w.env["TFMIRROR_CACHE_MAX_BYTES"], c.Spec.Resources.Requests.Storage())
	}
}

// During a rotation of the shared store key, the chart mounts the
// previous key from the same Secret beside the current one and names both.
func TestHelmChartSharedStoreKeyRotation(t *testing.T) {
	t.Parallel()
	values := chartValues(t, "shared-store-values.yaml")
	values["sharedStore"].(map[string]any)["key"] = map[string]any{"existingSecret": "tfmirror-shared-store-key",
		"key": "new.key", "previousKey": "old.key"}
	m, _ := helmTemplate(t, "rotation", values)
	w := checkWorkload(t, m)
	cur, prev := flagValue(w, "shared-store-key-file"), flagValue(w, "shared-store-previous-key-file")
	if cur == "" || prev == "" || path.Dir(cur) != path.Dir(prev) || cur == prev {
		t.Fatalf("key files %q and %q, want two files of one mounted directory", cur, prev)
	}
	v := w.volumes[mountAt(w.mounts, path.Dir(cur))]
	if v.Secret == nil || v.Secret.SecretName != "tfmirror-shared-store-key" {
		t.Fatalf("the keys' volume %+v is not the Secret", v)
	}
	items := map[string]string{}
	for _, it := range v.Secret.Items {
		items[it.Path] = it.Key
	}
	if items[path.Base(cur)] != "new.key" || items[path.Base(prev)] != "old.key" {
		t.Errorf("Secret items %v: want %s from new.key, %s from old.key", items, path.Base(cur), path.Base(prev))
	}
}

// sharedStore.id reaches the replicas as --shared-store-id; without it
// they take the store's default.
func TestHelmChartSharedStoreID(t *testing.T) {
	t.Parallel()
	values := chartValues(t, "shared-store-values.yaml")
	m, _ := helmTemplate(t, "default-id", values)
	if id := flagValue(checkWorkload(t, m), "shared-store-id"); id != "" {
		t.Errorf("without sharedStore.id: --shared-store-id %q", id)
	}
	values["sharedStore"].(map[string]any)["id"] = "s3://old-bucket/mirror/"
	m, _ = helmTemplate(t, "kept-id", values)
	if id := flagValue(checkWorkload(t, m), "shared-store-id"); id != "s3://old-bucket/mirror/" {
		t.Errorf("--shared-store-id %q, want s3://old-bucket/mirror/", id)
	}
}

// TestHelmChartRefuses renders values the chart must refuse, with the
// reason in the error.
func TestHelmChartRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, values, want string
	}{
		{"replicas without a shared store", "replicaCount: 2", "needs sharedStore.enabled"},
		{"shared store without a URL", "sharedStore: {enabled: true}", "needs sharedStore.url"},
		{"URL signing key without auth", "urlSigningKey: {existingSecret: k}", "needs auth.existingSecret"},
		{"shared store without its key", "sharedStore: {enabled: true, url: s3://b/p}", "needs sharedStore.key.existingSecret"},
		{"replicas with auth and no shared key", "replicaCount: 3\nsharedStore: {enabled: true, url: s3://b/p, key: {existingSecret: k}}\nauth: {existingSecret: a}", "urlSigningKey.existingSecret"},
		// One replica on an emptyDir rolls: the new pod, with a key of its
		// own, answers URLs the old one signed with 403.
		{"a rolling replica with auth and no shared key", "sharedStore: {enabled: true, url: s3://b/p, key: {existingSecret: k}}\nauth: {existingSecret: a}\nconfig: {cache-max-bytes: 5GiB}", "urlSigningKey.existingSecret"},
		{"trusted keys without their ConfigMap", "trustedExportKeys: {files: [a.asc]}", "needs trustedExportKeys.existingConfigMap"},
		{"HTTPRoute without a Gateway", "httpRoute: {enabled: true}", "httpRoute.parentRefs"},
		{"Ingress without a host", "ingress: {enabled: true}", "ingress.hosts"},
		{"a retention flag in config", "config: {keep-versions: 3}", "set retention.keepVersions instead"},
		{"pins dir in config", "config: {pins-dir: /pins}", "set pins.existingConfigMap instead"},
		{"per major without keepVersions", "retention: {keepVersionsPerMajor: true}", "needs retention.keepVersions"},
		{"unsigned host that is no origin", "unsignedHosts: [tf.corp.example]", "tf.corp.example is not among config.allowed-origins"},
		{"module source credentials without a key", "modules: {sourceCredentials: {existingSecret: s, key: \"\"}}", "needs modules.sourceCredentials.key"},
		{"upstream proxy in the ConfigMap", "config: {upstream-proxy: \"http://u:p@proxy:3128\"}", "set upstreamProxy.existingSecret instead"},
		{"origin CA in config", "config: {origin-ca-file: /ca.pem}", "set originCA instead"},
		{"origin CA from two places", "originCA: {existingConfigMap: a, existingSecret: b}", "not both"},
		{"TLS names in config", "config: {tls-san: x.example}", "set tls.extraSANs instead"},
		{"trusted proxies in config", "config: {trusted-proxies: 10.0.0.0/8}", "set trustedProxies instead"},
		{"origin credentials in config", "config: {credentials-file: /creds.tfrc}", "set originCredentials instead"},
		{"origin credentials without a key", "originCredentials: {existingSecret: s, key: \"\"}", "needs originCredentials.key"},
		{"the address in config", "config: {listen: \":9443\"}", "the Service and the probes"},
		{"the data directory in config", "config: {data-dir: /data}", "the Service and the probes"},
		{"the metrics address in config", "config: {metrics-listen: \":9091\"}", "the Service and the probes"},
		// A cache limit the data volume cannot hold: the kubelet evicts a
		// pod whose emptyDir outgrows its sizeLimit, and a full claim
		// stops the cache (and /readyz) short of the limit.
		{"a cache larger than its emptyDir", "persistence: {enabled: false}", "config.cache-max-bytes 32GiB does not fit"},
		{"a shared store's local cache larger than its emptyDir", "sharedStore: {enabled: true, url: s3://b/p, key: {existingSecret: k}}", "config.cache-max-bytes 32GiB does not fit"},
		{"an unlimited cache in an emptyDir", "persistence: {enabled: false}\nemptyDir: {sizeLimit: 1Ti}\nconfig: {cache-max-bytes: \"0\"}", "config.cache-max-bytes 0 does not fit"},
		{"a cache larger than its claim", "persistence: {size: 20Gi}", "config.cache-max-bytes 32GiB does not fit"},
		{"a cache as large as its claim", "persistence: {size: 40000M}\nconfig: {cache-max-bytes: 40GB}", "config.cache-max-bytes 40GB does not fit"},
		// The data directory holds up to 1.25 times the limit (Badger's
		// value log before its GC returns the space of evicted archives)
		// plus the reserve, and the file system keeps some of the volume
		// (ext4 5% for root): a limit above 2/3 of the claim may fill it
		// under churn, and the one replica's /readyz fails, the Service
		// left with no pod.
		{"a cache of nine tenths of its claim", "persistence: {size: 50Gi}\nconfig: {cache-max-bytes: 45GiB}", "config.cache-max-bytes 45GiB does not fit"},
		// 40GiB on 50Gi: a data directory of up to 50GiB plus the reserve,
		// more than the claim before the file system takes its share.
		{"a cache of 4/5 of its claim", "persistence: {size: 50Gi}\nconfig: {cache-max-bytes: 40GiB}", "config.cache-max-bytes 40GiB does not fit"},
		// tfmirror refuses --insecure-http with --tls-cert: the pods would
		// crash at start, and on a claim (Recreate) after the old pod is gone.
		{"plain HTTP with a certificate", "insecureHTTP: true\ntls: {existingSecret: t}", "insecureHTTP and tls.existingSecret"},
		// What the Service, the probes and the volumes are made for, set
		// again after the chart's own flags and environment.
		{"the address in extraArgs", "extraArgs: [\"--listen=:9443\"]", "extraArgs: --listen=:9443: the chart sets --listen"},
		{"the metrics address in extraArgs", "extraArgs: [--metrics-listen, \":9091\"]", "extraArgs: --metrics-listen: the chart sets --metrics-listen"},
		{"the data directory in extraArgs", "extraArgs: [-data-dir=/data]", "the chart sets --data-dir"},
		{"plain HTTP in extraArgs", "extraArgs: [--insecure-http]", "the chart sets --insecure-http"},
		// The same in config: the file's insecure_http, which the chart
		// sets only with insecureHTTP, would serve plain HTTP on the port
		// the Service names https and the probes reach over HTTPS (never
		// ready; on a claim, Recreate has taken the old pod first).
		{"plain HTTP in config", "config: {insecure-http: true}", "config.insecure-http: set insecureHTTP instead"},
		// The files the chart mounts from Secrets and ConfigMaps, and the
		// shared store, named in config instead: the chart's checks of
		// them are passed by (client tokens from an extra volume on three
		// replicas, each signing archive URLs with a key of its own, the
		// others refusing them), and the NOTES describe another set-up.
		{"client tokens in config", "replicaCount: 3\nsharedStore: {enabled: true, url: s3://b/p, key: {existingSecret: k}}\nconfig: {cache-max-bytes: 6GiB, auth-tokens-file: /etc/extra/tokens}", "config.auth-tokens-file: set auth.existingSecret instead"},
		{"URL signing key in config", "config: {url-signing-key-file: /k}", "config.url-signing-key-file: set urlSigningKey.existingSecret instead"},
		{"certificate in config", "config: {tls-cert: /c.pem}", "config.tls-cert: set tls.existingSecret instead"},
		{"certificate key in config", "config: {tls-key: /k.pem}", "config.tls-key: set tls.existingSecret instead"},
		{"export key in config", "config: {export-key: /e.asc}", "config.export-key: set exportKey.existingSecret instead"},
		{"trusted export keys in config", "config: {trusted-export-keys: /t.asc}", "config.trusted-export-keys: set trustedExportKeys instead"},
		{"trusted publisher keys in config", "config: {trusted-publisher-keys: a=/t.asc}", "config.trusted-publisher-keys: set trustedPublisherKeys instead"},
		{"shared store in config", "config: {shared-store: s3://b/p}", "config.shared-store: set sharedStore instead"},
		{"shared store key in config", "config: {shared-store-key-file: /k}", "config.shared-store-key-file: set sharedStore.key instead"},
		{"previous shared store key in config", "config: {shared-store-previous-key-file: /k}", "config.shared-store-previous-key-file: set sharedStore.key.previousKey instead"},
		{"shared store ID in config", "config: {shared-store-id: s3://b/p}", "config.shared-store-id: set sharedStore.id instead"},
		{"the address in extraEnv", "extraEnv: [{name: TFMIRROR_LISTEN, value: \":9443\"}]", "extraEnv: TFMIRROR_LISTEN: the chart sets --listen"},
		// The kubelet kills the pod at terminationGracePeriodSeconds,
		// cutting off the downloads the shutdown would have let finish.
		{"a shutdown timeout longer than the grace period", "config: {shutdown-timeout: 1m}", "terminationGracePeriodSeconds 45 does not outlast config.shutdown-delay 5s and config.shutdown-timeout 1m"},
		{"a shutdown as long as the grace period", "config: {shutdown_delay: 15s, shutdown-timeout: 30s}", "terminationGracePeriodSeconds 45 does not outlast"},
		{"a shutdown timeout left to its default", "config: {shutdown-timeout: \"\"}\nterminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds 30 does not outlast"},
		{"the configuration file in extraEnv", "extraEnv: [{name: TFMIRROR_CONFIG, value: /x.json}]", "the chart sets --config"},
		// No node could be drained.
		{"a disruption budget of none", "replicaCount: 2\nsharedStore: {enabled: true, url: s3://b/p, key: {existingSecret: k}}\nconfig: {cache-max-bytes: 6GiB}\npodDisruptionBudget: {maxUnavailable: 0}", "podDisruptionBudget.maxUnavailable 0 lets no pod be evicted"},
		{"a disruption budget of 0%", "replicaCount: 2\nsharedStore: {enabled: true, url: s3://b/p, key: {existingSecret: k}}\nconfig: {cache-max-bytes: 6GiB}\npodDisruptionBudget: {maxUnavailable: \"0%\"}", "podDisruptionBudget.maxUnavailable 0% lets no pod be evicted"},
		// What the chart checks, set again after the configuration file:
		// its checks would pass by it.
		{"a shutdown timeout in extraArgs", "extraArgs: [--shutdown-timeout=10m]", "extraArgs: --shutdown-timeout=10m: set config.shutdown-timeout instead"},
		{"a shutdown delay in extraArgs, its value apart", "extraArgs: [-shutdown-delay, 5m]", "extraArgs: -shutdown-delay: set config.shutdown-delay instead"},
		{"a shutdown timeout in extraEnv", "extraEnv: [{name: TFMIRROR_SHUTDOWN_TIMEOUT, value: 10m}]", "extraEnv: TFMIRROR_SHUTDOWN_TIMEOUT: set config.shutdown-timeout instead"},
		{"a cache limit in extraEnv", "extraEnv: [{name: TFMIRROR_CACHE_MAX_BYTES, value: \"0\"}]", "extraEnv: TFMIRROR_CACHE_MAX_BYTES: set config.cache-max-bytes instead"},
		{"client tokens in extraArgs", "extraArgs: [--auth-tokens-file=/etc/extra/tokens]", "set auth.existingSecret instead"},
		{"unsigned hosts in extraEnv", "extraEnv: [{name: TFMIRROR_ALLOW_UNSIGNED_HOSTS, value: tf.corp.example}]", "extraEnv: TFMIRROR_ALLOW_UNSIGNED_HOSTS: set unsignedHosts instead"},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedSaying(t, tc.values, tc.want) })
	}
}

// TestHelmChartLongShutdown: a longer shutdown with a grace period that
// outlasts it renders, whatever the durations' spelling.
func TestHelmChartLongShutdown(t *testing.T) {
	t.Parallel()
	m, _ := helmTemplate(t, "long shutdown", map[string]any{
		"config":                        map[string]any{"shutdown_delay": "1m0.5s", "shutdown-timeout": "1m30s"},
		"terminationGracePeriodSeconds": 155,
	})
	checkWorkload(t, m)
}

// TestHelmChartEmptyDirStorage: where the cache is an emptyDir on the
// node's disk (the shared store's local caches, persistence.enabled
// false), the pods request that disk (ephemeral-storage, the emptyDir's
// sizeLimit) with the chart's default resources, as they would have to be
// told in resources, and a request of resources stays.
func TestHelmChartEmptyDirStorage(t *testing.T) {
	t.Parallel()
	shared := map[string]any{
		"replicaCount": 3,
		"sharedStore":  map[string]any{"enabled": true, "url": "s3://tfmirror-cache/prod?region=eu-west-1", "key": map[string]any{"existingSecret": "tfmirror-shared-store-key"}},
		"config":       map[string]any{"cache-max-bytes": "6GiB", "disk-reserve": "1GiB"},
		"tls":          map[string]any{"existingSecret": "tfmirror-tls"},
	}
	for name, values := range map[string]map[string]any{
		"shared store": shared,
		"no claim":     {"persistence": map[string]any{"enabled": false}, "config": map[string]any{"cache-max-bytes": "6GiB"}, "insecureHTTP": true},
		"numeric size": {"persistence": map[string]any{"enabled": false}, "config": map[string]any{"cache-max-bytes": "6GiB"}, "emptyDir": map[string]any{"sizeLimit": float64(10737418240)}, "insecureHTTP": true},
	} {
		m, _ := helmTemplate(t, name, values)
		w := checkWorkload(t, m)
		if got := w.container.Resources.Requests[corev1.ResourceEphemeralStorage]; got.Value() != 10<<30 {
			t.Errorf("%s: ephemeral-storage request %v, want the emptyDir's sizeLimit, 10Gi", name, got.String())
		}
		if got := w.container.Resources.Requests[corev1.ResourceMemory]; got.String() != "512Mi" {
			t.Errorf("%s: memory request %v, want the default resources' 512Mi", name, got.String())
		}
	}
	// A request of its own stays.
	values := chartValues(t, "shared-store-values.yaml")
	values["resources"].(map[string]any)["requests"].(map[string]any)["ephemeral-storage"] = "20Gi"
	m, _ := helmTemplate(t, "own request", values)
	if got := checkWorkload(t, m).container.Resources.Requests[corev1.ResourceEphemeralStorage]; got.String() != "20Gi" {
		t.Errorf("ephemeral-storage request %v, want resources' own 20Gi", got.String())
	}
}

// TestHelmChartREADME checks that the chart's README describes every
// value of values.yaml, by its dotted name in backquotes.
func TestHelmChartREADME(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(prefix+k+".", sub)
				continue
			}
			keys = append(keys, prefix+k)
		}
	}
	walk("", values)
	sort.Strings(keys)
	if len(keys) < 40 {
		t.Fatalf("only %d values found in values.yaml: %v", len(keys), keys)
	}
	for _, k := range keys {
		if !strings.Contains(string(readme), "`"+k+"`") {
			t.Errorf("README.md does not describe the value `%s`", k)
		}
	}
	// And names no value that does not exist.
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-zA-Z0-9.-]+)`").FindAllStringSubmatch(string(readme), -1) {
		if !slices.Contains(keys, m[1]) && !slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, m[1]+".") }) {
			t.Errorf("README.md describes `%s`, which values.yaml does not have", m[1])
		}
	}
}

// TestHelmChartConfigFile: a values file written for the chart that
// rendered one TFMIRROR_* variable per setting renders the same settings
// into the configuration file (each value as that chart's variable held
// it), the pods start with --config and no TFMIRROR_* variable, and
// tfmirror serve accepts the file.
func TestHelmChartConfigFile(t *testing.T) {
	t.Parallel()
	var values map[string]any
	if err := yaml.Unmarshal([]byte(`
config:
  allowed-origins: registry.terraform.io,tf.corp.example
  cache-max-bytes: 20GiB
  module-max-files: 5000
  http2: true
  offline: false
  versions-ttl: 5m
  public-url: ""
  log-level: debug
retention:
  keepVersions: 3
  keepVersionsPerMajor: true
  evictUnusedAfter: 30d
unsignedHosts: [tf.corp.example]
archiveLimits:
  maxUnpackedBytes: 4GiB
  maxEntries: 20000
auth:
  existingSecret: tokens
`), &values); err != nil {
		t.Fatal(err)
	}
	m, _ := helmTemplate(t, "config file", values)
	w := checkWorkload(t, m)
	// What the chart before the configuration file rendered as variables.
	want := map[string]string{
		"TFMIRROR_ALLOWED_ORIGINS": "registry.terraform.io,tf.corp.example", "TFMIRROR_CACHE_MAX_BYTES": "20GiB",
		"TFMIRROR_MODULE_MAX_FILES": "5000", "TFMIRROR_HTTP2": "true", "TFMIRROR_OFFLINE": "false",
		"TFMIRROR_VERSIONS_TTL": "5m", "TFMIRROR_LOG_LEVEL": "debug", "TFMIRROR_LOG_FORMAT": "json",
		"TFMIRROR_SHUTDOWN_TIMEOUT": "30s", "TFMIRROR_SHUTDOWN_DELAY": "5s", "TFMIRROR_KEEP_VERSIONS": "3", "TFMIRROR_KEEP_VERSIONS_PER_MAJOR": "true",
		"TFMIRROR_EVICT_UNUSED_AFTER": "30d", "TFMIRROR_ALLOW_UNSIGNED_HOSTS": "tf.corp.example",
		"TFMIRROR_ARCHIVE_MAX_UNPACKED_BYTES": "4GiB", "TFMIRROR_ARCHIVE_MAX_ENTRIES": "20000",
		"TFMIRROR_LISTEN": ":8443", "TFMIRROR_METRICS_LISTEN": ":9090", "TFMIRROR_DATA_DIR": dataDir,
		"TFMIRROR_AUTH_TOKENS_FILE": "/etc/tfmirror/auth/tokens",
		// New since: the generated certificate names the Service.
		"TFMIRROR_TLS_SAN": "corp-tfmirror,corp-tfmirror.mirror,corp-tfmirror.mirror.svc,corp-tfmirror.mirror.svc.cluster.local",
	}
	if !reflect.DeepEqual(w.env, want) {
		t.Errorf("settings:\n%v\nwant:\n%v", w.env, want)
	}
	for k := range w.rawEnv {
		// The image's variables only a variable overrides.
		if strings.HasPrefix(k, "TFMIRROR_") && w.fromSecrets[k] == nil && !imageSets(k) {
			t.Errorf("%s in the environment: settings are in the configuration file", k)
		}
	}
	if w.configPath != "/etc/tfmirror/config/tfmirror.json" || !slices.Equal(w.args[:2], []string{"--config", w.configPath}) {
		t.Errorf("args %v, configuration file %q", w.args, w.configPath)
	}
	if m.configMaps[0].Data["tfmirror.json"] == "" || len(m.configMaps[0].Data) != 1 {
		t.Errorf("ConfigMap data %v, want the one file", m.configMaps[0].Data)
	}
}

// TestHelmChartConfigLists: a setting of config given as a YAML list, as
// the configuration file takes it (the kustomize base's allowed_origins),
// is rendered as that list: it was rendered as Go prints a list, one
// string "[a b]", which tfmirror serve refuses at start (or takes as one
// platform, host or file of that name); and the chart's own checks read
// it as a list too.
func TestHelmChartConfigLists(t *testing.T) {
	t.Parallel()
	var values map[string]any
	if err := yaml.Unmarshal([]byte(`
config:
  allowed-origins: [registry.terraform.io, tf.corp.example]
  platforms: [linux_amd64, darwin_arm64]
unsignedHosts: [tf.corp.example]
`), &values); err != nil {
		t.Fatal(err)
	}
	m, _ := helmTemplate(t, "config lists", values)
	w := checkWorkload(t, m)
	for k, want := range map[string]string{
		"TFMIRROR_ALLOWED_ORIGINS": "registry.terraform.io,tf.corp.example",
		"TFMIRROR_PLATFORMS":       "linux_amd64,darwin_arm64",
	} {
		if w.env[k] != want {
			t.Errorf("%s=%q, want %q", k, w.env[k], want)
		}
	}
	configCheck(t, "config lists", "tfmirror.json", w.config)
}

// TestHelmChartConfigFileSpelling: a setting in config named as the
// configuration file names it (cache_max_bytes, the spelling of
// docs/configuration.md and the kustomize ConfigMaps) is the flag's
// (cache-max-bytes) to the chart's checks too, not only in the rendered
// file: they passed it by, so that an upstream proxy's password went into
// the ConfigMap, plain HTTP was served on the port the probes reach over
// HTTPS, and a cache larger than its claim was taken. Both spellings of
// one setting keep rendering as before: the file's wins.
func TestHelmChartConfigFileSpelling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, values, want string }{
		{"upstream proxy", "config: {upstream_proxy: \"http://u:p@proxy:3128\"}", "set upstreamProxy.existingSecret instead"},
		{"plain HTTP", "config: {insecure_http: true}", "config.insecure-http: set insecureHTTP instead"},
		{"the metrics address", "config: {metrics_listen: \":9091\"}", "the Service and the probes"},
		{"a cache larger than its claim", "config: {cache_max_bytes: 60GiB}", "config.cache-max-bytes 60GiB does not fit"},
		{"client tokens", "replicaCount: 3\nsharedStore: {enabled: true, url: s3://b/p, key: {existingSecret: k}}\nconfig: {cache_max_bytes: 6GiB, auth_tokens_file: /etc/extra/tokens}", "config.auth-tokens-file: set auth.existingSecret instead"},
		{"an unsigned host that is no origin", "config: {allowed_origins: registry.terraform.io}\nunsignedHosts: [registry.opentofu.org]", "registry.opentofu.org is not among config.allowed-origins"},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedSaying(t, tc.values, tc.want) })
	}
	t.Run("accepted", func(t *testing.T) {
		var values map[string]any
		if err := yaml.Unmarshal([]byte("config: {log_level: debug, public_url: \"https://tfmirror.example.com/\", cache_max_bytes: 20GiB}\nunsignedHosts: [registry.opentofu.org]\n"), &values); err != nil {
			t.Fatal(err)
		}
		m, notes := helmTemplate(t, "file spelling", values)
		w := checkWorkload(t, m)
		for k, want := range map[string]string{"TFMIRROR_LOG_LEVEL": "debug", "TFMIRROR_PUBLIC_URL": "https://tfmirror.example.com/", "TFMIRROR_CACHE_MAX_BYTES": "20GiB"} {
			if w.env[k] != want {
				t.Errorf("%s=%q, want %q", k, w.env[k], want)
			}
		}
		if !strings.Contains(notes, `url = "https://tfmirror.example.com/"`) {
			t.Errorf("the NOTES do not point Terraform at config.public_url:\n%s", notes)
		}
		configCheck(t, "file spelling", "tfmirror.json", w.config)
	})
}

// TestHelmChartConfigNumbers: a whole number written as a YAML number
// (cache-max-bytes: 6442450944) reaches tfmirror as its digits, which it
// takes; toString wrote 6.442450944e+09, which it refuses.
func TestHelmChartConfigNumbers(t *testing.T) {
	t.Parallel()
	var values map[string]any
	if err := yaml.Unmarshal([]byte("config:\n  cache-max-bytes: 6442450944\n"), &values); err != nil {
		t.Fatal(err)
	}
	m, _ := helmTemplate(t, "config numbers", values)
	w := checkWorkload(t, m)
	if got := w.env["TFMIRROR_CACHE_MAX_BYTES"]; got != "6442450944" {
		t.Errorf("TFMIRROR_CACHE_MAX_BYTES=%q, want 6442450944", got)
	}
	configCheck(t, "config numbers", "tfmirror.json", w.config)
}

// TestHelmChartSizeNumbers: the sizes the schema takes as integers,
// written as YAML numbers (a float64 to Helm), are their digits: the
// archive limit reaches tfmirror as one it takes (toString wrote
// 4.294967296e+09, which stopped the pods at start), and a claim's or an
// emptyDir's size is checked against the cache's limit as the same size
// written as 20Gi is (toString's form passed unchecked).
func TestHelmChartSizeNumbers(t *testing.T) {
	t.Parallel()
	read := func(s string) map[string]any {
		var values map[string]any
		if err := yaml.Unmarshal([]byte(s), &values); err != nil {
			t.Fatal(err)
		}
		return values
	}
	m, _ := helmTemplate(t, "archive limit", read("archiveLimits: {maxUnpackedBytes: 4294967296}"))
	w := checkWorkload(t, m)
	if got := w.env["TFMIRROR_ARCHIVE_MAX_UNPACKED_BYTES"]; got != "4294967296" {
		t.Errorf("TFMIRROR_ARCHIVE_MAX_UNPACKED_BYTES=%q, want 4294967296", got)
	}
	for _, tc := range []struct{ name, values string }{
		{"a claim of 20Gi in bytes", "persistence: {size: 21474836480}"},
		{"an emptyDir of 10Gi in bytes", "persistence: {enabled: false}\nemptyDir: {sizeLimit: 10737418240}"},
		{"a cache limit of 60GB in bytes", "config: {cache-max-bytes: 60000000000}"},
	} {
		_, err := helmRender(read(tc.values))
		if want := "does not fit the data volume"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, want)
		}
	}
}

// TestHelmChartTrustedProxies: trustedProxies becomes trusted_proxies,
// which tfmirror accepts; with client authentication behind an ingress and
// no trusted proxies, NOTES.txt says that one client's wrong token gets
// all refused, and how to tell them apart.
func TestHelmChartTrustedProxies(t *testing.T) {
	t.Parallel()
	const behind = "insecureHTTP: true\nauth: {existingSecret: tokens}\ningress: {enabled: true, hosts: [{host: mirror.example.com}]}\n"
	const warning = "trustedProxies is empty"
	for _, tc := range []struct {
		name, values, want string
		warned             bool
	}{
		{"behind an ingress, none trusted", behind, "", true},
		{"behind an ingress, trusted", behind + "trustedProxies: [10.244.0.0/16, 192.0.2.7]", "10.244.0.0/16,192.0.2.7", false},
		{"no auth", "insecureHTTP: true\n", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, notes := helmTemplate(t, tc.name, valuesOf(t, tc.values))
			w := checkWorkload(t, m)
			if got := w.env["TFMIRROR_TRUSTED_PROXIES"]; got != tc.want {
				t.Errorf("trusted_proxies %q, want %q", got, tc.want)
			}
			if got := strings.Contains(notes, warning); got != tc.warned {
				t.Errorf("NOTES.txt warns of no trusted proxies: %v, want %v:\n%s", got, tc.warned, notes)
			}
			if tc.want != "" {
				configCheck(t, tc.name, "tfmirror.json", w.config)
			}
		})
	}
}

// TestHelmChartExportKeyNotes: where more than one pod may sign exports
// (replicas, or an emptyDir that each restart empties) and no export key
// Secret is set, NOTES.txt says that each pod signs with a key of its own
// and to set exportKey.existingSecret; with the Secret, or one pod on a
// claim, it says nothing of it.
func TestHelmChartExportKeyNotes(t *testing.T) {
	t.Parallel()
	const shared = "sharedStore: {enabled: true, url: s3://b/p, key: {existingSecret: k}}\nconfig: {cache-max-bytes: 5GiB}\ntls: {existingSecret: t}\n"
	const warning = "exportKey.existingSecret is not set"
	for _, tc := range []struct {
		name, values string
		warned       bool
	}{
		{"one pod on a claim", "", false},
		{"one pod on an emptyDir", "persistence: {enabled: false}\nconfig: {cache-max-bytes: 5GiB}\ninsecureHTTP: true\n", true},
		{"two replicas", "replicaCount: 2\n" + shared, true},
		{"two replicas, one key", "replicaCount: 2\nexportKey: {existingSecret: export-key}\n" + shared, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, notes := helmTemplate(t, tc.name, valuesOf(t, tc.values))
			if got := strings.Contains(notes, warning); got != tc.warned {
				t.Errorf("NOTES.txt says each pod signs with its own key: %v, want %v:\n%s", got, tc.warned, notes)
			}
		})
	}
}

// TestHelmChartOriginCASecret: the egress proxy's CA may come from a
// Secret as well as a ConfigMap, several keys of it, each a file of
// origin_ca_file; the rendered settings are ones tfmirror serve accepts.
func TestHelmChartOriginCASecret(t *testing.T) {
	t.Parallel()
	var values map[string]any
	if err := yaml.Unmarshal([]byte("originCA: {existingSecret: corp-ca, keys: [root.pem, issuing.pem]}\ntls: {extraSANs: [mirror.corp.example]}"), &values); err != nil {
		t.Fatal(err)
	}
	m, notes := helmTemplate(t, "originCA secret", values)
	w := checkWorkload(t, m)
	if got := w.env["TFMIRROR_ORIGIN_CA_FILE"]; got != "/etc/tfmirror/origin-ca/root.pem,/etc/tfmirror/origin-ca/issuing.pem" {
		t.Errorf("origin_ca_file %q", got)
	}
	if v := w.volumes[mountAt(w.mounts, "/etc/tfmirror/origin-ca")]; v.Secret == nil || v.Secret.SecretName != "corp-ca" {
		t.Errorf("the origin CA volume %+v is not the Secret corp-ca", v)
	}
	if san := w.env["TFMIRROR_TLS_SAN"]; !strings.HasSuffix(san, ",mirror.corp.example") {
		t.Errorf("tls_san %q does not end with tls.extraSANs", san)
	}
	if !strings.Contains(notes, "mirror.corp.example") {
		t.Errorf("the NOTES do not name the extra name of the certificate:\n%s", notes)
	}
}

// TestHelmChartOriginCredentials: the tokens for private origin
// registries (--credentials-file) come from a Secret mounted as a file,
// readable by the pod's group only, never from TF_TOKEN_* variables in
// the manifest (config.credentials-file is refused: TestHelmChartRefuses).
func TestHelmChartOriginCredentials(t *testing.T) {
	t.Parallel()
	var values map[string]any
	if err := yaml.Unmarshal([]byte("originCredentials: {existingSecret: corp-registry, key: credentials.tfrc.json}"), &values); err != nil {
		t.Fatal(err)
	}
	m, _ := helmTemplate(t, "originCredentials", values)
	w := checkWorkload(t, m)
	const want = "/etc/tfmirror/origin-credentials/credentials.tfrc.json"
	if got := w.env["TFMIRROR_CREDENTIALS_FILE"]; got != want {
		t.Fatalf("credentials_file %q, want %s", got, want)
	}
	v := w.volumes[mountAt(w.mounts, path.Dir(want))]
	if v.Secret == nil || v.Secret.SecretName != "corp-registry" {
		t.Errorf("the origin credentials volume %+v is not the Secret corp-registry", v)
	}
	for _, e := range w.container.Env {
		if strings.HasPrefix(e.Name, "TF_TOKEN_") {
			t.Errorf("%s in the environment: origin tokens are a file", e.Name)
		}
	}
}

// TestHelmChartSchema: values.schema.json refuses a value the chart does
// not have (a misspelt name would otherwise be ignored without a word,
// and the release would run without, say, its client authentication) and
// a value of the wrong type, naming it; free-form values (config, policy,
// annotations, Kubernetes' own objects) take anything.
func TestHelmChartSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, values, want string
	}{
		{"misspelt top-level value", "persistance: {size: 100Gi}", "persistance"},
		{"misspelt nested value", "auth: {existingSecrets: tfmirror-auth}", "existingSecrets"},
		{"misspelt shared store switch", "sharedStore: {enable: true}", "enable"},
		{"replicas as a string", "replicaCount: \"1\"", "replicaCount"},
		{"a list as a string", "trustedProxies: 10.0.0.0/8", "trustedProxies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmRender(valuesOf(t, tc.values))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
	var values map[string]any
	if err := yaml.Unmarshal([]byte(`
config: {offline: true, cache-max-bytes: 10GiB, origin-retries: 3}
policy: {allow: ["registry.terraform.io/hashicorp/*"]}
podAnnotations: {a.example/b: c}
affinity: {nodeAffinity: {}}
resources: {requests: {cpu: 1}}
extraEnv: [{name: HTTPS_PROXY, value: "http://proxy:3128"}]
`), &values); err != nil {
		t.Fatal(err)
	}
	if _, err := helmRender(values); err != nil {
		t.Errorf("free-form values refused: %v", err)
	}
}

// TestHelmChartNameOverride: with nameOverride the objects and their
// app.kubernetes.io/name change, and the scrape job must still be
// tfmirror, the job the alert rules and the dashboard select
// (checkMonitoring).
func TestHelmChartNameOverride(t *testing.T) {
	t.Parallel()
	values := map[string]any{"nameOverride": "mirror", "serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}}
	helmLint(t, "nameOverride", values)
	m, _ := helmTemplate(t, "nameOverride", values)
	if len(m.services) != 1 || m.services[0].Name != release+"-mirror" {
		t.Fatalf("Services %v: want one named %s-mirror", m.services, release)
	}
	checkWorkload(t, m)
}

// refusedSaying renders the chart with values (YAML) and fails unless it
// is refused with an error holding want.
func refusedSaying(t *testing.T, values, want string) {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal([]byte(values), &v); err != nil {
		t.Fatal(err)
	}
	_, err := helmRender(v)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one saying %q", err, want)
	}
}

package deploy_test

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/yaml"
)

// checkListed fails for each YAML file in dir that its kustomization.yaml
// does not name (as a resource or a patch): a file kustomize ignores.
func checkListed(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
		Patches   []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{"kustomization.yaml": true}
	for _, r := range k.Resources {
		listed[r] = true
	}
	for _, p := range k.Patches {
		listed[p.Path] = true
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("%s is not listed in %s/kustomization.yaml", filepath.Base(f), dir)
		}
	}
}

// TestKubernetes builds the kustomize base: one replica (replicas with a
// cache each would each fetch every archive from the origins; they share
// a bucket in the shared-store overlay, as the chart does), its cache on a
// claim of the base, replaced whole on update (Recreate), no
// PodDisruptionBudget (one pod alone could never be drained).
func TestKubernetes(t *testing.T) {
	t.Parallel()
	checkListed(t, "kubernetes/base")
	m := kustomize(t, "kubernetes/base")
	w := checkWorkload(t, m)
	if w.kind != "Deployment" || w.replicas != 1 {
		t.Fatalf("a %s of %d replicas, want a Deployment of one", w.kind, w.replicas)
	}
	d := m.deployments[0]
	if d.Spec.Strategy.Type != "Recreate" {
		t.Errorf("strategy %q: the claim is ReadWriteOnce and Badger locks the cache, want Recreate", d.Spec.Strategy.Type)
	}
	// The certificate from a Secret: the one generated names no host
	// clients outside the cluster use.
	if w.env["TFMIRROR_TLS_CERT"] == "" {
		t.Error("no TFMIRROR_TLS_CERT: the generated certificate names no host clients use")
	}
	v := w.dataVolume
	if v.PersistentVolumeClaim == nil || len(m.claims) != 1 || m.claims[0].Name != v.PersistentVolumeClaim.ClaimName {
		t.Fatalf("the data volume %+v is not the base's claim", v)
	}
	c := m.claims[0]
	if !slices.Contains(c.Spec.AccessModes, corev1.ReadWriteOnce) || c.Spec.Resources.Requests.Storage().IsZero() {
		t.Errorf("claim %s: access modes %v, storage %v: want ReadWriteOnce and a size", c.Name, c.Spec.AccessModes, c.Spec.Resources.Requests.Storage())
	}
	// The data directory holds up to 1.25 times the limit plus the
	// reserve, and the file system keeps some of the volume.
	if limit := byteSize(t, w.env["TFMIRROR_CACHE_MAX_BYTES"]); limit == 0 || limit > c.Spec.Resources.Requests.Storage().Value()/3*2 {
		t.Errorf("TFMIRROR_CACHE_MAX_BYTES=%q: want a limit of at most 2/3 of the claim's %v", w.env["TFMIRROR_CACHE_MAX_BYTES"], c.Spec.Resources.Requests.Storage())
	}
	for _, s := range m.services {
		if s.Spec.ClusterIP == "None" {
			t.Errorf("headless Service %s: nothing needs one", s.Name)
		}
	}
	if len(m.serviceMonitors) != 1 || len(m.prometheusRules) != 1 {
		t.Errorf("%d ServiceMonitors and %d PrometheusRules, want one of each", len(m.serviceMonitors), len(m.prometheusRules))
	}
	checkConfigFileOnly(t, w)
}

// TestKubernetesSharedStore builds the overlay for replicas sharing a
// bucket: the base's Deployment scaled out with a local cache in an
// emptyDir each (see checkSharedStore), the base's claim gone, and the
// bucket's key Secret optional since IRSA needs none.
func TestKubernetesSharedStore(t *testing.T) {
	t.Parallel()
	checkListed(t, "kubernetes/shared-store")
	m := kustomize(t, "kubernetes/shared-store")
	if n := len(m.claims); n != 0 {
		t.Errorf("%d PersistentVolumeClaims left: the replicas' local caches are emptyDirs", n)
	}
	w := checkWorkload(t, m)
	checkSharedStore(t, m, w)
	if w.env["TFMIRROR_TLS_CERT"] == "" {
		t.Error("no TFMIRROR_TLS_CERT: the generated certificate names no host clients use")
	}
	for _, from := range w.container.EnvFrom {
		if from.SecretRef != nil && (from.SecretRef.Optional == nil || !*from.SecretRef.Optional) {
			t.Errorf("envFrom Secret %s is not optional: IRSA needs no Secret", from.SecretRef.Name)
		}
	}
	if len(m.serviceMonitors) != 1 || len(m.prometheusRules) != 1 {
		t.Errorf("%d ServiceMonitors and %d PrometheusRules, want one of each", len(m.serviceMonitors), len(m.prometheusRules))
	}
	checkConfigFileOnly(t, w)
}

// checkConfigFileOnly checks that w's settings are all in its
// configuration file: none in the environment but those that override
// the image's variables, which the file could not.
func checkConfigFileOnly(t *testing.T, w *workload) {
	t.Helper()
	if w.configPath == "" || len(w.config) == 0 {
		t.Error("no --config file")
	}
	for k := range w.rawEnv {
		if strings.HasPrefix(k, "TFMIRROR_") && w.fromSecrets[k] == nil && !imageSets(k) {
			t.Errorf("%s in the environment: settings are in the configuration file", k)
		}
	}
	if w.env["TFMIRROR_ALLOWED_ORIGINS"] == "" {
		t.Errorf("the configuration file names no origins: %s", w.config)
	}
	// The URL clients use is the user's to set (README.md's overlay): a
	// placeholder applied as it is would point the OCI door's token
	// realm, the CLI releases index and the status page's snippets at a
	// host that is not the mirror.
	if u := w.env["TFMIRROR_PUBLIC_URL"]; u != "" {
		t.Errorf("the configuration file sets public_url %q: leave it to the overlay", u)
	}
}

// TestKubernetesPolicy builds the overlay that adds a package policy to
// the base: the same workload and settings, and a policy block that
// tfmirror serve and config check accept, config check listing its rules.
func TestKubernetesPolicy(t *testing.T) {
	t.Parallel()
	checkListed(t, "kubernetes/policy")
	base := checkWorkload(t, kustomize(t, "kubernetes/base"))
	m := kustomize(t, "kubernetes/policy")
	w := checkWorkload(t, m) // tfmirror serve accepts the file
	checkConfigFileOnly(t, w)
	for k, v := range base.env {
		if w.env[k] != v {
			t.Errorf("%s=%q, the base's %q: the overlay must keep the base's settings", k, w.env[k], v)
		}
	}
	if len(w.env) != len(base.env) {
		t.Errorf("settings %v, the base's %v", w.env, base.env)
	}
	out := configCheck(t, "kubernetes/policy", "tfmirror.json", w.config)
	for _, want := range []string{
		"POLICY (7 rules",
		`deny "registry.terraform.io/hashicorp/null"`,
		`allow "registry.terraform.io/terraform-aws-modules/*/*"`,
		`deny_version "registry.terraform.io/hashicorp/aws" { versions = ">= 5.80.0, < 5.81.1" }`,
		"CVE-2026-1234: use 5.81.1",
		`minimum_release_age = "3d"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config check does not show %q:\n%s", want, out)
		}
	}
}

// TestKubernetesEgress builds the overlay for an egress proxy: the base's
// workload and settings, origin_ca_file naming a file of the mounted
// ConfigMap, and the upstream proxy, whose URL may carry a password, from
// a Secret's key (never the ConfigMap).
func TestKubernetesEgress(t *testing.T) {
	t.Parallel()
	checkListed(t, "kubernetes/egress")
	base := checkWorkload(t, kustomize(t, "kubernetes/base"))
	m := kustomize(t, "kubernetes/egress")
	w := checkWorkload(t, m) // the files are mounted, tfmirror serve accepts the settings
	checkConfigFileOnly(t, w)
	for k, v := range base.env {
		if w.env[k] != v {
			t.Errorf("%s=%q, the base's %q: the overlay must keep the base's settings", k, w.env[k], v)
		}
	}
	ca := w.env["TFMIRROR_ORIGIN_CA_FILE"]
	if ca == "" {
		t.Fatal("no origin_ca_file")
	}
	if v := w.volumes[mountAt(w.mounts, path.Dir(ca))]; v.ConfigMap == nil {
		t.Errorf("origin_ca_file %s is not in a mounted ConfigMap", ca)
	}
	ref := w.fromSecrets["TFMIRROR_UPSTREAM_PROXY"]
	if ref == nil || ref.Name == "" || ref.Key == "" {
		t.Errorf("TFMIRROR_UPSTREAM_PROXY does not come from a Secret's key: %+v", ref)
	}
	if d := m.deployments[0]; w.replicas != 1 || d.Spec.Strategy.Type != "Recreate" {
		t.Errorf("%d replicas, strategy %q: the overlay must keep the base's one replica", w.replicas, d.Spec.Strategy.Type)
	}
}

// TestKubernetesNamePrefix builds an overlay of the base with a
// namePrefix, as an operator's overlay often has: the objects are renamed,
// and the scrape job must still be tfmirror, the job the alert rules and
// the dashboard name (checkMonitoring), or the alert on a mirror that
// cannot be scraped never fires.
func TestKubernetesNamePrefix(t *testing.T) {
	t.Parallel()
	dir, rel := overlayDir(t)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources: ["+rel+"]\nnamePrefix: prod-\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := kustomize(t, dir)
	if len(m.services) != 1 || m.services[0].Name != "prod-tfmirror" {
		t.Fatalf("Services %v: want the base's, renamed prod-tfmirror", m.services)
	}
	checkWorkload(t, m)
}

// TestKubernetesREADMEOverlay builds the overlay the base's README shows
// (overlays/prod: the image pinned, the configuration file replaced to
// set public_url) over the base, as an operator copying it would: a patch
// of the ConfigMap replaces the whole file, so the example must carry
// every setting of the base's file, or following it silently drops one
// (the shutdown delay, whose absence sends clients to a stopping pod's
// closed port).
func TestKubernetesREADMEOverlay(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("kubernetes/base/README.md")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]string{} // overlays/prod/NAME -> its lines
	var cur string
	for _, line := range strings.Split(string(readme), "\n") {
		code, isCode := strings.CutPrefix(line, "       ")
		switch {
		case !isCode && strings.TrimSpace(line) != "":
			cur = ""
		case strings.HasPrefix(code, "# overlays/prod/"):
			cur = strings.TrimPrefix(code, "# overlays/prod/")
		case cur != "":
			files[cur] = append(files[cur], code)
		}
	}
	if len(files["kustomization.yaml"]) == 0 || len(files["configmap.yaml"]) == 0 {
		t.Fatalf("README.md has no overlays/prod/kustomization.yaml and configmap.yaml example: %v", files)
	}
	dir, rel := overlayDir(t)
	k := strings.Join(files["kustomization.yaml"], "\n")
	// The remote base of the release is this directory; the digest a
	// placeholder.
	k = regexp.MustCompile(`- github\.com/tfmirror/tfmirror//deploy/kubernetes/base\?ref=\S+`).ReplaceAllString(k, "- "+rel)
	k = strings.ReplaceAll(k, "sha256:...", "sha256:"+strings.Repeat("0", 64))
	if !strings.Contains(k, "- "+rel) {
		t.Fatalf("the README's overlay does not name the base at a tag as its resource:\n%s", k)
	}
	for name, content := range map[string]string{"kustomization.yaml": k, "configmap.yaml": strings.Join(files["configmap.yaml"], "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	baseW := checkWorkload(t, kustomize(t, "kubernetes/base"))
	w := checkWorkload(t, kustomize(t, dir))
	if w.env["TFMIRROR_PUBLIC_URL"] == "" {
		t.Error("the README's overlay sets no public_url, which it is there to show")
	}
	for k, v := range baseW.env {
		if w.env[k] != v {
			t.Errorf("%s=%q, the base's %q: the README's overlay replaces the base's file and must keep its settings", k, w.env[k], v)
		}
	}
}

// overlayDir is a new directory for an overlay of the base, and the
// base's path from it (kustomize takes no absolute path).
func overlayDir(t *testing.T) (dir, base string) {
	t.Helper()
	abs, err := filepath.Abs("kubernetes/base")
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	base, err = filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	return dir, base
}

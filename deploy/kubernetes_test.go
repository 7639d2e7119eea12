package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// TestKubernetes builds the kustomize base: replicas each with its own
// cache on a claim of the StatefulSet, governed by a headless Service.
func TestKubernetes(t *testing.T) {
	t.Parallel()
	checkListed(t, "kubernetes/base")
	m := kustomize(t, "kubernetes/base")
	w := checkWorkload(t, m)
	if w.kind != "StatefulSet" {
		t.Fatalf("a %s, want a StatefulSet", w.kind)
	}
	sts := m.statefulSets[0]
	if w.replicas < 2 {
		t.Errorf("replicas %d: want at least 2, which the PodDisruptionBudget lets drain one at a time", w.replicas)
	}
	// The certificate from a Secret: the generated one names no cluster host.
	if w.env["TFMIRROR_TLS_CERT"] == "" {
		t.Error("no TFMIRROR_TLS_CERT: the generated certificate names no host clients use")
	}
	// A claim per replica at the data dir.
	claims := sts.Spec.VolumeClaimTemplates
	if len(claims) != 1 || w.mounts[claims[0].Name] != w.env["TFMIRROR_DATA_DIR"] {
		t.Errorf("want one volumeClaimTemplate mounted at TFMIRROR_DATA_DIR=%s; mounts %v", w.env["TFMIRROR_DATA_DIR"], w.mounts)
	} else if claims[0].Spec.Resources.Requests.Storage().IsZero() {
		t.Error("volumeClaimTemplate requests no storage")
	}
	// The headless Service governs the StatefulSet.
	found := false
	for _, s := range m.services {
		found = found || (s.Name == sts.Spec.ServiceName && s.Spec.ClusterIP == "None")
	}
	if !found {
		t.Errorf("StatefulSet serviceName %q is not a headless Service of the base", sts.Spec.ServiceName)
	}
	if len(m.serviceMonitors) != 1 || len(m.prometheusRules) != 1 {
		t.Errorf("%d ServiceMonitors and %d PrometheusRules, want one of each", len(m.serviceMonitors), len(m.prometheusRules))
	}
	checkConfigFileOnly(t, w)
}

// TestKubernetesSharedStore builds the overlay for replicas sharing a
// bucket: a Deployment in place of the StatefulSet (see checkSharedStore),
// the headless Service gone, and the bucket's key Secret optional since
// IRSA needs none.
func TestKubernetesSharedStore(t *testing.T) {
	t.Parallel()
	checkListed(t, "kubernetes/shared-store")
	m := kustomize(t, "kubernetes/shared-store")
	if n := len(m.statefulSets); n != 0 {
		t.Errorf("%d StatefulSets left: the Deployment replaces the base's", n)
	}
	for _, s := range m.services {
		if s.Spec.ClusterIP == "None" {
			t.Errorf("headless Service %s left: only the StatefulSet needed it", s.Name)
		}
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
// configuration file: none in the environment.
func checkConfigFileOnly(t *testing.T, w *workload) {
	t.Helper()
	if w.configPath == "" || len(w.config) == 0 {
		t.Error("no --config file")
	}
	for k := range w.rawEnv {
		if strings.HasPrefix(k, "TFMIRROR_") {
			t.Errorf("%s in the environment: settings are in the configuration file", k)
		}
	}
	if w.env["TFMIRROR_ALLOWED_ORIGINS"] == "" || w.env["TFMIRROR_PUBLIC_URL"] == "" {
		t.Errorf("the configuration file names no origins or public URL: %s", w.config)
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

package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/tfmirror/tfmirror/deploy/internal/image"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// workload is a StatefulSet or Deployment, and what checkWorkload found in
// it.
type workload struct {
	kind, name string
	replicas   int32
	selector   *metav1.LabelSelector
	pod        *corev1.PodTemplateSpec

	container *corev1.Container
	// env is every setting by its TFMIRROR_* name: explicit values, the
	// ConfigMaps' data, the --config file's settings and the image's
	// environment.
	env map[string]string
	// rawEnv is the container's environment alone; config the --config
	// file (its path in the container and its content), if any.
	rawEnv     map[string]string
	configPath string
	config     []byte
	args       []string          // after "serve"
	mounts     map[string]string // volume name -> mount path
	// dataDir is the data directory (TFMIRROR_DATA_DIR), dataVolume the
	// volume it is on, mounted at the image's data directory.
	dataDir    string
	dataVolume corev1.Volume
	volumes    map[string]corev1.Volume
	scheme     string // of the mirror's port: https, or http with --insecure-http
	// fromSecrets are the settings whose values come from a Secret's key.
	fromSecrets map[string]*corev1.SecretKeySelector
}

// secretExample is a value of the kind a Secret holds for each secret
// setting, standing for it where the binary checks the settings.
var secretExample = map[string]string{
	"TFMIRROR_UPSTREAM_PROXY": "http://user:password@proxy.corp.example:3128",
	// The CLI releases' origins: an internal copy's path (a user name,
	// a password, a query or a fragment in the URL is refused at start;
	// its token comes from the credentials file).
	"TFMIRROR_RELEASES_HASHICORP_URL":    "https://artifactory.corp.example/hashicorp-releases/",
	"TFMIRROR_RELEASES_OPENTOFU_URL":     "https://artifactory.corp.example/opentofu-releases/",
	"TFMIRROR_RELEASES_OPENTOFU_API_URL": "https://artifactory.corp.example/opentofu-releases/api.json",
}

// secretSettings are the TFMIRROR_* variables of the settings that
// docs/configuration.md (generated from the settings table) marks secret:
// their values may carry a credential.
func secretSettings(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, row := range strings.Split(string(data), "\n") {
		if !strings.Contains(row, "**Secret:**") {
			continue
		}
		cols := strings.Split(row, "|")
		if len(cols) < 3 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cols[2]), "`")
		out[name] = true
		if _, ok := secretExample[name]; !ok {
			t.Errorf("docs/configuration.md marks %s secret: give secretExample a value of its kind", name)
		}
	}
	if !out["TFMIRROR_UPSTREAM_PROXY"] {
		t.Fatalf("docs/configuration.md marks no secret setting (TFMIRROR_UPSTREAM_PROXY): %v", out)
	}
	return out
}

// theWorkload returns the one Deployment or StatefulSet of m.
func theWorkload(t *testing.T, m *manifests) *workload {
	t.Helper()
	if n := len(m.deployments) + len(m.statefulSets); n != 1 {
		t.Fatalf("%s: want one Deployment or StatefulSet, have %d", m.where, n)
	}
	if len(m.deployments) == 1 {
		d := m.deployments[0]
		return &workload{kind: "Deployment", name: d.Name, replicas: ptrOr(d.Spec.Replicas, 1), selector: d.Spec.Selector, pod: &d.Spec.Template}
	}
	s := m.statefulSets[0]
	return &workload{kind: "StatefulSet", name: s.Name, replicas: ptrOr(s.Spec.Replicas, 1), selector: s.Spec.Selector, pod: &s.Spec.Template}
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// selects reports whether sel selects set; an empty selector selects
// nothing here.
func selects(t *testing.T, sel *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Errorf("selector %v: %v", sel, err)
		return false
	}
	return s.Matches(labels.Set(set))
}

// checkNames checks every object's name and labels as the API server would.
func checkNames(t *testing.T, m *manifests) {
	t.Helper()
	var metas, templates []metav1.ObjectMeta
	for _, o := range m.deployments {
		metas, templates = append(metas, o.ObjectMeta), append(templates, o.Spec.Template.ObjectMeta)
	}
	for _, o := range m.statefulSets {
		metas, templates = append(metas, o.ObjectMeta), append(templates, o.Spec.Template.ObjectMeta)
	}
	for _, o := range m.services {
		metas = append(metas, o.ObjectMeta)
		if errs := validation.IsDNS1035Label(o.Name); len(errs) > 0 {
			t.Errorf("%s: Service name %q: %v", m.where, o.Name, errs)
		}
	}
	for _, o := range m.configMaps {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.serviceAccounts {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.claims {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.pdbs {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.ingresses {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.httpRoutes {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.serviceMonitors {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.prometheusRules {
		metas = append(metas, o.ObjectMeta)
	}
	for _, meta := range metas {
		if errs := validation.IsDNS1123Subdomain(meta.Name); len(errs) > 0 {
			t.Errorf("%s: name %q: %v", m.where, meta.Name, errs)
		}
	}
	// Pod templates have labels but no name.
	for _, meta := range append(metas, templates...) {
		for k, v := range meta.Labels {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Errorf("%s: %s: label key %q: %v", m.where, meta.Name, k, errs)
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("%s: %s: label %s value %q: %v", m.where, meta.Name, k, v, errs)
			}
		}
	}
}

// checkWorkload checks what every rendering has in common: one workload
// whose one container runs tfmirror serve with valid TFMIRROR_* settings
// and flags, ports and probes as the flags say, resources, a non-root
// security context, every file flag in a mounted Secret or ConfigMap, a
// grace period longer than the shutdown timeout; Services that select the
// pods and target their ports; ingresses and routes that name a Service
// port; a ServiceMonitor selecting the one Service with the metrics port,
// as job "tfmirror"; a PodDisruptionBudget when there is more than one
// replica; alert rules as deploy/monitoring's.
func checkWorkload(t *testing.T, m *manifests) *workload {
	t.Helper()
	checkNames(t, m)
	w := theWorkload(t, m)
	pod := w.pod
	if !selects(t, w.selector, pod.Labels) {
		t.Errorf("%s: %s selector %v does not select its pods %v", m.where, w.kind, w.selector, pod.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%s: want one container, have %d", m.where, len(pod.Spec.Containers))
	}
	c := &pod.Spec.Containers[0]
	w.container = c

	// Ports by name.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}

	// Environment: explicit values plus the ConfigMaps it loads (Secrets
	// loaded whole hold credentials, not settings).
	env := map[string]string{}
	secrets := secretSettings(t)
	w.fromSecrets = map[string]*corev1.SecretKeySelector{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("%s: %s is set twice", m.where, e.Name)
		}
		switch {
		case secrets[e.Name] && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil):
			t.Errorf("%s: %s may carry a credential: it must come from a Secret (valueFrom.secretKeyRef), not a value in the manifest", m.where, e.Name)
		case secrets[e.Name]:
			// A value of the kind the Secret holds, for the binary to
			// check the rest of the settings with.
			w.fromSecrets[e.Name] = e.ValueFrom.SecretKeyRef
			env[e.Name] = secretExample[e.Name]
			continue
		case e.ValueFrom != nil && strings.HasPrefix(e.Name, "TFMIRROR_"):
			t.Errorf("%s: %s comes from valueFrom: settings are values, secrets are files (or Secrets, for settings whose value is a credential)", m.where, e.Name)
		}
		env[e.Name] = e.Value
	}
	configMaps := map[string]*corev1.ConfigMap{}
	for _, cm := range m.configMaps {
		configMaps[cm.Name] = cm
	}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			continue
		}
		cm, ok := configMaps[from.ConfigMapRef.Name]
		if !ok {
			t.Errorf("%s: envFrom: no ConfigMap %q", m.where, from.ConfigMapRef.Name)
			continue
		}
		for k, v := range cm.Data {
			if secrets[k] {
				t.Errorf("%s: %s, which may carry a credential, is in ConfigMap %s: it belongs in a Secret", m.where, k, cm.Name)
			}
			if _, dup := env[k]; dup {
				t.Errorf("%s: %s is set both in the %s and ConfigMap %s", m.where, k, w.kind, cm.Name)
			}
			env[k] = v
		}
	}
	if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("%s: container command %v args %v, want the image's entrypoint with args [serve ...]", m.where, c.Command, c.Args)
	} else {
		w.args = c.Args[1:]
	}
	w.rawEnv = maps.Clone(env)
	// The image's environment (package image) is the container's where
	// the container does not set the variable, and wins over the
	// configuration file as any TFMIRROR_* variable does.
	imageEnv := map[string]string{}
	for _, e := range image.Runtime().Env {
		if k, v, _ := strings.Cut(e, "="); strings.HasPrefix(k, "TFMIRROR_") {
			if _, set := env[k]; !set {
				imageEnv[k] = v
			}
		}
	}
	// The configuration file: a key of a ConfigMap mounted whole (so that
	// the kubelet updates it and SIGHUP reads it again), in JSON.
	for i, a := range w.args {
		if argFlag(a) == "config" && i+1 < len(w.args) && !strings.Contains(a, "=") {
			w.configPath = w.args[i+1]
		}
	}
	if w.configPath == "" {
		w.configPath = env["TFMIRROR_CONFIG"]
	}
	if w.configPath != "" {
		w.config = configFileOf(t, m, pod, c, w.configPath)
		for attr, v := range decodeConfig(t, m.where, w.configPath, w.config) {
			k := "TFMIRROR_" + strings.ToUpper(attr)
			if secrets[k] {
				t.Errorf("%s: %s, which may carry a credential, is in the configuration file, a ConfigMap: it belongs in a Secret", m.where, attr)
			}
			if _, dup := env[k]; dup {
				t.Errorf("%s: %s is set both in the environment and in the configuration file (as %s)", m.where, k, attr)
			}
			if iv, ok := imageEnv[k]; ok {
				t.Errorf("%s: %s in the configuration file is never in force: the image's %s=%s wins over it, so an edit of it does nothing", m.where, attr, k, iv)
			}
			env[k] = v
		}
	}
	maps.Copy(env, imageEnv)
	w.env = env
	for _, a := range w.args {
		if f := argFlag(a); f != "" && env["TFMIRROR_"+strings.ToUpper(strings.ReplaceAll(f, "-", "_"))] != "" {
			t.Errorf("%s: --%s is set both as an argument and in the environment or file", m.where, f)
		}
	}
	inForce := maps.Clone(w.rawEnv)
	maps.Copy(inForce, imageEnv)
	checkServe(t, m.where, w.args, inForce, map[string][]byte{w.configPath: w.config})

	// Plain HTTP only where asked for; the probes and ports follow.
	w.scheme = "https"
	if env["TFMIRROR_INSECURE_HTTP"] == "true" || slices.Contains(w.args, "--insecure-http") {
		w.scheme = "http"
	}
	if ports[w.scheme] != int32(portOf(t, env["TFMIRROR_LISTEN"])) || ports["metrics"] != int32(portOf(t, env["TFMIRROR_METRICS_LISTEN"])) {
		t.Errorf("%s: container ports %v, want %s on %s and metrics on %s as the flags say", m.where, ports, w.scheme, env["TFMIRROR_LISTEN"], env["TFMIRROR_METRICS_LISTEN"])
	}
	// Liveness on the metrics listener: the mirror's port takes no probe
	// while --max-connections connections are open, and a busy mirror
	// restarted drops them all.
	for _, probe := range []struct {
		name, path, port, scheme string
		p                        *corev1.Probe
	}{
		{"livenessProbe", "/healthz", "metrics", "http", c.LivenessProbe},
		{"readinessProbe", "/readyz", w.scheme, w.scheme, c.ReadinessProbe},
		{"startupProbe", "/healthz", w.scheme, w.scheme, c.StartupProbe},
	} {
		if probe.p == nil || probe.p.HTTPGet == nil {
			t.Errorf("%s: no %s", m.where, probe.name)
			continue
		}
		g := probe.p.HTTPGet
		if g.Path != probe.path || !strings.EqualFold(string(g.Scheme), probe.scheme) || g.Port != intstr.FromString(probe.port) {
			t.Errorf("%s: %s GET %s on %v with %s, want GET %s on port %s with scheme %s", m.where, probe.name, g.Path, g.Port.String(), g.Scheme, probe.path, probe.port, strings.ToUpper(probe.scheme))
		}
		// Kubernetes' default of one second fails a probe that a node
		// under load (a cache opening, a burst of downloads) answers late,
		// and a failed startup probe restarts the pod.
		if probe.p.TimeoutSeconds < 5 {
			t.Errorf("%s: %s times out after %ds (0: Kubernetes' 1s), want at least 5s as the others", m.where, probe.name, probe.p.TimeoutSeconds)
		}
	}

	// Resources.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("%s: no %s request", m.where, r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Errorf("%s: no memory limit", m.where)
	}

	// Non-root, as the image; no service account token.
	psc := pod.Spec.SecurityContext
	if psc == nil || !ptrOr(psc.RunAsNonRoot, false) || ptrOr(psc.RunAsUser, 0) == 0 || psc.FSGroup == nil {
		t.Errorf("%s: pod securityContext %+v: want runAsNonRoot, a non-zero runAsUser and an fsGroup (for the volume)", m.where, psc)
	} else if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod seccompProfile %v, want RuntimeDefault", m.where, psc.SeccompProfile)
	}
	csc := c.SecurityContext
	if csc == nil || ptrOr(csc.AllowPrivilegeEscalation, true) || !ptrOr(csc.ReadOnlyRootFilesystem, false) ||
		csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
		t.Errorf("%s: container securityContext %+v: want allowPrivilegeEscalation false, readOnlyRootFilesystem true, capabilities drop ALL", m.where, csc)
	}
	if ptrOr(pod.Spec.AutomountServiceAccountToken, true) {
		t.Errorf("%s: the pods get a service account token they do not use", m.where)
	}

	// Volumes: each mount has its volume and each volume is mounted; the
	// data directory and /tmp (the root file system is read-only) are
	// writable.
	w.mounts = map[string]string{}
	w.volumes = map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		w.volumes[v.Name] = v
	}
	for _, vm := range c.VolumeMounts {
		w.mounts[vm.Name] = vm.MountPath
		if _, ok := w.volumes[vm.Name]; !ok && !slices.ContainsFunc(claimTemplates(m), func(c corev1.PersistentVolumeClaim) bool { return c.Name == vm.Name }) {
			t.Errorf("%s: mount %s at %s: no such volume", m.where, vm.Name, vm.MountPath)
		}
	}
	for name := range w.volumes {
		if _, ok := w.mounts[name]; !ok {
			t.Errorf("%s: volume %s is not mounted", m.where, name)
		}
	}
	checkDataDir(t, m, w)
	if mountAt(w.mounts, "/tmp") == "" {
		t.Errorf("%s: no volume at /tmp: the root file system is read-only", m.where)
	}
	checkFiles(t, m, w)

	// Shutdown: a delay answering /readyz 503 first, so that the Service
	// takes the pod out before its port closes, and a grace period that
	// outlasts the delay and --shutdown-timeout together.
	shutdown, err := time.ParseDuration(env["TFMIRROR_SHUTDOWN_TIMEOUT"])
	if err != nil {
		shutdown = 30 * time.Second
	}
	delay, err := time.ParseDuration(env["TFMIRROR_SHUTDOWN_DELAY"])
	if err != nil || delay <= 0 {
		t.Errorf("%s: no --shutdown-delay (%q): a client the Service still routes to a stopping pod meets a refused connection", m.where, env["TFMIRROR_SHUTDOWN_DELAY"])
	}
	if grace := ptrOr(pod.Spec.TerminationGracePeriodSeconds, 30); time.Duration(grace)*time.Second <= delay+shutdown {
		t.Errorf("%s: terminationGracePeriodSeconds %d does not outlast the shutdown delay %v and timeout %v", m.where, grace, delay, shutdown)
	}

	checkServices(t, m, w, ports)
	checkMonitoring(t, m)

	// A PodDisruptionBudget with more than one replica (one alone could
	// never be drained), covering the pods and allowing progress.
	switch {
	case w.replicas > 1 && len(m.pdbs) != 1:
		t.Errorf("%s: %d replicas and %d PodDisruptionBudgets, want one", m.where, w.replicas, len(m.pdbs))
	case w.replicas <= 1 && len(m.pdbs) != 0:
		t.Errorf("%s: a PodDisruptionBudget for one replica blocks node drains", m.where)
	case len(m.pdbs) == 1:
		pdb := m.pdbs[0]
		if !selects(t, pdb.Spec.Selector, pod.Labels) {
			t.Errorf("%s: PodDisruptionBudget does not select the pods %v", m.where, pod.Labels)
		}
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() < 1 {
			t.Errorf("%s: PodDisruptionBudget maxUnavailable %v: want at least 1", m.where, pdb.Spec.MaxUnavailable)
		}
	}
	return w
}

// imageSets says whether the image's environment sets the variable k.
func imageSets(k string) bool {
	return slices.ContainsFunc(image.Runtime().Env, func(e string) bool { return strings.HasPrefix(e, k+"=") })
}

// checkDataDir checks that the data directory is on the volume mounted at
// the image's data directory (dataDir): on a claim, the volume's root,
// where every release kept the cache, so that an upgrade keeps it; on an
// emptyDir, which the kubelet makes root's and writable by all users
// (0777), a directory below its root, which tfmirror makes its user's
// alone: the volume's root is not its user's to tighten, and tfmirror
// would warn about it at every start.
func checkDataDir(t *testing.T, m *manifests, w *workload) {
	t.Helper()
	w.dataDir = w.env["TFMIRROR_DATA_DIR"]
	name := mountAt(w.mounts, dataDir)
	if name == "" {
		t.Errorf("%s: no volume at %s, the image's data directory", m.where, dataDir)
		return
	}
	w.dataVolume = w.volumes[name]
	if w.dataVolume.Name == "" {
		// A StatefulSet's claim template.
		w.dataVolume = corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}
	}
	switch {
	case w.dataVolume.EmptyDir != nil:
		if path.Clean(w.dataDir) == dataDir || !strings.HasPrefix(path.Clean(w.dataDir), dataDir+"/") {
			t.Errorf("%s: TFMIRROR_DATA_DIR=%q on an emptyDir mounted at %s: want a directory below it, which tfmirror makes its own (the kubelet makes the volume's root 0777 and root's)", m.where, w.dataDir, dataDir)
		}
		// The cache is on the node's disk: without a request for it the
		// scheduler places the pod on a node whatever its free disk, and
		// the kubelet, short of disk, evicts first the pods using more
		// than they requested.
		if limit := w.dataVolume.EmptyDir.SizeLimit; limit == nil {
			t.Errorf("%s: the data directory's emptyDir has no sizeLimit", m.where)
		} else if req := w.container.Resources.Requests[corev1.ResourceEphemeralStorage]; req.Cmp(*limit) < 0 {
			t.Errorf("%s: ephemeral-storage request %v is less than the cache's emptyDir sizeLimit %v", m.where, req.String(), limit.String())
		}
	case w.dataVolume.Ephemeral != nil:
		// Each pod's own claim, new with it: no earlier cache to keep, and
		// a root the fsGroup's (with a file system's lost+found).
		if path.Clean(w.dataDir) == dataDir || !strings.HasPrefix(path.Clean(w.dataDir), dataDir+"/") {
			t.Errorf("%s: TFMIRROR_DATA_DIR=%q on an ephemeral volume mounted at %s: want a directory below it, which tfmirror makes its own", m.where, w.dataDir, dataDir)
		}
		if tmpl := w.dataVolume.Ephemeral.VolumeClaimTemplate; tmpl == nil {
			t.Errorf("%s: the data directory's ephemeral volume has no volumeClaimTemplate", m.where)
		} else if !slices.Equal(tmpl.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) || tmpl.Spec.Resources.Requests.Storage().IsZero() {
			t.Errorf("%s: the data directory's ephemeral volume: access modes %v, storage %v: want ReadWriteOnce (one pod's) and a size", m.where, tmpl.Spec.AccessModes, tmpl.Spec.Resources.Requests.Storage())
		}
	case w.dataDir != dataDir:
		t.Errorf("%s: TFMIRROR_DATA_DIR=%q on a persistent volume mounted at %s: want its root, where earlier releases kept the cache", m.where, w.dataDir, dataDir)
	}
}

func claimTemplates(m *manifests) []corev1.PersistentVolumeClaim {
	if len(m.statefulSets) == 1 {
		return m.statefulSets[0].Spec.VolumeClaimTemplates
	}
	return nil
}

// mountAt returns the name of the volume mounted at dir, or "".
func mountAt(mounts map[string]string, dir string) string {
	for name, p := range mounts {
		if p == dir {
			return name
		}
	}
	return ""
}

// fileFlags are the flags whose values are files tfmirror reads, and
// whether they hold secrets.
var fileFlags = map[string]bool{
	"tls-cert": false, "tls-key": true, "auth-tokens-file": true, "url-signing-key-file": true,
	"shared-store-key-file": true, "shared-store-previous-key-file": true,
	"export-key": true, "credentials-file": true, "trusted-export-keys": false, "trusted-publisher-keys": false,
	"module-source-credentials": true, "origin-ca-file": false,
}

// dirFlags are the flags whose values are directories tfmirror reads, and
// whether it reads them again when they change.
var dirFlags = map[string]bool{"pins-dir": true}

// flagValue is the value w gives tfmirror serve's flag: the last
// argument naming it, else its TFMIRROR_* variable.
func flagValue(w *workload, flag string) string {
	value := w.env["TFMIRROR_"+strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))]
	for i, a := range w.args {
		if argFlag(a) == flag {
			if _, v, ok := strings.Cut(a, "="); ok {
				value = v
			} else if i+1 < len(w.args) {
				value = w.args[i+1]
			}
		}
	}
	return value
}

// checkFiles checks that every file a flag names is in a mounted Secret
// (for secrets) or ConfigMap, under a key the volume has, that every
// directory a flag names is a mounted Secret or ConfigMap (whole, where
// tfmirror reads it again on changes), and that the certificate and key
// come together.
func checkFiles(t *testing.T, m *manifests, w *workload) {
	t.Helper()
	for flag, secret := range fileFlags {
		value := flagValue(w, flag)
		if value == "" {
			continue
		}
		for _, file := range strings.Split(value, ",") {
			if flag == "trusted-publisher-keys" {
				ns, f, ok := strings.Cut(file, "=")
				if host, name, ok2 := strings.Cut(ns, "/"); !ok || !ok2 || host == "" || name == "" || strings.Contains(name, "/") {
					t.Errorf("%s: --%s entry %q: want HOST/NAMESPACE=FILE", m.where, flag, file)
					continue
				}
				file = f
			}
			vol, ok := w.volumes[mountAt(w.mounts, path.Dir(file))]
			switch {
			case !ok:
				t.Errorf("%s: --%s %s is not in a mounted volume (mounts %v)", m.where, flag, file, w.mounts)
			case secret && vol.Secret == nil:
				t.Errorf("%s: --%s %s holds a secret and is not in a Secret's volume", m.where, flag, file)
			case vol.Secret == nil && vol.ConfigMap == nil:
				t.Errorf("%s: --%s %s is not in a Secret's or ConfigMap's volume", m.where, flag, file)
			default:
				var items []corev1.KeyToPath
				if vol.Secret != nil {
					items = vol.Secret.Items
				} else {
					items = vol.ConfigMap.Items
				}
				if len(items) > 0 && !slices.ContainsFunc(items, func(k corev1.KeyToPath) bool { return k.Path == path.Base(file) }) {
					t.Errorf("%s: --%s %s: volume %s has no item at %s", m.where, flag, file, vol.Name, path.Base(file))
				}
				mode := fileMode(vol, path.Base(file))
				if secret && mode&0o007 != 0 {
					t.Errorf("%s: --%s %s holds a secret and is mounted with mode %04o from volume %s: readable by any user of the container; give the volume a defaultMode such as 0440 (the pod's fsGroup reads it)", m.where, flag, file, mode, vol.Name)
				}
				// tfmirror refuses a file of secrets or trust that its
				// group or all users may write, unless its mount is
				// read-only (the kubelet's of a Secret or ConfigMap is):
				// the assets give none such a mode, wherever they are
				// mounted.
				if mode&0o022 != 0 {
					t.Errorf("%s: --%s %s is mounted with mode %04o from volume %s: writable by its group or all users, which tfmirror refuses but on a read-only mount; give the volume a defaultMode such as 0440 or 0644", m.where, flag, file, mode, vol.Name)
				}
			}
		}
	}
	for flag, reread := range dirFlags {
		dir := flagValue(w, flag)
		if dir == "" {
			continue
		}
		name := mountAt(w.mounts, path.Clean(dir))
		vol, ok := w.volumes[name]
		switch {
		case !ok:
			t.Errorf("%s: --%s %s is not a mounted volume (mounts %v)", m.where, flag, dir, w.mounts)
		case vol.Secret == nil && vol.ConfigMap == nil:
			t.Errorf("%s: --%s %s is not a Secret's or ConfigMap's volume", m.where, flag, dir)
		case reread:
			// The kubelet updates a ConfigMap's or Secret's files in place
			// only where the volume is mounted whole.
			for _, vm := range w.container.VolumeMounts {
				if vm.Name == name && vm.SubPath != "" {
					t.Errorf("%s: --%s %s is mounted by subPath, which the kubelet never updates", m.where, flag, dir)
				}
			}
		}
	}
	if (w.env["TFMIRROR_TLS_CERT"] == "") != (w.env["TFMIRROR_TLS_KEY"] == "") {
		t.Errorf("%s: TFMIRROR_TLS_CERT and TFMIRROR_TLS_KEY come together", m.where)
	}
}

// fileMode is the mode the kubelet gives the file at name of a Secret's
// or ConfigMap's volume: the item's mode, else the volume's defaultMode,
// else Kubernetes' default, 0644.
func fileMode(v corev1.Volume, name string) int32 {
	var items []corev1.KeyToPath
	var defaultMode *int32
	switch {
	case v.Secret != nil:
		items, defaultMode = v.Secret.Items, v.Secret.DefaultMode
	case v.ConfigMap != nil:
		items, defaultMode = v.ConfigMap.Items, v.ConfigMap.DefaultMode
	}
	for _, it := range items {
		if it.Path == name && it.Mode != nil {
			return *it.Mode
		}
	}
	return ptrOr(defaultMode, corev1.SecretVolumeSourceDefaultMode)
}

// checkServices checks that the Services select the pods and target their
// ports, and that ingresses and routes name a Service port.
func checkServices(t *testing.T, m *manifests, w *workload, ports map[string]int32) {
	t.Helper()
	byName := map[string]*corev1.Service{}
	for _, s := range m.services {
		byName[s.Name] = s
		if !selects(t, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}, w.pod.Labels) {
			t.Errorf("%s: Service %s selects %v, not the pods %v", m.where, s.Name, s.Spec.Selector, w.pod.Labels)
		}
		for _, p := range s.Spec.Ports {
			if _, ok := ports[p.TargetPort.String()]; !ok || p.TargetPort.Type != intstr.String {
				t.Errorf("%s: Service %s port %s targets %v, not a named container port", m.where, s.Name, p.Name, p.TargetPort.String())
			}
		}
	}
	servicePort := func(where, name string, match func(corev1.ServicePort) bool) {
		s, ok := byName[name]
		if !ok {
			t.Errorf("%s: %s: no Service %q", m.where, where, name)
			return
		}
		i := slices.IndexFunc(s.Spec.Ports, match)
		if i < 0 {
			t.Errorf("%s: %s: Service %s has no such port", m.where, where, name)
		} else if s.Spec.Ports[i].TargetPort.String() != w.scheme {
			t.Errorf("%s: %s: Service %s port %s is not the mirror's", m.where, where, name, s.Spec.Ports[i].Name)
		}
	}
	for _, ing := range m.ingresses {
		if len(ing.Spec.Rules) == 0 {
			t.Errorf("%s: Ingress %s has no rules", m.where, ing.Name)
		}
		for _, r := range ing.Spec.Rules {
			if r.HTTP == nil || len(r.HTTP.Paths) == 0 {
				t.Errorf("%s: Ingress %s rule %s has no paths", m.where, ing.Name, r.Host)
				continue
			}
			for _, p := range r.HTTP.Paths {
				b := p.Backend.Service
				if b == nil {
					t.Errorf("%s: Ingress %s: a backend that is not a Service", m.where, ing.Name)
					continue
				}
				servicePort("Ingress "+ing.Name, b.Name, func(sp corev1.ServicePort) bool {
					return (b.Port.Name != "" && sp.Name == b.Port.Name) || (b.Port.Number != 0 && sp.Port == b.Port.Number)
				})
			}
		}
	}
	for _, r := range m.httpRoutes {
		if len(r.Spec.ParentRefs) == 0 || len(r.Spec.Rules) == 0 {
			t.Errorf("%s: HTTPRoute %s needs parentRefs and rules", m.where, r.Name)
		}
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.BackendRefs {
				if ptrOr(b.Kind, "Service") != "Service" || b.Port == nil {
					t.Errorf("%s: HTTPRoute %s: backend %s is not a Service port", m.where, r.Name, b.Name)
					continue
				}
				port := int32(*b.Port)
				servicePort("HTTPRoute "+r.Name, string(b.Name), func(sp corev1.ServicePort) bool { return sp.Port == port })
			}
		}
	}
}

// checkMonitoring checks the ServiceMonitor and PrometheusRule, where
// there are: the ServiceMonitor selects exactly one Service, which has the
// metrics port, and names the job "tfmirror" as the alerts expect; the
// rules are deploy/monitoring/alerts.yaml's.
func checkMonitoring(t *testing.T, m *manifests) {
	t.Helper()
	if len(m.serviceMonitors) > 1 || len(m.prometheusRules) > 1 {
		t.Errorf("%s: %d ServiceMonitors and %d PrometheusRules, want at most one of each", m.where, len(m.serviceMonitors), len(m.prometheusRules))
	}
	for _, sm := range m.serviceMonitors {
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("%s: ServiceMonitor endpoints %+v, want /metrics on port metrics", m.where, sm.Spec.Endpoints)
		}
		var selected []*corev1.Service
		for _, s := range m.services {
			if selects(t, &sm.Spec.Selector, s.Labels) {
				selected = append(selected, s)
			}
		}
		if len(selected) != 1 {
			t.Errorf("%s: ServiceMonitor selects %d Services, want 1", m.where, len(selected))
			continue
		}
		s := selected[0]
		if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "metrics" }) {
			t.Errorf("%s: ServiceMonitor selects Service %s, which has no metrics port", m.where, s.Name)
		}
		// The Prometheus Operator names the job after the Service, or
		// after the Service's label that jobLabel names.
		job := s.Name
		if sm.Spec.JobLabel != "" {
			job = s.Labels[sm.Spec.JobLabel]
		}
		if job != "tfmirror" {
			t.Errorf("%s: the scrape job is %q, want tfmirror as the alert rules say", m.where, job)
		}
	}
	for _, pr := range m.prometheusRules {
		checkRuleGroups(t, m.where+": PrometheusRule "+pr.Name, pr.Spec.Groups)
	}
}

// byteSize parses a TFMIRROR_* size as the flags do.
func byteSize(t *testing.T, s string) int64 {
	t.Helper()
	n, err := humanize.ParseBytes(s)
	if err != nil {
		t.Errorf("size %q: %v", s, err)
	}
	return int64(n)
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	var port int
	_, p, _ := strings.Cut(addr, ":")
	if _, err := fmt.Sscan(p, &port); err != nil {
		t.Errorf("address %q: no port", addr)
	}
	return port
}

// quantity is q in bytes.
func quantity(q resource.Quantity) int64 { return q.Value() }

// checkSharedStore checks a workload of replicas sharing a bucket: a
// Deployment of at least three replicas rolling with none down, a local
// cache in an emptyDir or an ephemeral volume that the cache's limits fit, the shared store
// configured, the URL signing key and client tokens from Secrets, bucket
// credentials from an annotated ServiceAccount or a Secret, spread over
// nodes.
func checkSharedStore(t *testing.T, m *manifests, w *workload) {
	t.Helper()
	if w.kind != "Deployment" {
		t.Fatalf("%s: a %s, want a Deployment", m.where, w.kind)
	}
	d := m.deployments[0]
	if w.replicas < 3 {
		t.Errorf("%s: replicas %d, want at least 3 sharing the bucket", m.where, w.replicas)
	}
	if ru := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != "RollingUpdate" || ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("%s: strategy %+v: rolling updates may take replicas down before new ones are ready: want maxUnavailable 0", m.where, d.Spec.Strategy)
	}
	if !strings.HasPrefix(w.env["TFMIRROR_SHARED_STORE"], "s3://") {
		t.Errorf("%s: TFMIRROR_SHARED_STORE=%q, want an s3:// URL", m.where, w.env["TFMIRROR_SHARED_STORE"])
	}

	// The local cache: an emptyDir at the data dir, with a size limit that
	// the archives' limit leaves a quarter of for Badger's own files, and
	// room for it requested from the node; or each pod's ephemeral
	// volume, which the archives' limit leaves a fifth of, as a claim.
	data := w.dataVolume
	cacheMax := byteSize(t, w.env["TFMIRROR_CACHE_MAX_BYTES"])
	switch {
	case data.EmptyDir != nil && data.EmptyDir.SizeLimit != nil:
		sizeLimit := quantity(*data.EmptyDir.SizeLimit)
		if cacheMax == 0 || cacheMax > sizeLimit/4*3 {
			t.Errorf("%s: TFMIRROR_CACHE_MAX_BYTES=%q: want a limit of at most 3/4 of the emptyDir's sizeLimit %d", m.where, w.env["TFMIRROR_CACHE_MAX_BYTES"], sizeLimit)
		}
		if reserve, ok := w.env["TFMIRROR_DISK_RESERVE"]; !ok || byteSize(t, reserve) == 0 {
			t.Errorf("%s: TFMIRROR_DISK_RESERVE=%q: the emptyDir shares the node's disk, want an explicit reserve", m.where, reserve)
		}
		if req := quantity(w.container.Resources.Requests[corev1.ResourceEphemeralStorage]); req < sizeLimit {
			t.Errorf("%s: ephemeral-storage request %d is less than the cache's sizeLimit %d", m.where, req, sizeLimit)
		}
	case data.Ephemeral != nil && data.Ephemeral.VolumeClaimTemplate != nil:
		size := quantity(*data.Ephemeral.VolumeClaimTemplate.Spec.Resources.Requests.Storage())
		if cacheMax == 0 || cacheMax > size/3*2 {
			t.Errorf("%s: TFMIRROR_CACHE_MAX_BYTES=%q: want a limit of at most 2/3 of the ephemeral volume's %d", m.where, w.env["TFMIRROR_CACHE_MAX_BYTES"], size)
		}
	default:
		t.Fatalf("%s: the data dir is not an emptyDir with a sizeLimit nor an ephemeral volume: volume %+v", m.where, data)
	}

	// One URL signing key for all replicas, from a Secret, with the
	// client tokens it comes with.
	for _, k := range []string{"TFMIRROR_URL_SIGNING_KEY_FILE", "TFMIRROR_AUTH_TOKENS_FILE"} {
		if w.env[k] == "" {
			t.Errorf("%s: no %s: every replica must sign archive URLs with one key", m.where, k)
		}
	}

	// One key authenticating what the replicas write to the bucket, from
	// a Secret mounted read-only.
	keyFile := w.env["TFMIRROR_SHARED_STORE_KEY_FILE"]
	if keyFile == "" {
		t.Errorf("%s: no TFMIRROR_SHARED_STORE_KEY_FILE: the replicas would refuse to start", m.where)
	} else if v := w.volumes[mountAt(w.mounts, path.Dir(keyFile))]; v.Secret == nil || v.Secret.SecretName == "" {
		t.Errorf("%s: the shared store key %s is not in a Secret mounted at %s (volume %+v)", m.where, keyFile, path.Dir(keyFile), v)
	} else if len(v.Secret.Items) > 0 && !slices.ContainsFunc(v.Secret.Items, func(it corev1.KeyToPath) bool { return it.Path == path.Base(keyFile) }) {
		t.Errorf("%s: the shared store key's Secret has no item at %s", m.where, path.Base(keyFile))
	}

	// Bucket credentials: a ServiceAccount annotated for IRSA, and a
	// Secret for AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY.
	sa := w.pod.Spec.ServiceAccountName
	i := slices.IndexFunc(m.serviceAccounts, func(o *corev1.ServiceAccount) bool { return o.Name == sa })
	if i < 0 {
		t.Errorf("%s: serviceAccountName %q is not a ServiceAccount rendered here", m.where, sa)
	} else if arn := m.serviceAccounts[i].Annotations["eks.amazonaws.com/role-arn"]; !strings.HasPrefix(arn, "arn:aws:iam::") {
		t.Errorf("%s: ServiceAccount %s: eks.amazonaws.com/role-arn %q, want an IAM role ARN", m.where, sa, arn)
	}
	if !slices.ContainsFunc(w.container.EnvFrom, func(e corev1.EnvFromSource) bool { return e.SecretRef != nil && e.SecretRef.Name != "" }) {
		t.Errorf("%s: no envFrom Secret for AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", m.where)
	}

	// Spread over nodes.
	if !slices.ContainsFunc(w.pod.Spec.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
		return c.TopologyKey == "kubernetes.io/hostname" && selects(t, c.LabelSelector, w.pod.Labels)
	}) {
		t.Errorf("%s: no topologySpreadConstraint over kubernetes.io/hostname selecting the pods", m.where)
	}
}

// configFileOf is the content of the file at path in container c of pod:
// a key of a ConfigMap of m mounted whole.
func configFileOf(t *testing.T, m *manifests, pod *corev1.PodTemplateSpec, c *corev1.Container, file string) []byte {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != path.Dir(file) {
			continue
		}
		if vm.SubPath != "" {
			t.Errorf("%s: the configuration file is mounted by subPath, which the kubelet never updates", m.where)
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil {
				continue
			}
			// tfmirror refuses a configuration file others may write
			// unless its mount is read-only.
			if dm := v.ConfigMap.DefaultMode; !vm.ReadOnly && dm != nil && *dm&0o022 != 0 {
				t.Errorf("%s: the configuration file is mounted writable with mode %04o, which tfmirror refuses", m.where, *dm)
			}
			for _, cm := range m.configMaps {
				if cm.Name == v.ConfigMap.Name {
					if data, ok := cm.Data[path.Base(file)]; ok {
						return []byte(data)
					}
				}
			}
		}
	}
	t.Fatalf("%s: --config %s is not a key of a ConfigMap mounted at %s", m.where, file, path.Dir(file))
	return nil
}

// decodeConfig decodes a JSON configuration file into each attribute's
// value in its flag's syntax: strings as they are, booleans and whole
// numbers written out, lists joined by commas.
func decodeConfig(t *testing.T, where, file string, content []byte) map[string]string {
	t.Helper()
	if path.Ext(file) != ".json" {
		t.Fatalf("%s: configuration file %s: the deployments render JSON", where, file)
	}
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("%s: configuration file %s: %v\n%s", where, file, err, content)
	}
	out := map[string]string{}
	for attr, v := range raw {
		if attr != strings.ToLower(attr) || strings.Contains(attr, "-") {
			t.Errorf("%s: configuration file: attribute %q is not a flag in snake case", where, attr)
		}
		if attr == "policy" {
			// The package policy is a block, not a setting: tfmirror
			// serve and config check read it (see TestHelmChartPolicy).
			if _, ok := v.(map[string]any); !ok {
				t.Errorf("%s: configuration file: policy = %v: want an object (the block's JSON form)", where, v)
			}
			continue
		}
		switch v := v.(type) {
		case string:
			out[attr] = v
		case bool:
			out[attr] = fmt.Sprint(v)
		case json.Number:
			if _, err := v.Int64(); err != nil {
				t.Errorf("%s: configuration file: %s = %s is not a whole number", where, attr, v)
			}
			out[attr] = v.String()
		case []any:
			var items []string
			for _, it := range v {
				s, ok := it.(string)
				if !ok {
					t.Errorf("%s: configuration file: %s holds %v, not a string", where, attr, it)
				}
				items = append(items, s)
			}
			out[attr] = strings.Join(items, ",")
		default:
			t.Errorf("%s: configuration file: %s = %v: not a setting's value", where, attr, v)
		}
	}
	return out
}

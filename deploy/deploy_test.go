package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/tfmirror/tfmirror/metrics"
)

const (
	dataDir     = "/var/lib/tfmirror"
	testVersion = "v0.0.0-deploytest"
)

// ---------------------------------------------------------------------------
// The binary, built once with the Dockerfile's own build command.

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary builds ./cmd/tfmirror with the go build command of the
// Dockerfile's build stage (its environment and flags, VERSION set to
// testVersion) and returns the binary's path.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "tfmirror-deploy-test")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "tfmirror")
		env, args, err := dockerBuildCommand(binPath)
		if err != nil {
			buildErr = err
			return
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// dockerBuildCommand finds the RUN instruction of the Dockerfile that runs
// go build and returns its environment assignments and go arguments, with
// -o replaced by out and ${VERSION} by testVersion.
func dockerBuildCommand(out string) (env, args []string, err error) {
	df, err := parseDockerfile()
	if err != nil {
		return nil, nil, err
	}
	for _, in := range df {
		if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		line := strings.ReplaceAll(in.args, "${VERSION}", testVersion)
		line, _, _ = strings.Cut(line, "&&")
		words, err := shellWords(line)
		if err != nil {
			return nil, nil, err
		}
		for len(words) > 0 && strings.Contains(words[0], "=") {
			env = append(env, words[0])
			words = words[1:]
		}
		if len(words) < 2 || words[0] != "go" || words[1] != "build" {
			return nil, nil, fmt.Errorf("RUN %s: want [VAR=value ...] go build ...", in.args)
		}
		args = words[1:]
		i := slices.Index(args, "-o")
		if i < 0 || i+1 >= len(args) {
			return nil, nil, fmt.Errorf("RUN %s: no -o", in.args)
		}
		args[i+1] = out
		return env, args, nil
	}
	return nil, nil, errors.New("the Dockerfile has no RUN ... go build")
}

// shellWords splits s as sh would for plain words and double quotes.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			inWord = true
		case !quoted && (r == ' ' || r == '\t' || r == '\n'):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unbalanced quotes in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

var (
	flagsOnce sync.Once
	flagNames map[string]bool
	flagsErr  error
)

// serveFlags returns the flag names `tfmirror serve -h` lists.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	bin := binary(t)
	flagsOnce.Do(func() {
		var out bytes.Buffer
		cmd := exec.Command(bin, "serve", "-h")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			flagsErr = fmt.Errorf("serve -h: %v\n%s", err, out.Bytes())
			return
		}
		flagNames = map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(out.String(), -1) {
			flagNames[m[1]] = true
		}
		if !flagNames["data-dir"] || !flagNames["listen"] {
			flagsErr = fmt.Errorf("serve -h lists no --data-dir or --listen:\n%s", out.Bytes())
		}
	})
	if flagsErr != nil {
		t.Fatal(flagsErr)
	}
	return flagNames
}

// checkEnv fails for every TFMIRROR_* name in env that is not a flag of
// `tfmirror serve`, and then has the binary parse and validate the values.
func checkEnv(t *testing.T, where string, env map[string]string) {
	t.Helper()
	flags := serveFlags(t)
	for name := range env {
		flag, ok := strings.CutPrefix(name, "TFMIRROR_")
		if !ok {
			continue
		}
		flag = strings.ReplaceAll(strings.ToLower(flag), "_", "-")
		if !flags[flag] {
			t.Errorf("%s: %s is not a flag of tfmirror serve (no --%s)", where, name, flag)
		}
	}
	// Values: the binary parses and validates the environment before it
	// starts; a missing certificate then stops it (exit 1) before it
	// listens. A bad value exits 2 with "tfmirror serve:". The command
	// line wins over the environment, so paths and addresses are replaced
	// by harmless ones while every other value is the deployed one.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tmp := t.TempDir()
	cmd := exec.CommandContext(ctx, binary(t), "serve",
		"--data-dir", tmp, "--listen", "127.0.0.1:0", "--metrics-listen", "",
		"--tls-cert", filepath.Join(tmp, "missing.pem"), "--tls-key", filepath.Join(tmp, "missing-key.pem"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		if strings.HasPrefix(k, "TFMIRROR_") {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "loading TLS certificate") {
		t.Errorf("%s: the values were not accepted by tfmirror serve (%v):\n%s", where, err, out)
	}
}

// ---------------------------------------------------------------------------
// Dockerfile

type instruction struct {
	cmd  string // upper case
	args string
}

func parseDockerfile() ([]instruction, error) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		return nil, err
	}
	var out []instruction
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		cur += line
		cmd, args, _ := strings.Cut(cur, " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur = ""
	}
	return out, sc.Err()
}

func TestDockerfile(t *testing.T) {
	df, err := parseDockerfile()
	if err != nil {
		t.Fatal(err)
	}
	// The final stage is what runs.
	last := 0
	for i, in := range df {
		if in.cmd == "FROM" {
			last = i
		}
	}
	if last == 0 {
		t.Fatal("want a multi-stage build: a build stage and a runtime stage")
	}
	final := df[last:]
	env := map[string]string{}
	var user, volume, entrypoint string
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "VOLUME":
			volume = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "ENV":
			words, err := shellWords(in.args)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range words {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					t.Errorf("ENV %s: use the KEY=value form", in.args)
				}
				env[k] = v
			}
		case "HEALTHCHECK":
			t.Errorf("HEALTHCHECK %s: the runtime image has no shell or HTTP client", in.args)
		case "RUN":
			t.Errorf("RUN %s in the runtime stage: it has no shell", in.args)
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("USER %q: the image must run as a non-root user", user)
	}
	if !strings.Contains(volume, dataDir) {
		t.Errorf("VOLUME %q: want the data directory %s", volume, dataDir)
	}
	if env["TFMIRROR_DATA_DIR"] != dataDir {
		t.Errorf("ENV TFMIRROR_DATA_DIR=%q, want %s", env["TFMIRROR_DATA_DIR"], dataDir)
	}
	if !strings.HasPrefix(entrypoint, "[") {
		t.Errorf("ENTRYPOINT %s: use the exec form (there is no shell)", entrypoint)
	}
	checkEnv(t, "Dockerfile", env)
}

// TestDockerBuildCommand runs the build stage's go build for real and
// checks the binary is static (it runs on distroless/static) and reports
// the version passed in the build argument.
func TestDockerBuildCommand(t *testing.T) {
	env, _, err := dockerBuildCommand("x")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("build environment %v: want CGO_ENABLED=0 for a static binary", env)
	}
	bin := binary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary needs shared libraries %v", libs)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), testVersion) {
		t.Errorf("tfmirror version: %v %q, want it to name %s", err, out, testVersion)
	}
}

// ---------------------------------------------------------------------------
// Kubernetes

// object is one Kubernetes manifest, decoded loosely.
type object map[string]any

func (o object) kind() string { return str(o, "kind") }
func (o object) name() string { return str(o, "metadata", "name") }

// get walks maps by key and lists by index.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				if o, ok2 := v.(object); ok2 {
					m = o
				} else {
					return nil
				}
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...any) []any {
	l, _ := get(v, path...).([]any)
	return l
}

func labels(v any, path ...any) map[string]string {
	out := map[string]string{}
	m, _ := get(v, path...).(map[string]any)
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

func readYAML(t *testing.T, path string) []object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []object
	for {
		// Decoded as a plain map so that nested maps are map[string]any.
		var m map[string]any
		err := dec.Decode(&m)
		o := object(m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

// kustomizeDir reads every resource the kustomization in dir lists, by
// kind: files, and directories holding a kustomization of their own (read
// the same way). It then applies the kustomization's patches as kustomize
// would for the subset of strategic-merge patches the manifests use: a
// patch with "$patch: delete" removes the object of its kind and name, any
// other patch is merged into that object map by map. A patch holding a
// list is refused, since kustomize merges lists by key and this does not.
func kustomizeDir(t *testing.T, dir string) map[string][]object {
	t.Helper()
	k := readYAML(t, filepath.Join(dir, "kustomization.yaml"))
	if len(k) != 1 || k[0].kind() != "Kustomization" {
		t.Fatalf("%s/kustomization.yaml: want one Kustomization", dir)
	}
	byKind := map[string][]object{}
	listed := map[string]bool{}
	for _, r := range list(k[0], "resources") {
		name := fmt.Sprint(r)
		listed[name] = true
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			for kind, objs := range kustomizeDir(t, path) {
				byKind[kind] = append(byKind[kind], objs...)
			}
			continue
		}
		for _, o := range readYAML(t, path) {
			if o.kind() == "" || str(o, "apiVersion") == "" || o.name() == "" {
				t.Errorf("%s: object without kind, apiVersion or name", path)
			}
			byKind[o.kind()] = append(byKind[o.kind()], o)
		}
	}
	for _, p := range list(k[0], "patches") {
		name := str(p, "path")
		if name == "" || len(p.(map[string]any)) != 1 {
			t.Errorf("%s: patch %v: only patches given by path alone are read here", dir, p)
			continue
		}
		listed[name] = true
		for _, patch := range readYAML(t, filepath.Join(dir, name)) {
			applyPatch(t, dir+"/"+name, byKind, patch)
		}
	}
	// kustomize's own build, where installed (go install
	// sigs.k8s.io/kustomize/kustomize/v5): the manifests must render.
	if kustomize, err := exec.LookPath("kustomize"); err == nil {
		out, err := exec.Command(kustomize, "build", dir).CombinedOutput()
		if err != nil {
			t.Errorf("kustomize build %s: %v\n%s", dir, err, out)
		}
	} else {
		t.Logf("kustomize not installed; %s was not rendered", dir)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && !listed[b] {
			t.Errorf("%s is not listed in %s/kustomization.yaml", b, dir)
		}
	}
	return byKind
}

// applyPatch applies one strategic-merge patch (see kustomizeDir).
func applyPatch(t *testing.T, where string, byKind map[string][]object, patch object) {
	t.Helper()
	objs := byKind[patch.kind()]
	i := slices.IndexFunc(objs, func(o object) bool { return o.name() == patch.name() })
	if i < 0 {
		t.Errorf("%s: no %s %q to patch", where, patch.kind(), patch.name())
		return
	}
	if patch["$patch"] == "delete" {
		byKind[patch.kind()] = slices.Delete(objs, i, i+1)
		return
	}
	var merge func(dst, src map[string]any, path string)
	merge = func(dst, src map[string]any, path string) {
		for k, v := range src {
			switch v := v.(type) {
			case []any:
				t.Errorf("%s: %s.%s is a list, which this reading of patches does not merge", where, path, k)
			case map[string]any:
				d, ok := dst[k].(map[string]any)
				if !ok {
					d = map[string]any{}
					dst[k] = d
				}
				merge(d, v, path+"."+k)
			default:
				dst[k] = v
			}
		}
	}
	merge(objs[i], patch, patch.kind())
}

func one(t *testing.T, byKind map[string][]object, kind string) object {
	t.Helper()
	if len(byKind[kind]) != 1 {
		t.Fatalf("want one %s, have %d", kind, len(byKind[kind]))
	}
	return byKind[kind][0]
}

// workload is what checkWorkload found in a StatefulSet or Deployment.
type workload struct {
	pod, container object
	env            map[string]string // explicit values and the ConfigMaps' data
	mounts         map[string]string // volume name -> mount path
	volumes        map[string]object // by name
	services       map[string]object // by name
}

// checkWorkload checks what the base and its variants have in common: a
// StatefulSet or Deployment w of at least two replicas whose one container
// runs tfmirror serve with valid TFMIRROR_* settings, ports and probes as
// the flags say, resources, a non-root security context, the certificate
// from a Secret, a grace period longer than the shutdown timeout; Services
// that select the pods and target their ports; a ServiceMonitor selecting
// the one Service with the metrics port; a PodDisruptionBudget.
func checkWorkload(t *testing.T, byKind map[string][]object, w object) workload {
	t.Helper()
	pod := object(get(w, "spec", "template").(map[string]any))
	podLabels := labels(pod, "metadata", "labels")
	if !subset(labels(w, "spec", "selector", "matchLabels"), podLabels) {
		t.Errorf("%s selector does not select its pods %v", w.kind(), podLabels)
	}
	containers := list(pod, "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("want one container, have %d", len(containers))
	}
	c := object(containers[0].(map[string]any))

	// Ports by name.
	ports := map[string]int{}
	for _, p := range list(c, "ports") {
		ports[str(p, "name")] = get(p, "containerPort").(int)
	}

	// Environment: explicit values plus the ConfigMaps it loads (Secrets
	// loaded whole are the variants' business).
	env := map[string]string{}
	for _, e := range list(c, "env") {
		env[str(e, "name")] = str(e, "value")
	}
	configMaps := map[string]object{}
	for _, cm := range byKind["ConfigMap"] {
		configMaps[cm.name()] = cm
	}
	for _, from := range list(c, "envFrom") {
		if get(from, "configMapRef") == nil {
			continue
		}
		name := str(from, "configMapRef", "name")
		cm, ok := configMaps[name]
		if !ok {
			t.Errorf("envFrom: no ConfigMap %q", name)
			continue
		}
		for k, v := range labels(cm, "data") {
			if _, dup := env[k]; dup {
				t.Errorf("%s is set both in the %s and ConfigMap %s", k, w.kind(), name)
			}
			env[k] = v
		}
	}
	if fmt.Sprint(get(c, "args")) != "[serve]" {
		t.Errorf("container args %v, want [serve]", get(c, "args"))
	}
	checkEnv(t, w.kind(), env)
	httpsPort := portOf(t, env["TFMIRROR_LISTEN"])
	metricsPort := portOf(t, env["TFMIRROR_METRICS_LISTEN"])
	if ports["https"] != httpsPort || ports["metrics"] != metricsPort {
		t.Errorf("container ports %v, want https %d and metrics %d as the flags say", ports, httpsPort, metricsPort)
	}

	// Probes: HTTPS on the mirror's port (the flags do not enable --insecure-http).
	for _, probe := range []struct{ field, path string }{
		{"livenessProbe", "/healthz"}, {"readinessProbe", "/readyz"},
	} {
		g := get(c, probe.field, "httpGet")
		if str(g, "path") != probe.path || str(g, "scheme") != "HTTPS" || fmt.Sprint(get(g, "port")) != "https" {
			t.Errorf("%s %v, want GET %s on port https with scheme HTTPS", probe.field, g, probe.path)
		}
	}
	if env["TFMIRROR_INSECURE_HTTP"] == "true" {
		t.Error("the probes use HTTPS but --insecure-http is set")
	}

	// Resources.
	for _, r := range []string{"cpu", "memory"} {
		if get(c, "resources", "requests", r) == nil {
			t.Errorf("no %s request", r)
		}
	}
	if get(c, "resources", "limits", "memory") == nil {
		t.Error("no memory limit")
	}

	// Non-root, as the image.
	if get(pod, "spec", "securityContext", "runAsNonRoot") != true {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if u, _ := get(pod, "spec", "securityContext", "runAsUser").(int); u == 0 {
		t.Error("pod runs as uid 0")
	}
	if get(pod, "spec", "securityContext", "fsGroup") == nil {
		t.Error("no fsGroup: the volume may not be writable by the non-root user")
	}
	if get(c, "securityContext", "allowPrivilegeEscalation") != false || get(c, "securityContext", "readOnlyRootFilesystem") != true {
		t.Error("container securityContext: want allowPrivilegeEscalation false and readOnlyRootFilesystem true")
	}

	// Volumes: the TLS Secret at the certificate paths.
	mounts := map[string]string{}
	for _, m := range list(c, "volumeMounts") {
		mounts[str(m, "name")] = str(m, "mountPath")
	}
	volumes := map[string]object{}
	for _, v := range list(pod, "spec", "volumes") {
		volumes[str(v, "name")] = object(v.(map[string]any))
	}
	if env["TFMIRROR_DATA_DIR"] != dataDir {
		t.Errorf("TFMIRROR_DATA_DIR=%q, want %s", env["TFMIRROR_DATA_DIR"], dataDir)
	}
	for _, k := range []string{"TFMIRROR_TLS_CERT", "TFMIRROR_TLS_KEY"} {
		if v := secretVolumeAt(mounts, volumes, filepath.Dir(env[k])); v == "" {
			t.Errorf("%s=%q is not in a Secret's mount (mounts %v)", k, env[k], mounts)
		}
	}
	// Shutdown: the grace period outlasts --shutdown-timeout.
	shutdown, err := time.ParseDuration(env["TFMIRROR_SHUTDOWN_TIMEOUT"])
	if err != nil {
		shutdown = 30 * time.Second
	}
	if grace, _ := get(pod, "spec", "terminationGracePeriodSeconds").(int); time.Duration(grace)*time.Second <= shutdown {
		t.Errorf("terminationGracePeriodSeconds %d does not outlast the shutdown timeout %v", grace, shutdown)
	}

	// Services select the pods; target ports exist.
	services := map[string]object{}
	for _, s := range byKind["Service"] {
		services[s.name()] = s
		if !subset(labels(s, "spec", "selector"), podLabels) {
			t.Errorf("Service %s selects %v, not the pods %v", s.name(), labels(s, "spec", "selector"), podLabels)
		}
		for _, p := range list(s, "spec", "ports") {
			if _, ok := ports[fmt.Sprint(get(p, "targetPort"))]; !ok {
				t.Errorf("Service %s port %s targets %v, not a container port", s.name(), str(p, "name"), get(p, "targetPort"))
			}
		}
	}

	// The ServiceMonitor selects exactly the Services that have its port.
	sm := one(t, byKind, "ServiceMonitor")
	endpoints := list(sm, "spec", "endpoints")
	if len(endpoints) != 1 || str(endpoints[0], "port") != "metrics" || str(endpoints[0], "path") != "/metrics" {
		t.Fatalf("ServiceMonitor endpoints %v, want /metrics on port metrics", endpoints)
	}
	selected := 0
	for _, s := range services {
		if !selects(sm, labels(s, "metadata", "labels")) {
			continue
		}
		selected++
		found := false
		for _, p := range list(s, "spec", "ports") {
			found = found || str(p, "name") == "metrics"
		}
		if !found {
			t.Errorf("ServiceMonitor selects Service %s, which has no metrics port", s.name())
		}
	}
	if selected != 1 {
		t.Errorf("ServiceMonitor selects %d Services, want 1", selected)
	}

	// The PodDisruptionBudget covers the pods and allows progress.
	pdb := one(t, byKind, "PodDisruptionBudget")
	if !subset(labels(pdb, "spec", "selector", "matchLabels"), podLabels) {
		t.Errorf("PodDisruptionBudget does not select the pods %v", podLabels)
	}
	if replicas, _ := get(w, "spec", "replicas").(int); replicas < 2 {
		t.Errorf("replicas %d: a PodDisruptionBudget needs at least 2 to allow drains", replicas)
	}
	return workload{pod: pod, container: c, env: env, mounts: mounts, volumes: volumes, services: services}
}

// secretVolumeAt returns the name of the Secret mounted at dir, or "".
func secretVolumeAt(mounts map[string]string, volumes map[string]object, dir string) string {
	for name, path := range mounts {
		if path == dir && str(volumes[name], "secret", "secretName") != "" {
			return str(volumes[name], "secret", "secretName")
		}
	}
	return ""
}

func TestKubernetes(t *testing.T) {
	byKind := kustomizeDir(t, "kubernetes/base")
	sts := one(t, byKind, "StatefulSet")
	w := checkWorkload(t, byKind, sts)

	// A claim per replica at the data dir.
	claims := list(sts, "spec", "volumeClaimTemplates")
	if len(claims) != 1 || w.mounts[str(claims[0], "metadata", "name")] != w.env["TFMIRROR_DATA_DIR"] {
		t.Errorf("want one volumeClaimTemplate mounted at TFMIRROR_DATA_DIR=%s; mounts %v", w.env["TFMIRROR_DATA_DIR"], w.mounts)
	} else if get(claims[0], "spec", "resources", "requests", "storage") == nil {
		t.Error("volumeClaimTemplate requests no storage")
	}
	// The headless Service governs the StatefulSet.
	if h, ok := w.services[str(sts, "spec", "serviceName")]; !ok || str(h, "spec", "clusterIP") != "None" {
		t.Errorf("StatefulSet serviceName %q is not a headless Service of the base", str(sts, "spec", "serviceName"))
	}
}

// TestKubernetesSharedStore checks the variant for replicas sharing a
// bucket: a Deployment in place of the StatefulSet, a local cache in an
// emptyDir that the cache's limits fit, the shared store configured, the
// URL signing key shared from a Secret, bucket credentials from IRSA or a
// Secret, spread over nodes.
func TestKubernetesSharedStore(t *testing.T) {
	byKind := kustomizeDir(t, "kubernetes/shared-store")
	if n := len(byKind["StatefulSet"]); n != 0 {
		t.Errorf("%d StatefulSets left: the Deployment replaces the base's", n)
	}
	for _, s := range byKind["Service"] {
		if str(s, "spec", "clusterIP") == "None" {
			t.Errorf("headless Service %s left: only the StatefulSet needed it", s.name())
		}
	}
	d := one(t, byKind, "Deployment")
	w := checkWorkload(t, byKind, d)
	if replicas, _ := get(d, "spec", "replicas").(int); replicas < 3 {
		t.Errorf("replicas %d, want at least 3 sharing the bucket", replicas)
	}
	if get(d, "spec", "strategy", "rollingUpdate", "maxUnavailable") != 0 {
		t.Error("rolling updates may take replicas down before new ones are ready: want maxUnavailable 0")
	}

	// The shared store (its URL was validated by checkWorkload's run of the binary).
	if !strings.HasPrefix(w.env["TFMIRROR_SHARED_STORE"], "s3://") {
		t.Errorf("TFMIRROR_SHARED_STORE=%q, want an s3:// URL", w.env["TFMIRROR_SHARED_STORE"])
	}

	// The local cache: an emptyDir at the data dir, with a size limit that
	// the archives' limit leaves a quarter of for Badger's own files, and
	// room for it requested from the node.
	data := ""
	for name, path := range w.mounts {
		if path == w.env["TFMIRROR_DATA_DIR"] {
			data = name
		}
	}
	sizeLimit := quantity(t, str(w.volumes[data], "emptyDir", "sizeLimit"))
	if get(w.volumes[data], "emptyDir") == nil || sizeLimit == 0 {
		t.Fatalf("the data dir %s is not an emptyDir with a sizeLimit: volume %v", w.env["TFMIRROR_DATA_DIR"], w.volumes[data])
	}
	cacheMax := byteSize(t, w.env["TFMIRROR_CACHE_MAX_BYTES"])
	if cacheMax == 0 || cacheMax > sizeLimit/4*3 {
		t.Errorf("TFMIRROR_CACHE_MAX_BYTES=%q: want a limit of at most 3/4 of the emptyDir's sizeLimit %d", w.env["TFMIRROR_CACHE_MAX_BYTES"], sizeLimit)
	}
	if reserve, ok := w.env["TFMIRROR_DISK_RESERVE"]; !ok || byteSize(t, reserve) == 0 {
		t.Errorf("TFMIRROR_DISK_RESERVE=%q: the emptyDir shares the node's disk, want an explicit reserve", reserve)
	}
	if req := quantity(t, str(w.container, "resources", "requests", "ephemeral-storage")); req < sizeLimit {
		t.Errorf("ephemeral-storage request %d is less than the cache's sizeLimit %d", req, sizeLimit)
	}

	// One URL signing key for all replicas, from a Secret (it needs client
	// authentication, whose tokens come from there too).
	for _, k := range []string{"TFMIRROR_URL_SIGNING_KEY_FILE", "TFMIRROR_AUTH_TOKENS_FILE"} {
		if secretVolumeAt(w.mounts, w.volumes, filepath.Dir(w.env[k])) == "" {
			t.Errorf("%s=%q is not in a Secret's mount (mounts %v)", k, w.env[k], w.mounts)
		}
	}

	// Bucket credentials: a ServiceAccount annotated for IRSA, and an
	// optional Secret for AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY.
	sa := str(w.pod, "spec", "serviceAccountName")
	i := slices.IndexFunc(byKind["ServiceAccount"], func(o object) bool { return o.name() == sa })
	if i < 0 {
		t.Errorf("serviceAccountName %q is not a ServiceAccount of the variant", sa)
	} else if arn := labels(byKind["ServiceAccount"][i], "metadata", "annotations")["eks.amazonaws.com/role-arn"]; !strings.HasPrefix(arn, "arn:aws:iam::") {
		t.Errorf("ServiceAccount %s: eks.amazonaws.com/role-arn %q, want an IAM role ARN", sa, arn)
	}
	secretEnv := false
	for _, from := range list(w.container, "envFrom") {
		if str(from, "secretRef", "name") != "" {
			secretEnv = true
			if get(from, "secretRef", "optional") != true {
				t.Errorf("envFrom Secret %s is not optional: IRSA needs no Secret", str(from, "secretRef", "name"))
			}
		}
	}
	if !secretEnv {
		t.Error("no envFrom Secret for AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
	}

	// Spread over nodes.
	spread := false
	for _, c := range list(w.pod, "spec", "topologySpreadConstraints") {
		if str(c, "topologyKey") == "kubernetes.io/hostname" && subset(labels(c, "labelSelector", "matchLabels"), labels(w.pod, "metadata", "labels")) {
			spread = true
		}
	}
	if !spread {
		t.Error("no topologySpreadConstraint over kubernetes.io/hostname selecting the pods")
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

// quantity parses a Kubernetes quantity in the forms the manifests use:
// an integer with a binary suffix (Ki, Mi, Gi, Ti) or none.
func quantity(t *testing.T, s string) int64 {
	t.Helper()
	shift := 0
	for i, suffix := range []string{"Ki", "Mi", "Gi", "Ti"} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			s, shift = n, 10*(i+1)
			break
		}
	}
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Errorf("quantity %q: %v", s, err)
	}
	return n << shift
}

// selects evaluates a ServiceMonitor's label selector.
func selects(sm object, l map[string]string) bool {
	if !subset(labels(sm, "spec", "selector", "matchLabels"), l) {
		return false
	}
	for _, e := range list(sm, "spec", "selector", "matchExpressions") {
		_, has := l[str(e, "key")]
		switch str(e, "operator") {
		case "DoesNotExist":
			if has {
				return false
			}
		case "Exists":
			if !has {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	var port int
	_, p, _ := strings.Cut(addr, ":")
	if _, err := fmt.Sscan(p, &port); err != nil {
		t.Fatalf("address %q: no port", addr)
	}
	return port
}

// ---------------------------------------------------------------------------
// systemd

func TestSystemdUnit(t *testing.T) {
	unit := readUnit(t, "systemd/tfmirror.service")
	want := map[string]string{
		"DynamicUser":     "yes",
		"ProtectSystem":   "strict",
		"StateDirectory":  "tfmirror",
		"NoNewPrivileges": "yes",
		"PrivateTmp":      "yes",
		"ProtectHome":     "yes",
	}
	for k, v := range want {
		if !slices.Contains(unit[k], v) {
			t.Errorf("%s=%v, want %s", k, unit[k], v)
		}
	}
	if len(unit["ExecStart"]) != 1 || !strings.HasSuffix(unit["ExecStart"][0], "tfmirror serve") {
		t.Errorf("ExecStart %v, want .../tfmirror serve", unit["ExecStart"])
	}
	env := map[string]string{}
	for _, e := range unit["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	// The cache lives in the StateDirectory, the only writable place.
	if env["TFMIRROR_DATA_DIR"] != "/var/lib/"+unit["StateDirectory"][0] {
		t.Errorf("TFMIRROR_DATA_DIR=%q, want the StateDirectory /var/lib/%s", env["TFMIRROR_DATA_DIR"], unit["StateDirectory"][0])
	}
	stop, err := time.ParseDuration(strings.Join(unit["TimeoutStopSec"], ""))
	if err != nil || stop <= 30*time.Second {
		t.Errorf("TimeoutStopSec %v: want longer than the 30s shutdown timeout", unit["TimeoutStopSec"])
	}
	// The example environment file, commented lines included.
	data, err := os.ReadFile("systemd/tfmirror.env")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "#")
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "TFMIRROR_") {
			env[k] = v
		}
	}
	checkEnv(t, "systemd unit and tfmirror.env", env)

	// systemd's own parser, where installed: unknown keys or values are
	// reported (and ignored by systemd, which would silently weaken the sandbox).
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed; unit not verified by systemd")
		return
	}
	dir := t.TempDir()
	text, err := os.ReadFile("systemd/tfmirror.service")
	if err != nil {
		t.Fatal(err)
	}
	text = bytes.ReplaceAll(text, []byte("/usr/local/bin/tfmirror"), []byte(binary(t)))
	path := filepath.Join(dir, "tfmirror.service")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", path).CombinedOutput()
	var complaints []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "tfmirror.service") {
			complaints = append(complaints, l)
		}
	}
	if err != nil || len(complaints) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, strings.Join(complaints, "\n"))
	}
}

// readUnit reads a unit file's Key=Value lines (all sections).
func readUnit(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s: line %q is not Key=Value", path, line)
			continue
		}
		out[k] = append(out[k], v)
	}
	return out
}

// ---------------------------------------------------------------------------
// Monitoring

// registered returns every series name the metrics package exposes
// (histograms with their _bucket, _sum and _count series).
func registered(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{
		Version: "test", Origins: []string{"registry.terraform.io"},
		Cache: func() (int, int64) { return 0, 0 },
		Disk:  func() (int64, int64, bool) { return 0, 0, true },
	})
	if err != nil {
		t.Fatal(err)
	}
	// Labelled series exist once something was observed: a request
	// served, a shared-store call made.
	m.ObserveRequest("index", 200, time.Millisecond, 1)
	m.SharedStoreRequest("get_archive", "ok", time.Millisecond)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	if !names["tfmirror_http_requests_total"] {
		t.Fatalf("registry lacks tfmirror_http_requests_total: %v", names)
	}
	return names
}

// prometheusMetrics are series Prometheus makes itself.
var prometheusMetrics = map[string]bool{"up": true}

var metricName = regexp.MustCompile(`\b(?:tfmirror|go|process)_[a-zA-Z0-9_]+\b|\bup\b`)

// checkExpr fails when expr names a series the mirror does not expose.
// It does not parse PromQL (its parser would pull in Prometheus itself);
// it checks names, bracket balance and that the expression uses a series.
func checkExpr(t *testing.T, where, expr string, names map[string]bool) {
	t.Helper()
	// Label values in quotes are not names.
	bare := regexp.MustCompile(`"[^"]*"`).ReplaceAllString(expr, `""`)
	found := metricName.FindAllString(bare, -1)
	if len(found) == 0 {
		t.Errorf("%s: %q names no tfmirror series", where, expr)
	}
	for _, n := range found {
		if !names[n] && !prometheusMetrics[n] {
			t.Errorf("%s: %q uses %s, which tfmirror does not expose", where, expr, n)
		}
	}
	for _, pair := range []string{"()", "{}", "[]"} {
		if strings.Count(bare, pair[:1]) != strings.Count(bare, pair[1:]) {
			t.Errorf("%s: %q has unbalanced %s", where, expr, pair)
		}
	}
}

func TestGrafanaDashboard(t *testing.T) {
	names := registered(t)
	data, err := os.ReadFile("monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatal("dashboard needs a title, uid and panels")
	}
	ids := map[int]bool{}
	var all strings.Builder
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			checkExpr(t, "panel "+p.Title, tg.Expr, names)
			all.WriteString(tg.Expr + "\n")
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := get(v.Query, "query").(string); ok {
			checkExpr(t, "variable "+v.Name, q, names)
		}
	}
	// What the issue asks the dashboard to show.
	for _, want := range []string{
		"tfmirror_http_requests_total", "tfmirror_cache_hits_total", "tfmirror_cache_misses_total",
		"tfmirror_origin_requests_total", "tfmirror_origin_request_duration_seconds_bucket",
		"tfmirror_http_response_bytes_total", "tfmirror_origin_bytes_total", "tfmirror_cache_stored_bytes",
		// The mirror's own health, as the status page shows it.
		"tfmirror_cache_disk_free_bytes", "tfmirror_cache_disk_reserve_bytes", "tfmirror_cache_writable",
		"tfmirror_shared_store_requests_total", "tfmirror_shared_store_down",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no panel shows %s", want)
		}
	}
}

type ruleGroups struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestAlertRules(t *testing.T) {
	names := registered(t)
	data, err := os.ReadFile("monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleGroups
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || alerts[r.Alert] {
				t.Errorf("group %s: rule without a unique alert name: %q", g.Name, r.Alert)
			}
			alerts[r.Alert] = true
			checkExpr(t, r.Alert, r.Expr, names)
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: want a severity label and a summary", r.Alert)
			}
		}
	}
	// What the issue asks to be alerted on.
	for _, want := range []string{"TfmirrorOriginFailing", "TfmirrorVerificationFailures", "TfmirrorCacheNearLimit", "TfmirrorHigh5xxRate"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}

	// The PrometheusRule in the kustomize base carries the same groups.
	var pr struct {
		Kind string     `yaml:"kind"`
		Spec ruleGroups `yaml:"spec"`
	}
	data, err = os.ReadFile("kubernetes/base/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.Kind != "PrometheusRule" || !reflect.DeepEqual(pr.Spec, rules) {
		t.Error("kubernetes/base/prometheusrule.yaml differs from monitoring/alerts.yaml")
	}

	// Prometheus's own checker and the alerts' unit tests
	// (monitoring/alerts_test.yaml), where promtool is installed (Debian's
	// prometheus package; .ci/run installs it).
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed; rules not checked or unit-tested by Prometheus")
		return
	}
	for _, args := range [][]string{
		{"check", "rules", "monitoring/alerts.yaml"},
		{"test", "rules", "monitoring/alerts_test.yaml"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, promtool, args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

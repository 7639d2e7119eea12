package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// ---------------------------------------------------------------------------
// Rendering with the tools' own code, and strict decoding into Go types.

const chartDir = "helm/tfmirror"

// manifests are the objects a kustomization or the chart renders, by kind,
// each decoded into its Go API type.
type manifests struct {
	where           string
	deployments     []*appsv1.Deployment
	statefulSets    []*appsv1.StatefulSet
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	serviceAccounts []*corev1.ServiceAccount
	claims          []*corev1.PersistentVolumeClaim
	pdbs            []*policyv1.PodDisruptionBudget
	ingresses       []*networkingv1.Ingress
	httpRoutes      []*gatewayv1.HTTPRoute
	serviceMonitors []*monitoringv1.ServiceMonitor
	prometheusRules []*monitoringv1.PrometheusRule
}

// decoder decodes YAML strictly into the registered Go types: an unknown
// or duplicate field is an error, and so is a kind (or apiVersion) that is
// not registered.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		appsv1.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme,
		monitoringv1.AddToScheme, gatewayv1.Install,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
}()

// decode splits a YAML stream into documents and adds each object to m.
func (m *manifests) decode(t *testing.T, where string, stream []byte) {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Errorf("%s: %v\n%s", where, err, doc)
			if !runtime.IsStrictDecodingError(err) {
				continue
			}
			// The object decoded but for unknown or duplicate fields:
			// check the rest of it too.
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			m.deployments = append(m.deployments, o)
		case *appsv1.StatefulSet:
			m.statefulSets = append(m.statefulSets, o)
		case *corev1.Service:
			m.services = append(m.services, o)
		case *corev1.ConfigMap:
			m.configMaps = append(m.configMaps, o)
		case *corev1.ServiceAccount:
			m.serviceAccounts = append(m.serviceAccounts, o)
		case *corev1.PersistentVolumeClaim:
			m.claims = append(m.claims, o)
		case *policyv1.PodDisruptionBudget:
			m.pdbs = append(m.pdbs, o)
		case *networkingv1.Ingress:
			m.ingresses = append(m.ingresses, o)
		case *gatewayv1.HTTPRoute:
			m.httpRoutes = append(m.httpRoutes, o)
		case *monitoringv1.ServiceMonitor:
			m.serviceMonitors = append(m.serviceMonitors, o)
		case *monitoringv1.PrometheusRule:
			m.prometheusRules = append(m.prometheusRules, o)
		default:
			t.Errorf("%s: %v: a kind these tests do not check", where, gvk)
		}
	}
}

// stripComments drops comment lines, to tell an empty document.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(append(out, l...), '\n')
		}
	}
	return out
}

// kustomize builds the kustomization in dir with kustomize's own library,
// on the real file system, as `kubectl kustomize dir` does.
func kustomize(t *testing.T, dir string) *manifests {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	m := &manifests{where: dir}
	m.decode(t, dir, out)
	return m
}

// release is the name the chart is rendered under; not "tfmirror", so that
// names derived from it are told from fixed ones.
const release = "corp"

// chartValues reads a values file of the chart's ci/ directory ("" for
// none: the defaults).
func chartValues(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := common.ReadValuesFile(filepath.Join(chartDir, "ci", file))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// valuesOf is the values file text, decoded.
func valuesOf(t *testing.T, text string) map[string]any {
	t.Helper()
	var values map[string]any
	if err := yaml.Unmarshal([]byte(text), &values); err != nil {
		t.Fatal(err)
	}
	return values
}

// helmTemplate renders the chart with values as `helm template` does
// (Helm's loader, values coalesced with the chart's and checked, strict
// rendering), and returns the rendered objects and the NOTES.
func helmTemplate(t *testing.T, where string, values map[string]any) (*manifests, string) {
	t.Helper()
	files, err := helmRender(values)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	m := &manifests{where: where}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	notes := ""
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, "NOTES.txt"):
			notes = files[name]
		case strings.HasSuffix(name, ".yaml"):
			m.decode(t, where+": "+name, []byte(files[name]))
		case strings.HasSuffix(name, ".tpl"):
		default:
			t.Errorf("%s: %s: not a template Helm renders into objects", where, name)
		}
	}
	return m, notes
}

// helmRender renders the chart's templates with values.
func helmRender(values map[string]any) (map[string]string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	vals, err := util.ToRenderValues(ch, values,
		common.ReleaseOptions{Name: release, Namespace: "mirror", IsInstall: true, Revision: 1}, nil)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: true}.Render(ch, vals)
}

// helmLint runs Helm's linter (`helm lint --strict`) with values: every
// message of warning or error severity fails.
func helmLint(t *testing.T, where string, values map[string]any) {
	t.Helper()
	l := lint.RunAll(chartDir, values, "mirror")
	for _, msg := range l.Messages {
		if msg.Severity >= support.WarningSev {
			t.Errorf("%s: helm lint: %v", where, msg)
		} else {
			t.Logf("%s: helm lint: %v", where, msg)
		}
	}
}

func (m *manifests) String() string {
	return fmt.Sprintf("%s: %d Deployments, %d StatefulSets, %d Services", m.where, len(m.deployments), len(m.statefulSets), len(m.services))
}

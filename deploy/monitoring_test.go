package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/tfmirror/tfmirror/v2/metrics"
)

// ---------------------------------------------------------------------------
// Monitoring

// registered returns every series name the metrics package exposes
// (histograms with their _bucket, _sum and _count series).
func registered(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{
		Version: "test", Origins: []string{"registry.terraform.io"},
		Cache:   func() (int, int64) { return 0, 0 },
		Disk:    func() (int64, int64, bool) { return 0, 0, true },
		Damaged: func() int { return 0 },
		// TLS served: its expiry gauge.
		Certificate: func() time.Time { return time.Now() },
	})
	if err != nil {
		t.Fatal(err)
	}
	// Labelled series exist once something was observed: a request
	// served, a shared-store call made.
	m.ObserveRequest("index", 200, time.Millisecond, 1, false)
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

// seriesLabels returns the label names of every series the metrics
// package describes (a histogram's _bucket with le), whether or not
// anything was observed yet. A Desc has no accessors: its String() is
// read, and a format that no longer matches fails the test rather than
// pass it with no labels.
func seriesLabels(t *testing.T) map[string]map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg, metrics.Options{
		Version: "test", Origins: []string{"registry.terraform.io"},
		Cache: func() (int, int64) { return 0, 0 },
		Disk:  func() (int64, int64, bool) { return 0, 0, true },
	}); err != nil {
		t.Fatal(err)
	}
	descs := make(chan *prometheus.Desc)
	go func() { reg.Describe(descs); close(descs) }()
	desc := regexp.MustCompile(`fqName: "([^"]+)".*constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}`)
	labels := map[string]map[string]bool{}
	for d := range descs {
		m := desc.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the labels of %s", d)
		}
		set := map[string]bool{}
		for _, l := range strings.Split(m[3], ",") {
			if l != "" {
				set[l] = true
			}
		}
		for _, kv := range strings.Split(m[2], ",") {
			if k, _, ok := strings.Cut(kv, "="); ok {
				set[k] = true
			}
		}
		labels[m[1]] = set
		bucket := maps.Clone(set)
		bucket["le"] = true
		labels[m[1]+"_bucket"], labels[m[1]+"_sum"], labels[m[1]+"_count"] = bucket, set, set
	}
	if len(labels["tfmirror_origin_requests_total"]) == 0 {
		t.Fatalf("no labels read for tfmirror_origin_requests_total: %v", labels["tfmirror_origin_requests_total"])
	}
	return labels
}

// targetLabels are labels Prometheus (and the Prometheus Operator's
// ServiceMonitor) puts on every series it scrapes.
var targetLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "pod": true, "service": true, "container": true, "endpoint": true}

var (
	selector   = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	labelNames = regexp.MustCompile(`[a-zA-Z_][a-zA-Z0-9_]*`)
)

// checkLabels fails when expr matches on a label its series do not
// have, or groups by (or, through uses, shows in a legend or an alert's
// text) a label none of its series has: the query would select nothing,
// or show an empty label, without any error.
func checkLabels(t *testing.T, where, expr string, uses []string, labels map[string]map[string]bool) {
	t.Helper()
	bare := regexp.MustCompile(`"[^"]*"`).ReplaceAllString(expr, `""`)
	some := maps.Clone(targetLabels)
	for _, n := range metricName.FindAllString(bare, -1) {
		maps.Copy(some, labels[n])
	}
	for _, m := range selector.FindAllStringSubmatch(bare, -1) {
		have, ok := labels[m[1]]
		if !ok {
			continue // by, without, ...: grouping, checked below
		}
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			if !have[l[1]] && !targetLabels[l[1]] {
				t.Errorf("%s: %q matches %s on %s, a label it does not have (it has %v)", where, expr, m[1], l[1], slices.Sorted(maps.Keys(have)))
			}
		}
	}
	var used []string
	for _, m := range grouping.FindAllStringSubmatch(bare, -1) {
		used = append(used, labelNames.FindAllString(m[1], -1)...)
	}
	for _, u := range append(used, uses...) {
		if !some[u] {
			t.Errorf("%s: %q: none of its series has the label %s", where, expr, u)
		}
	}
}

// templateLabels returns the first group of every match of pattern in s:
// the labels a legend, an alert's text or a variable shows.
func templateLabels(s, pattern string) []string {
	var out []string
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// queryOf returns the query of a template variable's query object.
func queryOf(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	q, ok := m["query"].(string)
	return q, ok
}

func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	names, labels := registered(t), seriesLabels(t)
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
				Expr         string `json:"expr"`
				LegendFormat string `json:"legendFormat"`
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
			checkLabels(t, "panel "+p.Title, tg.Expr, templateLabels(tg.LegendFormat, `\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`), labels)
			all.WriteString(tg.Expr + "\n")
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := queryOf(v.Query); ok {
			checkExpr(t, "variable "+v.Name, q, names)
			checkLabels(t, "variable "+v.Name, q, templateLabels(q, `label_values\([^,]*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`), labels)
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
		// The package policy and its configuration file.
		"tfmirror_policy_refusals_total", "tfmirror_config_reloads_total", "tfmirror_config_last_reload_successful",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no panel shows %s", want)
		}
	}
}

// alertRules reads deploy/monitoring/alerts.yaml strictly into the
// Prometheus Operator's rule groups.
func alertRules(t *testing.T) []monitoringv1.RuleGroup {
	t.Helper()
	data, err := os.ReadFile("monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(data, &rules); err != nil {
		t.Fatalf("monitoring/alerts.yaml: %v", err)
	}
	return rules.Groups
}

// checkRuleGroups fails when groups differ from monitoring/alerts.yaml's.
func checkRuleGroups(t *testing.T, where string, groups []monitoringv1.RuleGroup) {
	t.Helper()
	if want := alertRules(t); !reflect.DeepEqual(groups, want) {
		t.Errorf("%s: the rule groups differ from monitoring/alerts.yaml", where)
	}
}

func TestAlertRules(t *testing.T) {
	t.Parallel()
	names, labels := registered(t), seriesLabels(t)
	groups := alertRules(t)
	alerts := map[string]bool{}
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert == "" || alerts[r.Alert] {
				t.Errorf("group %s: rule without a unique alert name: %q", g.Name, r.Alert)
			}
			alerts[r.Alert] = true
			checkExpr(t, r.Alert, r.Expr.String(), names)
			var text []string
			for _, a := range r.Annotations {
				text = append(text, templateLabels(a, `\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)...)
			}
			checkLabels(t, r.Alert, r.Expr.String(), text, labels)
			if r.For != nil {
				if _, err := model.ParseDuration(string(*r.For)); err != nil {
					t.Errorf("%s: for %q: %v", r.Alert, *r.For, err)
				}
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: want a severity label and a summary", r.Alert)
			}
		}
	}
	// What the issue asks to be alerted on.
	for _, want := range []string{"TfmirrorOriginFailing", "TfmirrorVerificationFailures", "TfmirrorCacheNearLimit", "TfmirrorHigh5xxRate", "TfmirrorConfigReloadRefused"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}

	// The chart's copy, which its PrometheusRule embeds as it is (Helm
	// cannot read files outside the chart, and would take the alerts'
	// {{ $labels }} for its own templates), is the same file. The
	// kustomize base's PrometheusRule and the chart's rendered one are
	// compared with these groups where they are checked.
	src, err := os.ReadFile("monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
	if err != nil || !bytes.Equal(src, cp) {
		t.Errorf("%s/files/alerts.yaml is not a copy of monitoring/alerts.yaml (%v): cp monitoring/alerts.yaml %s/files/", chartDir, err, chartDir)
	}

	// Prometheus's own checker and the alerts' unit tests
	// (monitoring/alerts_test.yaml), where promtool is installed (Debian's
	// prometheus package, which .ci/run installs where the machine's
	// package manager can; the metric names and labels the rules use are
	// checked above either way).
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

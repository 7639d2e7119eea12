package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// readmePolicy is the example of the chart README's "Package policy"
// section: the values a user copies.
func readmePolicy(t *testing.T) map[string]any {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "### Package policy")
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(section)
	if !ok || m == nil {
		t.Fatal("the chart's README has no Package policy section with a YAML example")
	}
	var values map[string]any
	if err := yaml.Unmarshal([]byte(m[1]), &values); err != nil {
		t.Fatalf("README's policy example: %v", err)
	}
	if _, ok := values["policy"].(map[string]any); !ok {
		t.Fatalf("README's policy example sets no policy: %v", values)
	}
	return values
}

// renderedConfig renders the chart with values and returns its workload's
// configuration file, decoded, and the pods' checksum/config annotation.
func renderedConfig(t *testing.T, where string, values map[string]any) (content []byte, file map[string]any, checksum string) {
	t.Helper()
	m, _ := helmTemplate(t, where, values)
	w := checkWorkload(t, m) // tfmirror serve accepts the file
	if err := json.Unmarshal(w.config, &file); err != nil {
		t.Fatalf("%s: tfmirror.json: %v", where, err)
	}
	return w.config, file, m.deployments[0].Spec.Template.Annotations["checksum/config"]
}

// TestHelmChartPolicy: the chart's policy value (the README's example)
// is rendered as the configuration file's policy block as it was given,
// which tfmirror config check accepts and lists rule by rule; a values
// file without it renders no policy; a change of the policy rolls the
// pods.
func TestHelmChartPolicy(t *testing.T) {
	t.Parallel()
	values := readmePolicy(t)
	content, file, sum := renderedConfig(t, "policy", values)
	// JSON as YAML decodes it: the same values, whatever the key order.
	var want any
	raw, _ := json.Marshal(values["policy"])
	json.Unmarshal(raw, &want)
	if !reflect.DeepEqual(file["policy"], want) {
		t.Errorf("the file's policy block:\n%v\nwant the values':\n%v", file["policy"], want)
	}
	out := configCheck(t, "policy", "tfmirror.json", content)
	for _, w := range []string{
		"POLICY (8 rules",
		`deny "registry.terraform.io/hashicorp/null"`,
		`allow "registry.example.com/platform/*/*"`,
		`deny_version "registry.terraform.io/hashicorp/aws" { versions = ">= 5.80.0, < 5.81.1" }`,
		"CVE-2026-1234: use 5.81.1",
		`minimum_release_age = "3d"`,
		`release_age_exempt_version "registry.terraform.io/hashicorp/aws" { versions = "= 5.81.1" }`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("config check does not show %q:\n%s", w, out)
		}
	}

	// Without the value: no policy block, and nothing else changes.
	plainContent, plain, plainSum := renderedConfig(t, "defaults", map[string]any{})
	if _, ok := plain["policy"]; ok {
		t.Errorf("defaults render a policy block: %s", plainContent)
	}
	delete(file, "policy")
	if !reflect.DeepEqual(file, plain) {
		t.Errorf("the policy changed other settings:\n%v\nwant:\n%v", file, plain)
	}
	if out := configCheck(t, "defaults", "tfmirror.json", plainContent); !strings.Contains(out, "POLICY: none") {
		t.Errorf("config check of the defaults shows a policy:\n%s", out)
	}

	// A change of the policy alone changes the pods' template: a rollout.
	values["policy"].(map[string]any)["minimum_release_age"] = "7d"
	_, _, sum7 := renderedConfig(t, "policy 7d", values)
	if sum == "" || sum == plainSum || sum == sum7 {
		t.Errorf("checksum/config %q (defaults %q, 7d %q): a change of the policy does not roll the pods", sum, plainSum, sum7)
	}
}

// TestHelmChartREADMECheckCommand follows the chart README's command that
// checks the rendered configuration file before an upgrade: `helm
// template` writes every object of the chart, so its pipe to yq must
// select the one template that holds tfmirror.json (--show-only);
// otherwise yq prints `null` and a `---` for each other object after the
// file, and config check refuses what it is given. The template it names
// holds the file, which config check accepts.
func TestHelmChartREADMECheckCommand(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)`(helm template\\s[^`]*tfmirror\\s+config\\s+check[^`]*)`").FindSubmatch(readme)
	if m == nil {
		t.Fatal("the chart's README has no `helm template ... | tfmirror config check` command")
	}
	command := strings.Join(strings.Fields(string(m[1])), " ")
	only := regexp.MustCompile(`(?:--show-only|-s)[ =](\S+)`).FindStringSubmatch(command)
	if only == nil {
		t.Fatalf("%q: helm template writes every object of the chart and yq a null for each one without the file, which config check refuses: select the ConfigMap's template with --show-only", command)
	}
	files, err := helmRender(readmePolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	doc, ok := files["tfmirror/"+only[1]]
	if !ok {
		t.Fatalf("%q: the chart has no template %s", command, only[1])
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
		t.Fatalf("%s: %v", only[1], err)
	}
	content, ok := cm.Data["tfmirror.json"]
	if !ok {
		t.Fatalf("%q: %s holds no tfmirror.json", command, only[1])
	}
	if out := configCheck(t, "README's check command", "tfmirror.json", []byte(content)); !strings.Contains(out, "POLICY (8 rules") {
		t.Errorf("config check of the README's file does not show its policy:\n%s", out)
	}
}

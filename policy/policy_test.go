package policy

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

// decode parses src as the file name says (".json": JSON syntax) and
// decodes its one policy block.
func decode(t testing.TB, name, src string) (*Policy, hcl.Diagnostics) {
	t.Helper()
	p := hclparse.NewParser()
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(name, ".json") {
		f, diags = p.ParseJSON([]byte(src), name)
	} else {
		f, diags = p.ParseHCL([]byte(src), name)
	}
	if diags.HasErrors() {
		t.Fatalf("%s: %v", name, diags)
	}
	c, diags := f.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "policy"}}})
	if diags.HasErrors() || len(c.Blocks) != 1 {
		t.Fatalf("%s: want one policy block: %v", name, diags)
	}
	return Decode(c.Blocks[0].Body)
}

func mustDecode(t testing.TB, src string) *Policy {
	t.Helper()
	p, diags := decode(t, "mirror.hcl", src)
	if diags.HasErrors() {
		t.Fatalf("decode: %v", diags)
	}
	return p
}

const example = `
policy {
  allow = [
    "registry.terraform.io/hashicorp/*",
    "registry.test/acme/*",
    "registry.test/acme/*/*",
  ]
  deny = ["registry.terraform.io/hashicorp/null"]

  deny_version "registry.terraform.io/hashicorp/aws" {
    versions = ">= 5.80.0, < 5.81.1"
    reason   = "CVE-2026-1234: use 5.81.1"
  }

  minimum_release_age    = "72h"
  release_age_exemptions = ["registry.test/acme/*"]

  release_age "registry.terraform.io/hashicorp/random" {
    minimum = "1d"
  }

  release_age_exempt_version "registry.terraform.io/hashicorp/aws" {
    versions = "= 5.81.1"
    reason   = "urgent fix for CVE-2026-1234"
  }
}
`

// The same policy reads the same from HCL and JSON, and the rules are
// counted one per pattern and block.
func TestDecodeJSON(t *testing.T) {
	js := `{"policy": {
  "allow": ["registry.terraform.io/hashicorp/*", "registry.test/acme/*", "registry.test/acme/*/*"],
  "deny": ["registry.terraform.io/hashicorp/null"],
  "deny_version": {"registry.terraform.io/hashicorp/aws": {"versions": ">= 5.80.0, < 5.81.1", "reason": "CVE-2026-1234: use 5.81.1"}},
  "minimum_release_age": "72h",
  "release_age_exemptions": ["registry.test/acme/*"],
  "release_age": {"registry.terraform.io/hashicorp/random": {"minimum": "1d"}},
  "release_age_exempt_version": {"registry.terraform.io/hashicorp/aws": {"versions": "= 5.81.1", "reason": "urgent fix for CVE-2026-1234"}}
}}`
	ph := mustDecode(t, example)
	pj, diags := decode(t, "mirror.json", js)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if ph.Len() != 9 || pj.Len() != 9 {
		t.Errorf("Len: HCL %d, JSON %d, want 9", ph.Len(), pj.Len())
	}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct{ addr, version string }{
		{"registry.terraform.io/hashicorp/aws", "5.80.0"},
		{"registry.terraform.io/hashicorp/aws", "5.81.1"},
		{"registry.terraform.io/hashicorp/null", "3.0.0"},
		{"registry.other/x/y", "1.0.0"},
	} {
		rel := Release{At: now.Add(-time.Hour), Known: true}
		h, j := ph.Version(Provider, c.addr, c.version, rel, now), pj.Version(Provider, c.addr, c.version, rel, now)
		h.Detail = strings.Replace(h.Detail, "mirror.hcl", "F", 1)
		j.Detail = strings.Replace(j.Detail, "mirror.json", "F", 1)
		// Lines differ between the two files; compare all but them.
		if h.Allowed != j.Allowed || h.Rule != j.Rule || h.Reason != j.Reason || !h.AvailableAt.Equal(j.AvailableAt) {
			t.Errorf("%s %s: HCL %+v, JSON %+v", c.addr, c.version, h, j)
		}
	}
}

// Mistakes are refused with their file:line, and a body with errors
// yields no policy.
func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct {
		name, file, src, want string
	}{
		{"unknown attribute", "p.hcl", "policy {\n  alow = []\n}", "p.hcl:2"},
		{"two-part pattern", "p.hcl", "policy {\n  allow = [\n    \"hashicorp/aws\",\n  ]\n}", "p.hcl:3"},
		{"five-part pattern", "p.hcl", "policy {\n  deny = [\"a.test/b/c/d/e\"]\n}", "p.hcl:2"},
		{"partial wildcard", "p.hcl", "policy {\n\n  allow = [\"registry.test/acme-*/x\"]\n}", "p.hcl:3"},
		{"bad host", "p.hcl", "policy {\n  allow = [\"bad host!/a/b\"]\n}", "p.hcl:2"},
		{"host with a trailing dot", "p.hcl", "policy {\n  deny = [\"registry.terraform.io./hashicorp/null\"]\n}", "p.hcl:2"},
		{"host with a port and a trailing dot", "p.hcl", "policy {\n  deny = [\"registry.test.:8443/a/*\"]\n}", "p.hcl:2"},
		{"partial wildcard in the host", "p.hcl", "policy {\n  deny = [\"*.terraform.io/hashicorp/*\"]\n}", "p.hcl:2"},
		{"bad provider type", "p.hcl", "policy {\n  allow = [\"registry.test/a/terraform-provider-x\"]\n}", "p.hcl:2"},
		{"bad module system", "p.hcl", "policy {\n  allow = [\"registry.test/a/b/c_d\"]\n}", "p.hcl:2"},
		{"not a list", "p.hcl", "policy {\n  allow = \"registry.test/a/*\"\n}", "p.hcl:2"},
		{"not a string", "p.hcl", "policy {\n  allow = [3, true]\n}", "p.hcl:2"},
		{"bad age", "p.hcl", "policy {\n  minimum_release_age = \"three days\"\n}", "p.hcl:2"},
		{"negative age", "p.hcl", "policy {\n  minimum_release_age = \"-1h\"\n}", "p.hcl:2"},
		{"huge age", "p.hcl", "policy {\n  minimum_release_age = \"99999d\"\n}", "p.hcl:2"},
		{"bad window", "p.hcl", "policy {\n  release_age \"registry.test/a/*\" {\n    minimum = \"soon\"\n  }\n}", "p.hcl:3"},
		{"window without minimum", "p.hcl", "policy {\n  release_age \"registry.test/a/*\" {\n  }\n}", "p.hcl:2"},
		{"empty versions list", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = []\n    reason = \"x\"\n  }\n}", "p.hcl:3"},
		{"versions not strings", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = [1]\n    reason = \"x\"\n  }\n}", "p.hcl:3"},
		{"bad constraint", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \"~>> 1\"\n    reason = \"x\"\n  }\n}", "p.hcl:3"},
		{"huge constraint", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \"= 99999999999999999999999.0.0\"\n    reason = \"x\"\n  }\n}", "p.hcl:3"},
		{"constraint holding no version", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \">= 5.81.1, < 5.80.0\"\n    reason = \"x\"\n  }\n}", "p.hcl:3"},
		{"constraint holding no version in a list", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = [\"= 1.0.0\", \"~> 1.2.0, >= 1.3.0\"]\n    reason = \"x\"\n  }\n}", "p.hcl:3"},
		{"exemption holding no version", "p.hcl", "policy {\n  release_age_exempt_version \"registry.test/a/b\" {\n    versions = \"= 1.0.0, = 1.0.1\"\n  }\n}", "p.hcl:3"},
		{"deny without reason", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \"1.0.0\"\n  }\n}", "p.hcl:2"},
		{"empty reason", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \"1.0.0\"\n    reason = \" \"\n  }\n}", "p.hcl:4"},
		{"bad block pattern", "p.hcl", "policy {\n  release_age_exempt_version \"a/b\" {\n    versions = \"1.0.0\"\n  }\n}", "p.hcl:2"},
		{"unknown block attribute", "p.hcl", "policy {\n  release_age_exempt_version \"registry.test/a/b\" {\n    versions = \"1.0.0\"\n    why = \"x\"\n  }\n}", "p.hcl:4"},
		{"JSON bad pattern", "p.json", "{\"policy\": {\n  \"deny\": [\n    \"x\"\n  ]\n}}", "p.json:3"},
		{"JSON unknown attribute", "p.json", "{\"policy\": {\n  \"allowed\": []\n}}", "p.json:2"},
		{"deny entry without reason", "p.hcl", "policy {\n  deny = [\n    { pattern = \"registry.test/a/b\" },\n  ]\n}", "p.hcl:3"},
		{"deny entry with an empty reason", "p.hcl", "policy {\n  deny = [{ pattern = \"registry.test/a/b\", reason = \"\" }]\n}", "p.hcl:2"},
		{"deny entry without pattern", "p.hcl", "policy {\n  deny = [{ reason = \"x\" }]\n}", "p.hcl:2"},
		{"deny entry with an unknown key", "p.hcl", "policy {\n  deny = [{ pattern = \"registry.test/a/b\", reason = \"x\", why = \"y\" }]\n}", "p.hcl:2"},
		{"deny entry with a bad pattern", "p.hcl", "policy {\n  deny = [{ pattern = \"a/b\", reason = \"x\" }]\n}", "p.hcl:2"},
		{"reason with a terminal escape", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \"1.0.0\"\n    reason = \"use 1.0.1\\u001b]0;owned\\u0007\"\n  }\n}", "p.hcl:4"},
		{"reason with a line break", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \"1.0.0\"\n    reason = \"use 1.0.1\\n  deny \\\"registry.test/x/y\\\"\"\n  }\n}", "p.hcl:4"},
		{"reason with a format character", "p.hcl", "policy {\n  deny = [{ pattern = \"registry.test/a/b\", reason = \"use \\u202egood\" }]\n}", "p.hcl:2"},
		{"reason too long", "p.hcl", "policy {\n  deny = [{ pattern = \"registry.test/a/b\", reason = \"" + strings.Repeat("x", 2000) + "\" }]\n}", "p.hcl:2"},
		{"exemption reason with a terminal escape", "p.hcl", "policy {\n  release_age_exempt_version \"registry.test/a/b\" {\n    versions = \"1.0.0\"\n    reason = \"\\u001b[2J\"\n  }\n}", "p.hcl:4"},
		{"JSON reason with a terminal escape", "p.json", "{\"policy\": {\"deny\": [\n  {\"pattern\": \"registry.test/a/b\", \"reason\": \"\\u001b[2J\"}\n]}}", "p.json:2"},
		{"allow entry with a reason", "p.hcl", "policy {\n  allow = [{ pattern = \"registry.test/a/b\", reason = \"x\" }]\n}", "p.hcl:2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, diags := decode(t, c.file, c.src)
			if !diags.HasErrors() {
				t.Fatalf("accepted")
			}
			if p != nil {
				t.Errorf("a policy with errors was returned")
			}
			var places []string
			for _, d := range diags {
				if d.Subject != nil {
					places = append(places, fmt.Sprintf("%s:%d", d.Subject.Filename, d.Subject.Start.Line))
				}
			}
			if len(places) == 0 || places[0] != c.want {
				t.Errorf("places %v (%v), want %s first", places, diags, c.want)
			}
		})
	}
}

// A rule that names what one written before it names is refused, with
// its file:line and the first one's: a duplicate changes nothing, and
// one that says another thing (another reason, another minimum) would
// never be used, the first written deciding; so is an allow list that
// names no pattern, which reads as letting nothing in and as no allow
// list at all. Rules that only overlap are not duplicates.
func TestDuplicateRulesRefused(t *testing.T) {
	for _, c := range []struct {
		name, file, src string
		want            []string // in the diagnostic, besides its place
		at              string
	}{
		{"deny twice", "p.hcl", "policy {\n  deny = [\n    \"registry.test/a/b\",\n    \"Registry.Test/a/b\",\n  ]\n}", []string{"Duplicate deny pattern", "p.hcl:3"}, "p.hcl:4"},
		{"deny with two reasons", "p.hcl", "policy {\n  deny = [\n    { pattern = \"registry.test/a/b\", reason = \"use c\" },\n    { pattern = \"registry.test/a/b\", reason = \"use d\" },\n  ]\n}", []string{"Contradictory deny pattern", "p.hcl:3", "first written decides"}, "p.hcl:4"},
		{"deny with and without a reason", "p.hcl", "policy {\n  deny = [\"registry.test/a/b\",\n    { pattern = \"registry.test/a/b\", reason = \"use d\" }]\n}", []string{"Contradictory deny pattern", "p.hcl:2"}, "p.hcl:3"},
		{"allow twice", "p.hcl", "policy {\n  allow = [\"registry.test/a/*\", \"registry.test/a/*\"]\n}", []string{"Duplicate allow pattern"}, "p.hcl:2"},
		{"exemption twice", "p.hcl", "policy {\n  release_age_exemptions = [\"registry.test/a/*/*\",\n \"registry.test/a/*/*\"]\n}", []string{"Duplicate release_age_exemptions pattern", "p.hcl:2"}, "p.hcl:3"},
		{"deny_version twice", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \">= 1.0.0, < 1.0.2\"\n    reason = \"CVE\"\n  }\n  deny_version \"registry.test/a/b\" {\n    versions = \"< 1.0.2, >= 1.0.0\"\n    reason = \"CVE\"\n  }\n}", []string{"Duplicate deny_version block", "p.hcl:2"}, "p.hcl:6"},
		{"deny_version with two reasons", "p.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \"1.0.0\"\n    reason = \"CVE-1\"\n  }\n  deny_version \"registry.test/a/b\" {\n    versions = \"= 1.0.0\"\n    reason = \"CVE-2\"\n  }\n}", []string{"Contradictory deny_version block", "p.hcl:2"}, "p.hcl:6"},
		{"module deny_version with and without v", "p.hcl", "policy {\n  deny_version \"registry.test/a/b/c\" {\n    versions = \"= v1.1.0\"\n    reason = \"x\"\n  }\n  deny_version \"registry.test/a/b/c\" {\n    versions = [\"1.1.0\"]\n    reason = \"x\"\n  }\n}", []string{"Duplicate deny_version block"}, "p.hcl:6"},
		{"exempt version twice", "p.hcl", "policy {\n  minimum_release_age = \"3d\"\n  release_age_exempt_version \"registry.test/a/b\" {\n    versions = \"= 1.0.1\"\n  }\n  release_age_exempt_version \"registry.test/a/b\" {\n    versions = \"= 1.0.1\"\n    reason = \"the fix\"\n  }\n}", []string{"Contradictory release_age_exempt_version block", "p.hcl:3"}, "p.hcl:6"},
		{"release_age twice", "p.hcl", "policy {\n  release_age \"registry.test/a/*\" {\n    minimum = \"1d\"\n  }\n  release_age \"registry.test/a/*\" {\n    minimum = \"0s\"\n  }\n}", []string{"Contradictory release_age block", "p.hcl:2"}, "p.hcl:5"},
		// One minimum in two spellings says the same thing.
		{"release_age twice alike", "p.hcl", "policy {\n  release_age \"registry.test/a/*\" {\n    minimum = \"1d\"\n  }\n  release_age \"registry.test/a/*\" {\n    minimum = \"24h\"\n  }\n}", []string{"Duplicate release_age block", `names what "registry.test/a/*" (p.hcl:2)`, "changes nothing"}, "p.hcl:5"},
		{"JSON deny twice", "p.json", "{\"policy\": {\"deny\": [\n  \"registry.test/a/b\",\n  \"registry.test/a/b\"\n]}}", []string{"Duplicate deny pattern", "p.json:2"}, "p.json:3"},
		{"empty allow", "p.hcl", "policy {\n  deny = []\n  allow = []\n}", []string{"Empty allow list", "leave allow out", `deny = ["*/*/*", "*/*/*/*"]`}, "p.hcl:3"},
		{"JSON empty allow", "p.json", "{\"policy\": {\n  \"allow\": []\n}}", []string{"Empty allow list"}, "p.json:2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, diags := decode(t, c.file, c.src)
			if !diags.HasErrors() || p != nil {
				t.Fatalf("accepted: %v", diags)
			}
			d := diags[0]
			if len(diags) != 1 || d.Subject == nil || fmt.Sprintf("%s:%d", d.Subject.Filename, d.Subject.Start.Line) != c.at {
				t.Fatalf("diagnostics %v, want one at %s", diags, c.at)
			}
			for _, w := range c.want {
				if !strings.Contains(d.Summary+": "+d.Detail, w) {
					t.Errorf("%q, want %q in it", d.Summary+": "+d.Detail, w)
				}
			}
		})
	}
	// Rules that overlap, or name one pattern for different things, stand.
	p := mustDecode(t, `policy {
  allow = ["registry.test/a/*", "registry.test/a/b", "registry.test/a/*/*"]
  deny  = ["registry.test/a/b", "registry.test/a/*/*"]
  release_age_exemptions = ["registry.test/a/b"]
  deny_version "registry.test/a/b" {
    versions = "= 1.0.0"
    reason   = "CVE-1"
  }
  deny_version "registry.test/a/b" {
    versions = "= 1.0.1"
    reason   = "CVE-2"
  }
  deny_version "registry.test/a/*" {
    versions = "= 1.0.0"
    reason   = "CVE-1"
  }
  release_age_exempt_version "registry.test/a/b" {
    versions = "= 1.0.0"
  }
  release_age "registry.test/a/b" { minimum = "1d" }
  release_age "registry.test/a/*" { minimum = "1d" }
  minimum_release_age = "3d"
}`)
	if p.Len() != 13 {
		t.Errorf("%d rules, want 13", p.Len())
	}
}

// A deny entry may carry a reason, as deny_version does, in HCL and in
// JSON, beside the plain patterns of the list form: the refusal of what
// it matches gives that reason, the others the rule's sentence, and the
// rules list shows it.
func TestDenyReason(t *testing.T) {
	for _, c := range []struct{ name, src string }{
		{"hcl", `policy {
  deny = [
    "registry.test/acme/old",
    { pattern = "registry.test/acme/evil", reason = "compromised release keys: use registry.test/acme/good" },
    { pattern = "registry.test/acme/*/*", reason = "modules come from registry.test/platform" },
  ]
}`},
		{"json", `{"policy": {"deny": [
  "registry.test/acme/old",
  {"pattern": "registry.test/acme/evil", "reason": "compromised release keys: use registry.test/acme/good"},
  {"pattern": "registry.test/acme/*/*", "reason": "modules come from registry.test/platform"}
]}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := "p." + c.name
			p, diags := decode(t, file, c.src)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if p.Len() != 3 {
				t.Errorf("%d rules, want 3", p.Len())
			}
			now := time.Now()
			for _, tc := range []struct {
				kind            Kind
				address, reason string
			}{
				{Provider, "registry.test/acme/evil", "compromised release keys: use registry.test/acme/good"},
				{Provider, "registry.test/acme/old", "denied by the mirror's policy"},
				{Module, "registry.test/acme/vpc/aws", "modules come from registry.test/platform"},
			} {
				for _, v := range []Verdict{p.Address(tc.kind, tc.address), p.Version(tc.kind, tc.address, "1.0.0", Release{}, now)} {
					if v.Allowed || v.Rule != RuleDeny || v.Reason != tc.reason || !strings.Contains(v.Message(), tc.reason) {
						t.Errorf("%s: %+v, want denied with %q", tc.address, v, tc.reason)
					}
				}
			}
			if v := p.Address(Provider, "registry.test/acme/good"); !v.Allowed {
				t.Errorf("registry.test/acme/good: %+v", v)
			}
			rules := strings.Join(p.Rules(), "\n")
			if !strings.Contains(rules, "compromised release keys") || !strings.Contains(rules, `deny "registry.test/acme/old"`) {
				t.Errorf("rules:\n%s", rules)
			}
		})
	}
}

// A nil policy and an empty one allow everything.
func TestNilAndEmpty(t *testing.T) {
	var nilp *Policy
	empty := mustDecode(t, "policy {}")
	now := time.Now()
	for _, p := range []*Policy{nilp, empty} {
		if v := p.Version(Provider, "registry.test/a/b", "1.0.0", Release{}, now); !v.Allowed || v.Rule != "" {
			t.Errorf("%v: %+v", p, v)
		}
		if v := p.Address(Module, "registry.test/a/b/c"); !v.Allowed {
			t.Errorf("%v: %+v", p, v)
		}
		if p.Len() != 0 || p.Window(Provider, "registry.test/a/b") != 0 {
			t.Errorf("%v: Len %d", p, p.Len())
		}
	}
	if p, diags := Decode(nil); p != nil || diags != nil {
		t.Errorf("Decode(nil): %v %v", p, diags)
	}
}

// Patterns: "*" stands for one whole part; provider patterns have three
// parts and module patterns four; hosts and names are compared in their
// normal form.
func TestPatterns(t *testing.T) {
	for _, c := range []struct {
		name    string
		pattern string
		kind    Kind
		addr    string
		match   bool
	}{
		{"exact", "registry.terraform.io/hashicorp/aws", Provider, "registry.terraform.io/hashicorp/aws", true},
		{"type wildcard", "registry.terraform.io/hashicorp/*", Provider, "registry.terraform.io/hashicorp/aws", true},
		{"other namespace", "registry.terraform.io/hashicorp/*", Provider, "registry.terraform.io/hashicorpx/aws", false},
		{"namespace wildcard", "registry.terraform.io/*/*", Provider, "registry.terraform.io/acme/x", true},
		{"host wildcard", "*/hashicorp/*", Provider, "mirror.test/hashicorp/aws", true},
		{"all", "*/*/*", Provider, "a.test/b/c", true},
		{"other host", "registry.terraform.io/*/*", Provider, "registry.opentofu.org/hashicorp/aws", false},
		{"provider pattern, module", "registry.terraform.io/*/*", Module, "registry.terraform.io/a/b/aws", false},
		{"module pattern, provider", "registry.terraform.io/*/*/*", Provider, "registry.terraform.io/a/b", false},
		{"module exact", "registry.terraform.io/terraform-aws-modules/vpc/aws", Module, "registry.terraform.io/terraform-aws-modules/vpc/aws", true},
		{"module system wildcard", "registry.terraform.io/terraform-aws-modules/vpc/*", Module, "registry.terraform.io/terraform-aws-modules/vpc/google", true},
		{"module case", "registry.terraform.io/Terraform-AWS-Modules/VPC/AWS", Module, "registry.terraform.io/terraform-aws-modules/vpc/aws", true},
		{"module address case", "registry.terraform.io/terraform-aws-modules/vpc/aws", Module, "registry.terraform.io/Terraform-AWS-Modules/Vpc/aws", true},
		{"host case and port", "Registry.Terraform.IO:443/hashicorp/*", Provider, "registry.terraform.io/hashicorp/aws", true},
		{"address host case", "registry.terraform.io/hashicorp/*", Provider, "REGISTRY.terraform.io/HashiCorp/AWS", true},
		{"address with port", "registry.terraform.io/hashicorp/*", Provider, "registry.terraform.io:443/hashicorp/aws", true},
		{"other port", "registry.test/hashicorp/*", Provider, "registry.test:8443/hashicorp/aws", false},
		{"port pattern", "registry.test:8443/hashicorp/*", Provider, "registry.test:8443/hashicorp/aws", true},
		{"IDN host", "bücher.example/a/*", Provider, "xn--bcher-kva.example/a/b", true},
		{"IDN host in punycode", "xn--bcher-kva.example/a/*", Provider, "xn--bcher-kva.example/a/b", true},
		{"IDN host in punycode, upper case, port", "XN--BCHER-KVA.example:443/a/*", Provider, "bücher.example/a/b", true},
		{"IDN module host in punycode", "xn--bcher-kva.example/a/b/*", Module, "xn--bcher-kva.example/a/b/aws", true},
		{"prefix is not a match", "registry.test/acme/*", Module, "registry.test/acme/x/extra", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustDecode(t, fmt.Sprintf("policy {\n  deny = [%q]\n}", c.pattern))
			v := p.Address(c.kind, c.addr)
			if got := !v.Allowed; got != c.match {
				t.Errorf("%s %s against %s: matched %v, want %v (%+v)", c.kind, c.addr, c.pattern, got, c.match, v)
			}
		})
	}
}

// The order of evaluation, each case naming the rule that decides.
func TestOrderOfEvaluation(t *testing.T) {
	p := mustDecode(t, example)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	old := Release{At: now.Add(-30 * 24 * time.Hour), Known: true}
	young := Release{At: now.Add(-time.Hour), Known: true}
	for _, c := range []struct {
		name      string
		kind      Kind
		addr, ver string
		rel       Release
		rule      string // "" when allowed
		detail    string // a part of Detail
		reason    string // a part of Reason
		available time.Time
	}{
		{"allowed, old enough", Provider, "registry.terraform.io/hashicorp/aws", "5.79.0", old, "", `minimum_release_age = "72h" (mirror.hcl:15)`, "", time.Time{}},
		{"deny beats allow", Provider, "registry.terraform.io/hashicorp/null", "3.2.0", old, RuleDeny, `deny "registry.terraform.io/hashicorp/null" (mirror.hcl:8)`, "denied", time.Time{}},
		{"outside the allow list", Provider, "registry.terraform.io/integrations/github", "6.0.0", old, RuleAllowList, "allow (mirror.hcl:3): no pattern matches", "allow list", time.Time{}},
		{"module outside the allow list", Module, "registry.terraform.io/terraform-aws-modules/vpc/aws", "5.0.0", old, RuleAllowList, "allow (mirror.hcl:3)", "allow list", time.Time{}},
		{"module inside the allow list", Module, "registry.test/acme/vpc/aws", "1.0.0", old, "", "minimum_release_age", "", time.Time{}},
		{"module inside the allow list, young", Module, "registry.test/acme/vpc/aws", "1.0.0", young, RuleMinReleaseAge, "minimum_release_age", "72h", young.At.Add(72 * time.Hour)},
		{"denied version", Provider, "registry.terraform.io/hashicorp/aws", "5.80.0", old, RuleDenyVersion, `deny_version "registry.terraform.io/hashicorp/aws" { versions = ">= 5.80.0, < 5.81.1" } (mirror.hcl:10)`, "CVE-2026-1234: use 5.81.1", time.Time{}},
		{"denied version's prerelease", Provider, "registry.terraform.io/hashicorp/aws", "5.81.1-beta1", old, RuleDenyVersion, "deny_version", "CVE", time.Time{}},
		{"denied version beats the exemption", Provider, "registry.terraform.io/hashicorp/aws", "5.81.0", young, RuleDenyVersion, "deny_version", "CVE", time.Time{}},
		{"above the denied range, young", Provider, "registry.terraform.io/hashicorp/aws", "5.82.0", young, RuleMinReleaseAge, `minimum_release_age = "72h"`, "72h", young.At.Add(72 * time.Hour)},
		{"exempt version", Provider, "registry.terraform.io/hashicorp/aws", "5.81.1", young, "", `release_age_exempt_version "registry.terraform.io/hashicorp/aws" { versions = "= 5.81.1" } (mirror.hcl:22)`, "urgent fix", time.Time{}},
		{"unknown release time", Provider, "registry.terraform.io/hashicorp/aws", "5.82.0", Release{}, RuleMinReleaseAge, "minimum_release_age", "not known yet", time.Time{}},
		{"in-house build", Provider, "registry.terraform.io/hashicorp/aws", "5.82.0", Release{InHouse: true}, "", "in-house", "", time.Time{}},
		{"exempt by pattern", Provider, "registry.test/acme/widget", "0.1.0", Release{}, "", `release_age_exemptions "registry.test/acme/*" (mirror.hcl:16)`, "", time.Time{}},
		{"per-pattern window, inside", Provider, "registry.terraform.io/hashicorp/random", "3.7.0", Release{At: now.Add(-23 * time.Hour), Known: true}, RuleMinReleaseAge, `release_age "registry.terraform.io/hashicorp/random" { minimum = "1d" } (mirror.hcl:18)`, "1d", now.Add(time.Hour)},
		{"per-pattern window, past", Provider, "registry.terraform.io/hashicorp/random", "3.7.0", Release{At: now.Add(-25 * time.Hour), Known: true}, "", "release_age", "", time.Time{}},
		{"exactly at the gate", Provider, "registry.terraform.io/hashicorp/aws", "5.82.0", Release{At: now.Add(-72 * time.Hour), Known: true}, "", "minimum_release_age", "", time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := p.Version(c.kind, c.addr, c.ver, c.rel, now)
			if v.Allowed != (c.rule == "") || v.Rule != c.rule {
				t.Errorf("verdict %+v, want rule %q", v, c.rule)
			}
			if !strings.Contains(v.Detail, c.detail) {
				t.Errorf("detail %q, want %q in it", v.Detail, c.detail)
			}
			if !strings.Contains(v.Reason, c.reason) {
				t.Errorf("reason %q, want %q in it", v.Reason, c.reason)
			}
			if !v.AvailableAt.Equal(c.available) {
				t.Errorf("available at %v, want %v", v.AvailableAt, c.available)
			}
			if !v.Allowed && !strings.Contains(v.Message(), v.Reason) {
				t.Errorf("message %q lacks the reason", v.Message())
			}
		})
	}
}

// An allow list of provider patterns only refuses every module (and the
// other way round): an allow list names all that may come in.
func TestAllowListKinds(t *testing.T) {
	p := mustDecode(t, `policy { allow = ["registry.test/acme/*"] }`)
	if v := p.Address(Module, "registry.test/acme/vpc/aws"); v.Allowed || v.Rule != RuleAllowList || !strings.Contains(v.Detail, "names no module pattern") {
		t.Errorf("module: %+v", v)
	}
	if v := p.Address(Provider, "registry.test/acme/x"); !v.Allowed || !strings.Contains(v.Detail, `allow "registry.test/acme/*"`) {
		t.Errorf("provider: %+v", v)
	}
	p = mustDecode(t, `policy { allow = ["registry.test/acme/*/*"] }`)
	if v := p.Address(Provider, "registry.test/acme/x"); v.Allowed || !strings.Contains(v.Detail, "names no provider pattern") {
		t.Errorf("provider under a module-only list: %+v", v)
	}
}

// Version constraints read as Terraform reads them; a deny holds the
// prereleases within its bounds; an exemption holds a prerelease only
// when it names it.
func TestConstraints(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	young := Release{At: now, Known: true}
	for _, c := range []struct {
		name, block, versions, version string
		hit                            bool
	}{
		{"deny pessimistic", "deny_version", "~> 1.2.0", "1.2.9", true},
		{"deny pessimistic, next minor", "deny_version", "~> 1.2.0", "1.3.0", false},
		{"deny range", "deny_version", ">= 1.0.0, < 2.0.0", "1.5.0", true},
		{"deny range's prerelease", "deny_version", ">= 1.0.0, < 2.0.0", "1.5.0-rc1", true},
		{"deny range, upper bound", "deny_version", ">= 1.0.0, < 2.0.0", "2.0.0", false},
		{"deny exact", "deny_version", "1.4.2", "1.4.2", true},
		{"deny exact, other", "deny_version", "1.4.2", "1.4.3", false},
		{"deny exclusion", "deny_version", "!= 1.4.2", "1.4.3", true},
		{"commas mean and", "deny_version", ">= 1.4.2, != 1.4.3", "1.4.3", false}, // "1.4.2, 1.4.3" holds none: TestDecodeErrors
		{"exempt exact", "release_age_exempt_version", "= 1.4.2", "1.4.2", true},
		{"exempt range's prerelease", "release_age_exempt_version", ">= 1.0.0", "1.5.0-rc1", false},
		{"exempt named prerelease", "release_age_exempt_version", "= 1.5.0-rc1", "1.5.0-rc1", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustDecode(t, fmt.Sprintf("policy {\n  minimum_release_age = \"72h\"\n  %s \"registry.test/a/*\" {\n    versions = %q\n    reason = \"r\"\n  }\n}", c.block, c.versions))
			v := p.Version(Provider, "registry.test/a/b", c.version, young, now)
			var hit bool
			if c.block == "deny_version" {
				hit = v.Rule == RuleDenyVersion
			} else {
				hit = v.Allowed
			}
			if hit != c.hit {
				t.Errorf("%s %q on %s: %+v, want hit %v", c.block, c.versions, c.version, v, c.hit)
			}
		})
	}
	// A list of constraints holds a version any of them holds.
	p := mustDecode(t, "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = [\"1.4.2\", \">= 2.0.0, < 2.1.0\"]\n    reason = \"r\"\n  }\n}")
	for v, want := range map[string]bool{"1.4.2": true, "2.0.5": true, "1.4.3": false, "2.1.0": false} {
		if got := p.Version(Provider, "registry.test/a/b", v, young, now).Rule == RuleDenyVersion; got != want {
			t.Errorf("versions list on %s: denied %v, want %v", v, got, want)
		}
	}
	if v := p.Version(Provider, "registry.test/a/b", "1.4.2", young, now); !strings.Contains(v.Detail, `versions = "1.4.2 or >= 2.0.0, < 2.1.0"`) {
		t.Errorf("detail %q", v.Detail)
	}
	// A version that does not parse cannot be checked against a deny.
	p = mustDecode(t, "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \"1.0.0\"\n    reason = \"r\"\n  }\n}")
	if v := p.Version(Provider, "registry.test/a/b", "not-a-version", young, now); v.Allowed || v.Rule != RuleDenyVersion {
		t.Errorf("a bad version under a deny: %+v", v)
	}
	if v := p.Version(Provider, "registry.test/a/c", "not-a-version", young, now); !v.Allowed {
		t.Errorf("a bad version under no deny: %+v", v)
	}
}

// The most specific release_age block decides; an exemption pattern
// beats every window; the first deny_version written decides.
func TestWindowsAndExemptions(t *testing.T) {
	p := mustDecode(t, `policy {
  minimum_release_age = "72h"
  release_age "registry.test/*/*" { minimum = "48h" }
  release_age "registry.test/acme/*" { minimum = "24h" }
  release_age "registry.test/acme/fast" { minimum = "0s" }
  release_age "*/*/*/*" { minimum = "7d" }
  release_age_exemptions = ["registry.test/own/*"]
  deny_version "registry.test/acme/*" {
    versions = ">= 1.0.0"
    reason   = "first"
  }
  deny_version "registry.test/acme/x" {
    versions = "1.0.0"
    reason   = "second"
  }
}`)
	for _, c := range []struct {
		kind Kind
		addr string
		want time.Duration
	}{
		{Provider, "registry.other/acme/x", 72 * time.Hour},
		{Provider, "registry.test/other/x", 48 * time.Hour},
		{Provider, "registry.test/acme/x", 24 * time.Hour},
		{Provider, "registry.test/acme/fast", 0},
		{Provider, "registry.test/own/x", 0},
		{Module, "registry.test/acme/x/aws", 7 * 24 * time.Hour},
	} {
		if got := p.Window(c.kind, c.addr); got != c.want {
			t.Errorf("Window(%s %s) = %v, want %v", c.kind, c.addr, got, c.want)
		}
	}
	if v := p.Version(Provider, "registry.test/acme/x", "1.0.0", Release{}, time.Now()); v.Reason != "first" {
		t.Errorf("two deny_version blocks: %+v, want the first written", v)
	}
}

// A hostile address is refused, not panicked on.
func TestBadAddresses(t *testing.T) {
	p := mustDecode(t, `policy { deny = ["registry.test/a/b"] }`)
	for _, c := range []struct {
		name string
		kind Kind
		addr string
	}{
		{"empty", Provider, ""},
		{"too few parts", Provider, "registry.test/a"},
		{"too many parts", Provider, "registry.test/a/b/c"},
		{"empty part", Module, "registry.test//b/c"},
		{"unknown kind", Kind("oci"), "registry.test/a/b"},
		{"long", Provider, strings.Repeat("a", 10000) + "/b/c"},
		{"bad host", Provider, "bad host/a/b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if v := p.Version(c.kind, c.addr, "1.0.0", Release{}, time.Now()); v.Allowed {
				t.Errorf("allowed: %+v", v)
			}
		})
	}
}

// fiftyRules is a policy of 50 rules of every kind.
func fiftyRules() string {
	var b strings.Builder
	b.WriteString("policy {\n  minimum_release_age = \"72h\"\n  allow = [\n")
	for i := range 20 {
		fmt.Fprintf(&b, "    \"registry.terraform.io/ns%d/*\",\n", i)
	}
	b.WriteString("    \"registry.terraform.io/hashicorp/*\",\n    \"*/acme/*\",\n  ]\n  deny = [\n")
	for i := range 10 {
		fmt.Fprintf(&b, "    \"registry.terraform.io/hashicorp/deny%d\",\n", i)
	}
	b.WriteString("  ]\n  release_age_exemptions = [\"registry.terraform.io/ns1/*\", \"registry.terraform.io/ns2/*\"]\n")
	for i := range 10 {
		fmt.Fprintf(&b, "  deny_version \"registry.terraform.io/hashicorp/p%d\" {\n    versions = \">= 1.%d.0, < 1.%d.5\"\n    reason = \"CVE\"\n  }\n", i, i, i)
	}
	for i := range 3 {
		fmt.Fprintf(&b, "  release_age \"registry.terraform.io/ns%d/*\" { minimum = \"24h\" }\n", i+3)
	}
	for i := range 2 {
		fmt.Fprintf(&b, "  release_age_exempt_version \"registry.terraform.io/hashicorp/p%d\" { versions = \"= 1.%d.9\" }\n", i, i)
	}
	b.WriteString("}\n")
	return b.String()
}

func TestFiftyRules(t *testing.T) {
	if n := mustDecode(t, fiftyRules()).Len(); n != 50 {
		t.Errorf("Len %d, want 50", n)
	}
}

// BenchmarkVersion is one verdict with 50 rules, as asked on every
// answer: the address is in its normal form, its deny_version rule
// applies, and the age gate decides.
func BenchmarkVersion(b *testing.B) {
	p := mustDecode(b, fiftyRules())
	now := time.Now()
	rel := Release{At: now.Add(-100 * time.Hour), Known: true}
	b.ReportAllocs()
	for b.Loop() {
		if v := p.Version(Provider, "registry.terraform.io/hashicorp/p7", "1.7.9", rel, now); !v.Allowed {
			b.Fatal(v)
		}
	}
}

// BenchmarkVersionList is the verdicts on a list of 100 versions, the
// address evaluated once.
func BenchmarkVersionList(b *testing.B) {
	p := mustDecode(b, fiftyRules())
	now := time.Now()
	rel := Release{At: now.Add(-100 * time.Hour), Known: true}
	vs := make([]string, 100)
	for i := range vs {
		vs[i] = fmt.Sprintf("2.%d.0", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		s := p.For(Provider, "registry.terraform.io/hashicorp/p3")
		for _, v := range vs {
			s.Version(v, rel, now)
		}
	}
}

// TestRules: every rule of the example is described once, in the order of
// evaluation, with its file and line.
func TestRules(t *testing.T) {
	p := mustDecode(t, example)
	rules := p.Rules()
	if len(rules) != p.Len() {
		t.Errorf("%d rules described, Len %d:\n%s", len(rules), p.Len(), strings.Join(rules, "\n"))
	}
	for i, want := range []string{
		`deny "registry.terraform.io/hashicorp/null" (mirror.hcl:8)`,
		`allow "registry.terraform.io/hashicorp/*" (mirror.hcl:4)`,
	} {
		if i >= len(rules) || rules[i] != want {
			t.Errorf("rule %d: got %q, want %q", i, rules, want)
		}
	}
	all := strings.Join(rules, "\n")
	for _, want := range []string{
		`deny_version "registry.terraform.io/hashicorp/aws" { versions = ">= 5.80.0, < 5.81.1" } (mirror.hcl:10): CVE-2026-1234: use 5.81.1`,
		`minimum_release_age = "72h" (mirror.hcl:15)`,
		`release_age_exemptions "registry.test/acme/*" (mirror.hcl:16)`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("rules lack %q:\n%s", want, all)
		}
	}
	if (*Policy)(nil).Rules() != nil {
		t.Error("a nil policy has rules")
	}
}

// TestDocExamples: every policy example of docs/policy.md, in HCL and in
// JSON, decodes without a diagnostic, and the `tfmirror policy explain`
// outputs it shows are what Explain prints for its first example (saved
// as mirror.hcl, as the commands there name it).
func TestDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```(hcl|json)\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	var first *Policy
	n := 0
	for i, b := range blocks {
		if !strings.Contains(b[2], "policy") {
			continue
		}
		name := "mirror.hcl"
		if b[1] == "json" {
			name = "mirror.json"
		}
		p, diags := decode(t, name, b[2])
		if len(diags) > 0 || p == nil || p.Len() == 0 {
			t.Errorf("example %d (%s): %v\n%s", i, b[1], diags, b[2])
			continue
		}
		if first == nil {
			first = p
		}
		n++
	}
	if n < 5 || first == nil {
		t.Fatalf("%d policy examples found in docs/policy.md, want the overview's, its JSON form and the recipes'", n)
	}
	// The examples exempt "our own releases" from the age gate: the
	// namespace's modules as well as its providers, which they allow.
	for i, b := range blocks {
		if !strings.Contains(b[2], "release_age_exemptions") || b[1] != "hcl" {
			continue
		}
		p, _ := decode(t, "mirror.hcl", b[2])
		for _, c := range []struct {
			kind Kind
			addr string
		}{{Provider, "registry.example.com/platform/x"}, {Module, "registry.example.com/platform/vpc/aws"}} {
			if w := p.Window(c.kind, c.addr); w != 0 {
				t.Errorf("example %d: our own %s %s is held back %s", i, c.kind, c.addr, w)
			}
		}
	}
	// The explain examples: "    $ tfmirror policy explain --config
	// mirror.hcl --data-dir DIR ADDRESS VERSION" and the indented lines
	// that follow.
	runs := regexp.MustCompile(`(?m)^    \$ tfmirror policy explain --config mirror\.hcl --data-dir \S+ (\S+) (\S+)\n((?:    .+\n)+)`).FindAllStringSubmatch(string(doc), -1)
	if len(runs) < 2 {
		t.Fatalf("%d policy explain examples found, want a denied and a held one", len(runs))
	}
	// The release time each shows, as the cache would give it, a day
	// after the held one's.
	now := time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC)
	for _, r := range runs {
		kind, addr, err := ParseAddress(r[1])
		if err != nil {
			t.Fatal(err)
		}
		var rel Release
		from := ""
		if m := regexp.MustCompile(`released:   (\S+) \((.*)\)`).FindStringSubmatch(r[3]); m != nil {
			at, err := time.Parse(time.RFC3339, m[1])
			if err != nil {
				t.Fatal(err)
			}
			rel, from = Release{Known: true, At: at}, m[2]
		}
		got := first.Explain(kind, addr, r[2], rel, from, now).String()
		want := strings.ReplaceAll(r[3], "\n    ", "\n")[4:]
		if got != want {
			t.Errorf("policy explain %s %s prints:\n%s\nthe doc shows:\n%s", r[1], r[2], got, want)
		}
	}
}

// A name the policy block does not hold gets the one meant when one is
// near, or the list of those it holds; whole days are an age.
func TestDecodeHints(t *testing.T) {
	for _, c := range []struct{ name, file, src, want string }{
		{"near", "p.hcl", "policy {\n  min_release_age = \"3d\"\n}", `Did you mean "minimum_release_age"?`},
		{"near block", "p.hcl", "policy {\n  deny_versions \"registry.test/a/b\" {\n  }\n}", `Did you mean "deny_version"?`},
		{"far", "p.hcl", "policy {\n  cache_max_bytes = 1\n}", "A policy block holds allow, deny, minimum_release_age"},
		{"JSON near", "p.json", "{\"policy\": {\"min_release_age\": \"3d\"}}", `Did you mean "minimum_release_age"?`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, diags := decode(t, c.file, c.src)
			if !diags.HasErrors() || !strings.Contains(diags.Error(), c.want) {
				t.Errorf("%v, want %q", diags, c.want)
			}
		})
	}
	p, diags := decode(t, "p.hcl", "policy {\n  minimum_release_age = \"1d\"\n}")
	if diags.HasErrors() || p.Window(Provider, "registry.test/a/b") != 24*time.Hour {
		t.Errorf("1d: %v", diags)
	}
}

// An address of an IDN origin with a port, in its normal form (punycode,
// as every front door and addrs print it), is judged by the rules, not
// refused as invalid: a policy of a minimum release age alone refuses no
// address.
func TestIDNHostWithPort(t *testing.T) {
	p := mustDecode(t, `policy { minimum_release_age = "1h" }`)
	for _, c := range []struct {
		kind Kind
		addr string
	}{
		{Provider, "xn--bcher-kva.example:8443/a/b"},
		{Module, "xn--bcher-kva.example:8443/a/b/aws"},
	} {
		if v := p.Address(c.kind, c.addr); !v.Allowed {
			t.Errorf("%s %s: %+v, want allowed", c.kind, c.addr, v)
		}
	}
}

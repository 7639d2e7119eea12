package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// metricLine returns the value of the series name in body (the /metrics
// answer), "absent" when it has none.
func metricLine(body, name string) string {
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return v
		}
	}
	return "absent"
}

// TestCLIReleaseBadSignatureIsAVerificationFailure: a CLI release's
// SHA256SUMS whose signature does not verify with the publisher's key
// (the terraform binary itself forged, or changed on the way) counts in
// tfmirror_verification_failures_total{reason="signature"}, as a provider's
// does and as a CLI archive's bad checksum does: that is the series the
// TfmirrorVerificationFailures alert watches, and an operator must hear of
// it. tfmirror_cli_refused_total says which product.
func TestCLIReleaseBadSignatureIsAVerificationFailure(t *testing.T) {
	c := newCLIOrigin(t)
	c.origin.SignWithOtherKey("terraform_1.6.0_SHA256SUMS")
	c.start(t, t.TempDir())
	resp, err := c.client(t).Get(c.url + "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("a SHA256SUMS signed by another key: %d, want 502", resp.StatusCode)
	}
	body := c.get(t, "/metrics")
	value := func(name string) string { return metricLine(body, name) }
	for name, want := range map[string]string{
		`tfmirror_cli_refused_total{product="terraform",publisher="hashicorp",reason="signature"}`: "1",
		`tfmirror_verification_failures_total{reason="signature"}`:                                 "1",
	} {
		if v := value(name); v != want {
			t.Errorf("%s = %s, want %s", name, v, want)
		}
	}
}

// TestCLIReleasePolicyRefusalCounted: a CLI release the package policy
// refuses counts in tfmirror_policy_refusals_total by its rule, as
// docs/policy.md says of every refusal (the CLI releases door is one of
// the doors the policy applies to), and in tfmirror_cli_refused_total.
func TestCLIReleasePolicyRefusalCounted(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "mirror.hcl")
	policy := "policy {\n  deny_version \"releases.hashicorp.com/hashicorp/terraform\" {\n    versions = [\"1.6.0\"]\n    reason   = \"use 1.5.7\"\n  }\n}\n"
	if err := os.WriteFile(conf, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCLIMirror(t, "--config", conf)
	resp, err := c.client(t).Get(c.url + "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnavailableForLegalReasons {
		t.Fatalf("a version deny_version names: %d, want 451", resp.StatusCode)
	}
	body := c.get(t, "/metrics")
	for name, want := range map[string]string{
		`tfmirror_cli_refused_total{product="terraform",publisher="hashicorp",reason="deny_version"}`: "1",
		`tfmirror_policy_refusals_total{rule="deny_version"}`:                                         "1",
	} {
		if v := metricLine(body, name); v != want {
			t.Errorf("%s = %s, want %s", name, v, want)
		}
	}
}

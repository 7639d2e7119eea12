package main

import (
	"io"
	"net/http"
	"net/url"
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

// TestCLIReleaseVerificationFailuresOnTheOriginsRow: a CLI release
// archive that does not match its signed SHA256SUMS, and a SHA256SUMS
// signed by a key the publisher does not name, are failures of the
// origin that answered them on the status page, as a provider package's
// are (docs/operations.md, the origin rows): its row says "answering,
// failing verification", counts them in the last hour and names the
// last one, as /metrics counts them.
func TestCLIReleaseVerificationFailuresOnTheOriginsRow(t *testing.T) {
	c := newCLIOrigin(t)
	name := "tofu_1.8.0_" + platform + ".zip"
	c.origin.Tamper(name)
	c.origin.SignWithOtherKey("terraform_1.6.0_SHA256SUMS")
	c.start(t, t.TempDir())
	u, err := url.Parse(c.origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/releases/opentofu/v1.8.0/" + name, "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_" + platform + ".zip"} {
		resp, err := c.client(t).Get(c.url + p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && err == nil {
			t.Fatalf("%s: a whole 200", p)
		}
	}
	body := c.get(t, "/metrics")
	for _, s := range []string{`tfmirror_verification_failures_total{reason="checksum_mismatch"}`, `tfmirror_verification_failures_total{reason="signature"}`} {
		if v := metricLine(body, s); v != "1" {
			t.Errorf("%s = %s, want 1", s, v)
		}
	}
	found := false
	for _, o := range c.status(t).Origins {
		if o.Host != u.Host {
			continue
		}
		found = true
		if o.State != "unverified" || o.LastHour.VerificationFailures != 2 || o.LastVerificationFailure == nil {
			t.Errorf("origin row %s after 2 CLI release files it answered failed verification: state %q, last_hour.verification_failures %d, last_verification_failure %v; want unverified, 2, set",
				o.Host, o.State, o.LastHour.VerificationFailures, o.LastVerificationFailure)
		}
	}
	if !found {
		t.Fatalf("the status page has no row of the origin %s", u.Host)
	}
	if page := c.get(t, "/"); !strings.Contains(page, "answering, failing verification") {
		t.Errorf("the status page does not say the origin is failing verification:\n%s", page)
	}
}

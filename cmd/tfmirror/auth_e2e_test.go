package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestTerraformInitWithClientAuth: with --auth-tokens-file, terraform
// installs through the mirror when its CLI configuration has credentials
// for the mirror's host, and is refused without them; archive URLs work
// only with their signature.
func TestTerraformInitWithClientAuth(t *testing.T) {
	t.Parallel()
	const token = "e2e-client-token.0123456789"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# CI\nsomeone-else-0123456789\n"+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newE2E(t, fakeorigin.Options{}, "--auth-tokens-file", tokens)
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	providers := map[string]string{"random": "hashicorp/random@3.6.0"}

	// Without credentials: refused.
	dir := writeConfig(t, providers)
	out, err := e.terraform(dir, "init", "-no-color")
	if err == nil {
		t.Fatalf("terraform init without credentials succeeded:\n%s", out)
	}
	// Terraform's wording for a 401 from a mirror.
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "rejected the given authentication credentials") {
		t.Errorf("terraform's error does not say the mirror refused it:\n%s", out)
	}

	// With a credentials block for the mirror's host:port: installed.
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(e.cliConf)
	if err != nil {
		t.Fatal(err)
	}
	conf = fmt.Appendf(conf, "credentials %q {\n  token = %q\n}\n", u.Host, token)
	if err := os.WriteFile(e.cliConf, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	dir = writeConfig(t, providers)
	if out, err := e.terraform(dir, "init", "-no-color"); err != nil {
		t.Fatalf("terraform init with credentials failed: %v\n%s", err, out)
	}
	plugin := "registry.terraform.io/hashicorp/random/3.6.0/linux_amd64/terraform-provider-random_v3.6.0"
	if _, err := os.Stat(filepath.Join(dir, ".terraform", "providers", plugin)); err != nil {
		t.Errorf("provider not installed: %v", err)
	}

	// The archive URL in VERSION.json works as given, and not when its
	// signature or expiry is changed.
	client := trustingClient(t, e.caFile)
	defer client.CloseIdleConnections()
	base := e.url + "registry.terraform.io/hashicorp/random/"
	urls, _ := archiveURLs(t, client, base+"3.6.0.json", token)
	signed, err := url.Parse(urls["linux_amd64"])
	if err != nil {
		t.Fatal(err)
	}
	q := signed.Query()
	tamperedSig := url.Values{"exp": {q.Get("exp")}, "sig": {"A" + q.Get("sig")[1:]}}
	if q.Get("sig")[0] == 'A' {
		tamperedSig.Set("sig", "B"+q.Get("sig")[1:])
	}
	expired := url.Values{"exp": {"1000000000"}, "sig": {q.Get("sig")}}
	for _, tc := range []struct {
		name  string
		query string
		want  int
	}{
		{"signed", signed.RawQuery, http.StatusOK},
		{"unsigned", "", http.StatusForbidden},
		{"tampered signature", tamperedSig.Encode(), http.StatusForbidden},
		{"expired", expired.Encode(), http.StatusForbidden},
	} {
		resp, err := client.Get(base + signed.Path + "?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s archive URL: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}

package proxy

import (
	"html"
	"regexp"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// The provider_installation block the page offers to paste is HCL that
// the clients read back as the mirror's URL, whatever its path holds (a
// quote, a backslash, a template sequence), as the host blocks are.
func TestStatusProviderInstallationSnippetIsHCL(t *testing.T) {
	t.Parallel()
	const public = `https://mirror.example.com/a"b\c${x}%{y}/`
	h := statusHarness(t, Config{PublicURL: public})
	r := h.get("/")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	m := regexp.MustCompile(`(?s)<pre><code>(provider_installation \{.*?)</code></pre>`).FindStringSubmatch(string(r.body))
	if m == nil {
		t.Fatalf("no provider_installation block:\n%s", r.body)
	}
	src := html.UnescapeString(m[1])
	f, diags := hclsyntax.ParseConfig([]byte(src), "snippet.tfrc", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("the snippet does not parse: %s\n%s", diags, src)
	}
	body := f.Body.(*hclsyntax.Body)
	if len(body.Blocks) != 1 || len(body.Blocks[0].Body.Blocks) != 1 {
		t.Fatalf("want provider_installation { network_mirror { ... } }:\n%s", src)
	}
	attr := body.Blocks[0].Body.Blocks[0].Body.Attributes["url"]
	if attr == nil {
		t.Fatalf("no url:\n%s", src)
	}
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() || v.AsString() != public {
		t.Errorf("url reads back as %#v (%s), want %q:\n%s", v, diags, public, src)
	}
}

package discovery

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	svchost "github.com/hashicorp/terraform-svchost"
	"github.com/tfmirror/tfmirror/v2/internal/hclfile"
	"github.com/zclconf/go-cty/cty"
)

// Credentials are bearer tokens for origin hosts, read the way Terraform
// reads its own: `credentials "HOST" { token = "..." }` blocks of a CLI
// configuration file (native syntax, or JSON for a name ending in .json,
// as in credentials.tfrc.json), and TF_TOKEN_<host> environment variables.
// Its Token method is meant for Config.Credentials. A Credentials never
// prints its tokens.
type Credentials struct {
	tokens map[svchost.Hostname]string
}

// LoadCredentials reads the credentials blocks of file (none when file is
// "") and the TF_TOKEN_ variables of environ (os.Environ form). In a
// variable name the host's dots are written "_" and its hyphens "__"
// (TF_TOKEN_registry_example__corp_com is registry.example-corp.com);
// non-ASCII hosts may be given in Unicode or Punycode. A variable wins
// over the file for the same host. Other blocks of the file (such as
// provider_installation) are ignored. Empty tokens are errors.
func LoadCredentials(file string, environ []string) (*Credentials, error) {
	c := &Credentials{tokens: make(map[svchost.Hostname]string)}
	if file != "" {
		if err := c.loadFile(file); err != nil {
			return nil, err
		}
	}
	const prefix = "TF_TOKEN_"
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		raw := strings.ReplaceAll(name[len(prefix):], "__", "-")
		raw = strings.ReplaceAll(raw, "_", ".")
		host, err := svchost.ForComparison(svchost.ForDisplay(raw))
		if err != nil {
			return nil, fmt.Errorf("%s does not name a valid host: %w", name, err)
		}
		if value == "" {
			return nil, fmt.Errorf("%s is empty", name)
		}
		c.tokens[host] = value
	}
	return c, nil
}

func (c *Credentials) loadFile(file string) error {
	f, diags, err := hclfile.ParseTrusted(nil, file)
	if err != nil {
		return fmt.Errorf("credentials file: %w", err)
	}
	if diags.HasErrors() {
		return fmt.Errorf("credentials file: %s", hclfile.Summary(diags))
	}
	content, _, diags := f.Body.PartialContent(&hcl.BodySchema{
		Blocks: []hcl.BlockHeaderSchema{{Type: "credentials", LabelNames: []string{"host"}}},
	})
	if diags.HasErrors() {
		return fmt.Errorf("credentials file: %s", hclfile.Summary(diags))
	}
	for _, b := range content.Blocks {
		host, err := svchost.ForComparison(b.Labels[0])
		if err != nil {
			return fmt.Errorf("credentials file %s: credentials %q: %w", b.DefRange, b.Labels[0], err)
		}
		attrs, diags := b.Body.JustAttributes()
		if diags.HasErrors() {
			return fmt.Errorf("credentials file: %s", hclfile.Summary(diags))
		}
		a, ok := attrs["token"]
		if !ok {
			return fmt.Errorf("credentials file %s: credentials %q has no token", b.DefRange, b.Labels[0])
		}
		v, diags := hclfile.Value(a.Expr)
		if diags.HasErrors() {
			return fmt.Errorf("credentials file: %s", hclfile.Summary(diags))
		}
		if v.IsNull() || !v.IsKnown() || v.Type() != cty.String || v.AsString() == "" {
			return fmt.Errorf("credentials file %s: token for %q must be a non-empty string", a.Range, b.Labels[0])
		}
		if _, dup := c.tokens[host]; dup {
			return fmt.Errorf("credentials file %s: more than one credentials block for %q", b.DefRange, host)
		}
		c.tokens[host] = v.AsString()
	}
	return nil
}

// Token returns the bearer token for host, "" for none.
func (c *Credentials) Token(host svchost.Hostname) string {
	if c == nil {
		return ""
	}
	return c.tokens[host]
}

// Hosts lists the hosts that have a token (for logs; never the tokens).
func (c *Credentials) Hosts() []string {
	var out []string
	for h := range c.tokens {
		out = append(out, string(h))
	}
	slices.Sort(out)
	return out
}

// String does not reveal tokens.
func (c *Credentials) String() string {
	return fmt.Sprintf("credentials for %d host(s)", len(c.tokens))
}

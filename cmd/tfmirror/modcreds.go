package main

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	svchost "github.com/hashicorp/terraform-svchost"
	"github.com/zclconf/go-cty/cty"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/hclfile"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
)

// moduleSourceCredentials are the credentials of --module-source-credentials:
// for each module source host, a secret and the origins whose modules may
// be fetched with it. They implement modules.SourceCredentials and
// never print a secret.
type moduleSourceCredentials struct {
	hosts map[string]sourceHostCredential // by host as a URL spells it
}

type sourceHostCredential struct {
	cred    discovery.SourceCredential
	origins []svchost.Hostname
}

// sourceHostBlock is one source_host block of the file.
type sourceHostBlock struct {
	Host                                string
	Origins                             []string
	Username                            *string
	Password, PasswordEnv, PasswordFile *string
	Token, TokenEnv, TokenFile          *string
}

// decodeSourceHosts reads the source_host blocks of body.
func decodeSourceHosts(body hcl.Body) ([]sourceHostBlock, error) {
	content, diags := body.Content(&hcl.BodySchema{
		Blocks: []hcl.BlockHeaderSchema{{Type: "source_host", LabelNames: []string{"host"}}},
	})
	if diags.HasErrors() {
		return nil, fmt.Errorf("module source credentials: %s", hclfile.Summary(diags))
	}
	var out []sourceHostBlock
	for _, blk := range content.Blocks {
		attrs, diags := blk.Body.JustAttributes()
		if diags.HasErrors() {
			return nil, fmt.Errorf("module source credentials: %s", hclfile.Summary(diags))
		}
		b := sourceHostBlock{Host: blk.Labels[0]}
		strs := map[string]**string{
			"username": &b.Username, "password": &b.Password, "password_env": &b.PasswordEnv,
			"password_file": &b.PasswordFile, "token": &b.Token, "token_env": &b.TokenEnv, "token_file": &b.TokenFile,
		}
		for name, a := range attrs {
			v, diags := hclfile.Value(a.Expr)
			if diags.HasErrors() {
				return nil, fmt.Errorf("module source credentials: %s", hclfile.Summary(diags))
			}
			if name == "origins" {
				if v.IsNull() || !v.IsKnown() || !(v.Type().IsListType() || v.Type().IsTupleType()) {
					return nil, fmt.Errorf("module source credentials %s: origins must be a list of host names", a.Range)
				}
				for it := v.ElementIterator(); it.Next(); {
					_, e := it.Element()
					if e.IsNull() || !e.IsKnown() || e.Type() != cty.String {
						return nil, fmt.Errorf("module source credentials %s: origins must be a list of host names", a.Range)
					}
					b.Origins = append(b.Origins, e.AsString())
				}
				continue
			}
			dst, ok := strs[name]
			if !ok {
				return nil, fmt.Errorf("module source credentials %s: unknown attribute %q", a.Range, name)
			}
			if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
				return nil, fmt.Errorf("module source credentials %s: %s must be a string", a.Range, name)
			}
			str := v.AsString()
			*dst = &str
		}
		out = append(out, b)
	}
	return out, nil
}

// loadModuleSourceCredentials reads file (HCL, or JSON for a name ending
// in .json): `source_host "HOST" { origins = [...] ... }` blocks, each
// with a username and one of password, password_env, password_file, or
// one of token, token_env, token_file (username optional). Every origin
// must be one of allowed. Secrets read from a file lose their trailing
// newline. lookupEnv reads the *_env variables. Errors never quote a
// secret.
func loadModuleSourceCredentials(file string, allowed []string, lookupEnv func(string) (string, bool)) (*moduleSourceCredentials, error) {
	f, diags, err := hclfile.ParseTrusted(nil, file)
	if err != nil {
		return nil, fmt.Errorf("module source credentials: %w", err)
	}
	if diags.HasErrors() {
		// Diagnostics quote at most the file's text around a syntax error.
		return nil, fmt.Errorf("module source credentials: %s", hclfile.Summary(diags))
	}
	blocks, err := decodeSourceHosts(f.Body)
	if err != nil {
		return nil, err
	}
	allowedHosts := map[svchost.Hostname]bool{}
	for _, a := range allowed {
		if h, err := addrs.ParseHost(a); err == nil {
			allowedHosts[h] = true
		}
	}
	c := &moduleSourceCredentials{hosts: map[string]sourceHostCredential{}}
	for _, b := range blocks {
		where := fmt.Sprintf("%s: source_host %q", file, b.Host)
		host, err := sourceHostKey(b.Host)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if _, dup := c.hosts[host]; dup {
			return nil, fmt.Errorf("%s: more than one block for this host", where)
		}
		if len(b.Origins) == 0 {
			return nil, fmt.Errorf("%s: origins is empty: name the origins whose modules may use this credential", where)
		}
		hc := sourceHostCredential{cred: discovery.SourceCredential{Host: host}}
		for _, o := range b.Origins {
			h, err := addrs.ParseHost(o)
			if err != nil {
				return nil, fmt.Errorf("%s: origin %q: %w", where, o, err)
			}
			if !allowedHosts[h] {
				return nil, fmt.Errorf("%s: origin %q is not one of --allowed-origins", where, o)
			}
			hc.origins = append(hc.origins, h)
		}
		password, err := oneSecret(where, "password", b.Password, b.PasswordEnv, b.PasswordFile, lookupEnv)
		if err != nil {
			return nil, err
		}
		token, err := oneSecret(where, "token", b.Token, b.TokenEnv, b.TokenFile, lookupEnv)
		if err != nil {
			return nil, err
		}
		switch {
		case password != "" && token != "":
			return nil, fmt.Errorf("%s: give a password or a token, not both", where)
		case password == "" && token == "":
			return nil, fmt.Errorf("%s: no password or token", where)
		case password != "" && (b.Username == nil || *b.Username == ""):
			return nil, fmt.Errorf("%s: a password needs a username", where)
		}
		if b.Username != nil {
			hc.cred.Username = *b.Username
		}
		hc.cred.Password, hc.cred.Token = password, token
		c.hosts[host] = hc
	}
	return c, nil
}

// oneSecret reads the secret given by at most one of value, env and
// file, "" when none is.
func oneSecret(where, name string, value, env, file *string, lookupEnv func(string) (string, bool)) (string, error) {
	n := 0
	for _, p := range []*string{value, env, file} {
		if p != nil {
			n++
		}
	}
	switch {
	case n == 0:
		return "", nil
	case n > 1:
		return "", fmt.Errorf("%s: give one of %s, %s_env and %s_file", where, name, name, name)
	}
	var secret string
	switch {
	case value != nil:
		secret = *value
	case env != nil:
		v, ok := lookupEnv(*env)
		if !ok {
			return "", fmt.Errorf("%s: %s_env: the variable %s is not set", where, name, *env)
		}
		secret = v
	default:
		raw, err := readSecretFile(*file)
		if err != nil {
			return "", fmt.Errorf("%s: %s_file: %w", where, name, err)
		}
		secret = strings.TrimRight(string(raw), "\r\n")
	}
	if secret == "" {
		return "", fmt.Errorf("%s: the %s is empty", where, name)
	}
	return secret, nil
}

// maxSecretFileBytes bounds a *_file secret: a token or password is a few
// hundred bytes.
const maxSecretFileBytes = 64 << 10

// readSecretFile reads a *_file secret as every operator's file of
// secrets is read (internal/inputfile.ReadTrusted): through a link (a
// mounted Secret's), never waiting on a FIFO, no further than
// maxSecretFileBytes (a device never ends), and refused when users other
// than its owner may write it.
func readSecretFile(path string) ([]byte, error) {
	return inputfile.ReadTrusted(path, maxSecretFileBytes)
}

// sourceHostKey spells a source host as the mirror compares URL hosts:
// lowercase, with its port when not 443.
func sourceHostKey(raw string) (string, error) {
	u, err := url.Parse("https://" + raw)
	if err != nil || u.Host != raw && u.Host != strings.ToLower(raw) || u.Hostname() == "" || u.User != nil || u.Path != "" {
		return "", fmt.Errorf("not a host name (HOST or HOST:PORT)")
	}
	h := strings.ToLower(u.Hostname())
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if p := u.Port(); p != "" && p != "443" {
		h += ":" + p
	}
	return h, nil
}

// SourceCredential implements modules.SourceCredentials.
func (c *moduleSourceCredentials) SourceCredential(origin svchost.Hostname, host string) (discovery.SourceCredential, bool) {
	if c == nil {
		return discovery.SourceCredential{}, false
	}
	hc, ok := c.hosts[host]
	if !ok || !slices.Contains(hc.origins, origin) {
		return discovery.SourceCredential{}, false
	}
	return hc.cred, true
}

// summary lists each host with its origins, for the log (never a secret).
func (c *moduleSourceCredentials) summary() []string {
	var out []string
	for h, hc := range c.hosts {
		var os []string
		for _, o := range hc.origins {
			os = append(os, string(o))
		}
		out = append(out, h+" for "+strings.Join(os, ","))
	}
	slices.Sort(out)
	return out
}

// publicRegistries are registries where anyone may publish a module,
// whose location may then name any repository.
var publicRegistries = []svchost.Hostname{"registry.terraform.io", "registry.opentofu.org"}

// publicTies lists the credentials tied to a public registry, as "HOST
// for ORIGIN", sorted: anyone who publishes a module there can have the
// mirror read, with the credential, a repository it reads, and serve it
// to its clients.
func (c *moduleSourceCredentials) publicTies() []string {
	var out []string
	for h, hc := range c.hosts {
		for _, o := range hc.origins {
			if slices.Contains(publicRegistries, o) {
				out = append(out, h+" for "+string(o))
			}
		}
	}
	slices.Sort(out)
	return out
}

// String does not reveal secrets.
func (c *moduleSourceCredentials) String() string {
	return fmt.Sprintf("module source credentials for %d host(s)", len(c.hosts))
}

// lookupEnv looks name up in o.environ when a test set it, in the
// process's environment otherwise.
func (o overrides) lookupEnv(name string) (string, bool) {
	if o.environ == nil {
		return os.LookupEnv(name)
	}
	for _, kv := range o.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

package discovery

import (
	"context"
	"encoding/base64"
	"net/url"

	svchost "github.com/hashicorp/terraform-svchost"
)

// SourceCredential is a credential for one module source host (a Git
// host or an archive host that a module's download location names). The
// caller decides which fetches may use it (package mirror ties it to
// origins) and hands it over with WithSourceCredential; OpenSource and
// SourceHTTPClient then send it only to that host, over https, and never
// across a redirect to another host. It never prints its secret.
type SourceCredential struct {
	// Host is the source host, spelled as in a URL (lowercase, with its
	// port when not 443).
	Host string
	// Username and Password, for HTTP basic authentication; or Token,
	// sent as a bearer token to archive hosts and as the password of
	// basic authentication (user Username, default "x-access-token") to
	// Git hosts, as GitHub, GitLab and Bitbucket take access tokens.
	Username, Password, Token string
}

// String does not reveal the secret.
func (c SourceCredential) String() string { return "credential for " + c.Host }

// GoString does not reveal the secret either (%#v).
func (c SourceCredential) GoString() string { return c.String() }

// authorization returns the Authorization header value for a request of
// the given kind to u, "" when the credential is not for u's host.
func (c SourceCredential) authorization(u *url.URL, git bool) string {
	if u == nil || u.Scheme != "https" || c.Host == "" || hostKey(u) != c.Host {
		return ""
	}
	if c.Token != "" && !git {
		return "Bearer " + c.Token
	}
	user, pass := c.Username, c.Password
	if c.Token != "" {
		pass = c.Token
		if user == "" {
			user = "x-access-token"
		}
	}
	if pass == "" {
		return ""
	}
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

type sourceCredentialKey struct{}

// WithSourceCredential returns ctx carrying c for the module source
// requests made on it (OpenSource, SourceHTTPClient): those to c.Host
// send it, all others are anonymous.
func WithSourceCredential(ctx context.Context, c SourceCredential) context.Context {
	return context.WithValue(ctx, sourceCredentialKey{}, c)
}

// sourceAuthorization is the Authorization header for a module source
// request to u on ctx, "" for none.
func sourceAuthorization(ctx context.Context, u *url.URL, git bool) string {
	c, ok := ctx.Value(sourceCredentialKey{}).(SourceCredential)
	if !ok {
		return ""
	}
	return c.authorization(u, git)
}

type registryCredentialKey struct{}

// WithRegistryCredential returns ctx asking for the origin's own token
// (Config.Credentials of the origin host that OpenSource is called for)
// on the module source requests made on it to packageURL's host: a
// package that the origin's download answer said to fetch with the
// registry's credential (ModuleDownload.RegistryCredentials), as OpenTofu
// fetches it. The token goes, as a bearer token, only over https and
// only to that host: a redirect to another host drops it, and requests
// to other hosts are anonymous. Where the origin host has a token, it
// takes the place of a SourceCredential for that host; where it has
// none, the requests go as they would without ctx's asking (the package
// host's refusal then says why). The token never leaves this package.
func WithRegistryCredential(ctx context.Context, packageURL string) context.Context {
	u, err := url.Parse(packageURL)
	if err != nil || u.Host == "" {
		return ctx
	}
	return context.WithValue(ctx, registryCredentialKey{}, hostKey(u))
}

// registryAuthorization is the Authorization header of the origin's
// token for a module source request to u on ctx (WithRegistryCredential),
// "" for none.
func (t *transport) registryAuthorization(ctx context.Context, origin svchost.Hostname, u *url.URL) string {
	host, ok := ctx.Value(registryCredentialKey{}).(string)
	if !ok || u == nil || u.Scheme != "https" || hostKey(u) != host || t.credentials == nil {
		return ""
	}
	if tok := t.credentials(origin); tok != "" {
		return "Bearer " + tok
	}
	return ""
}

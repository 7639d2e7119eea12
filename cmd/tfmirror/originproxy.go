package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpproxy"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/hostport"
)

// originRoute is how origin requests reach the origins, as serve and
// sync choose it at start (originProxy) and config check reports it.
type originRoute struct {
	// proxyFor chooses a request's proxy by its URL; nil: none.
	proxyFor func(*url.URL) (*url.URL, error)
	// source is the setting the proxy comes from: "upstream_proxy",
	// "HTTPS_PROXY", or "" when origin requests go direct.
	source string
	// shown is the proxy's scheme and host, without its user and
	// password; "" when origin requests go direct.
	shown string
	// noProxy is NO_PROXY's value, when HTTPS_PROXY chooses the proxy.
	noProxy string
	// unread are the proxy variables set that origin requests do not
	// read, when no proxy is chosen: HTTP_PROXY (origin traffic is https
	// only) and ALL_PROXY (Go's proxy rules do not read it).
	unread []string
}

// errEnvProxy refuses an HTTPS_PROXY that the standard proxy rules would
// not use as a proxy URL: they ignore a value they cannot read (a
// password's '%' not percent-encoded), sending every request direct,
// and take a scheme net/http does not speak (socks4://) or a URL with
// no host for one, failing every request; a path, query or fragment
// (a password's '/' not percent-encoded, which ends the host there) is
// refused too. Its value is not shown: it may hold a password.
var errEnvProxy = errors.New("the HTTPS_PROXY (or https_proxy) variable is not a proxy URL: want one such as http://proxy.example.com:3128 " +
	"(scheme http, https, socks5 or socks5h), without path, query or fragment, the special characters of a user or password percent-encoded (its value is not shown: it may hold a password)")

// proxyVar is the environment variable name (upper case), or its lower
// case form when that is unset or empty, as the standard proxy rules
// read them.
func proxyVar(lookupEnv func(string) (string, bool), name string) string {
	for _, n := range []string{name, strings.ToLower(name)} {
		if v, ok := lookupEnv(n); ok && v != "" {
			return v
		}
	}
	return ""
}

// originProxy chooses how origin requests reach the origins: through
// upstream (--upstream-proxy, checked by settings.Config.Validate) when
// it is set, for every host; else by the environment's HTTPS_PROXY and
// NO_PROXY with the standard rules (http.ProxyFromEnvironment's, read
// from lookupEnv). An HTTPS_PROXY those rules would not use as a proxy
// URL with a scheme net/http speaks and a host is refused
// (errEnvProxy), as such an --upstream-proxy is.
func originProxy(upstream string, lookupEnv func(string) (string, bool)) (*originRoute, error) {
	if upstream != "" {
		u, err := url.Parse(upstream)
		if err != nil {
			return nil, err
		}
		return &originRoute{
			proxyFor: func(*url.URL) (*url.URL, error) { return u, nil },
			source:   "upstream_proxy",
			shown:    (&url.URL{Scheme: u.Scheme, Host: u.Host}).String(),
		}, nil
	}
	pc := httpproxy.Config{
		HTTPProxy:  proxyVar(lookupEnv, "HTTP_PROXY"),
		HTTPSProxy: proxyVar(lookupEnv, "HTTPS_PROXY"),
		NoProxy:    proxyVar(lookupEnv, "NO_PROXY"),
	}
	route := &originRoute{proxyFor: pc.ProxyFunc()}
	if pc.HTTPSProxy == "" {
		if pc.HTTPProxy != "" {
			route.unread = append(route.unread, "HTTP_PROXY")
		}
		if proxyVar(lookupEnv, "ALL_PROXY") != "" {
			route.unread = append(route.unread, "ALL_PROXY")
		}
		return route, nil
	}
	// The proxy the rules give a host NO_PROXY does not exempt.
	only := httpproxy.Config{HTTPSProxy: pc.HTTPSProxy}
	u, err := only.ProxyFunc()(&url.URL{Scheme: "https", Host: "registry.terraform.io"})
	if err != nil || u == nil || hostport.Check(u) != nil {
		return nil, errEnvProxy
	}
	// A value with a scheme that has no host ("http://", "http://[::1")
	// the rules read only by putting http:// before it again: its host
	// comes out as "http". (One with an empty port, http://proxy:, is
	// read as it is: net/http dials the scheme's port.)
	if scheme, _, ok := strings.Cut(pc.HTTPSProxy, "://"); ok && !strings.ContainsAny(scheme, "/:@") {
		if raw, err := url.Parse(pc.HTTPSProxy); err != nil || raw.Hostname() == "" {
			return nil, errEnvProxy
		}
	}
	// As --upstream-proxy: a scheme net/http speaks, and no path, query
	// or fragment (the rules would send every request to a host named
	// by the user of a password whose "/" is not percent-encoded).
	if !settings.ProxyScheme(u.Scheme) || settings.BeyondAuthority(u) {
		return nil, errEnvProxy
	}
	route.source, route.noProxy = "HTTPS_PROXY", pc.NoProxy
	route.shown = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	return route, nil
}

// describe says, in one line, how origin requests reach host: through
// which proxy (by its scheme and host) or direct, and why.
func (r *originRoute) describe(host string) string {
	if r.source == "" {
		return "direct"
	}
	u, err := r.proxyFor(&url.URL{Scheme: "https", Host: host})
	switch {
	case err != nil:
		return "refused: " + err.Error()
	case u == nil:
		return "direct (NO_PROXY, or a loopback host, which HTTPS_PROXY never covers)"
	}
	return fmt.Sprintf("through %s (%s)", r.shown, r.source)
}

// unreadNote is what the start logs, and config check prints, of the
// proxy variables set that origin requests do not read; "" for none.
func (r *originRoute) unreadNote() string {
	if len(r.unread) == 0 {
		return ""
	}
	return strings.Join(r.unread, " and ") + " set, but origin requests read HTTPS_PROXY only (they are all https, and Go's proxy rules do not read ALL_PROXY): " +
		"they go direct; set HTTPS_PROXY or upstream_proxy to send them through a proxy"
}

package main

import (
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"

	"golang.org/x/net/http/httpproxy"

	"github.com/tfmirror/tfmirror/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/discovery"
)

// originNetwork sets the proxy and the credentials of the origin client
// from --upstream-proxy, --credentials-file and the environment.
func originNetwork(dc *discovery.Config, cfg settings.Config, o overrides, logger *slog.Logger) error {
	environ := o.environ
	if environ == nil {
		environ = os.Environ()
	}
	if cfg.UpstreamProxy != "" {
		u, err := url.Parse(cfg.UpstreamProxy)
		if err != nil {
			return err
		}
		dc.Proxy = http.ProxyURL(u)
		logger.Info("origin traffic goes through the upstream proxy", "proxy", (&url.URL{Scheme: u.Scheme, Host: u.Host}).String())
	} else {
		// The same rules as http.ProxyFromEnvironment, read from environ.
		pc := httpproxy.Config{
			HTTPProxy:  getenv(environ, "HTTP_PROXY"),
			HTTPSProxy: getenv(environ, "HTTPS_PROXY"),
			NoProxy:    getenv(environ, "NO_PROXY"),
		}
		if pc.HTTPSProxy != "" {
			logger.Info("origin traffic goes through HTTPS_PROXY, except hosts in NO_PROXY", "no_proxy", pc.NoProxy)
		}
		proxyFor := pc.ProxyFunc()
		dc.Proxy = func(r *http.Request) (*url.URL, error) { return proxyFor(r.URL) }
	}
	creds, err := discovery.LoadCredentials(cfg.CredentialsFile, environ)
	if err != nil {
		return err
	}
	if hosts := creds.Hosts(); len(hosts) > 0 {
		dc.Credentials = creds.Token
		logger.Info("origin credentials loaded", "hosts", hosts)
	}
	if cfg.Offline {
		logger.Info("offline: origins are never contacted; only cached data is served")
	}
	return nil
}

// getenv looks name up in environ in upper, then lower case.
func getenv(environ []string, name string) string {
	for _, n := range []string{name, strings.ToLower(name)} {
		for _, kv := range environ {
			if k, v, ok := strings.Cut(kv, "="); ok && k == n && v != "" {
				return v
			}
		}
	}
	return ""
}

package main

import (
	"log/slog"
	"net/http"
	"net/url"
	"os"

	"github.com/tfmirror/tfmirror/discovery"
)

// originNetwork sets the proxy and the credentials of the origin client
// from --upstream-proxy, --credentials-file and the environment.
func originNetwork(dc *discovery.Config, cfg serveConfig, o overrides, logger *slog.Logger) error {
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

package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"

	"golang.org/x/net/http/httpproxy"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
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
		proxyFor := pc.ProxyFunc()
		if pc.HTTPSProxy != "" {
			// The standard rules ignore a value they cannot read (a
			// password's '%' not percent-encoded): every request would go
			// direct, against what the log says. Refused as such an
			// --upstream-proxy is, without its value (it may hold a
			// password).
			only := httpproxy.Config{HTTPSProxy: pc.HTTPSProxy} // whatever NO_PROXY exempts
			if u, err := only.ProxyFunc()(&url.URL{Scheme: "https", Host: "registry.terraform.io"}); err != nil || u == nil {
				return errors.New("the HTTPS_PROXY (or https_proxy) variable is not a URL: want one such as http://proxy.example.com:3128, the special characters of a user or password percent-encoded (its value is not shown: it may hold a password)")
			}
			logger.Info("origin traffic goes through HTTPS_PROXY, except hosts in NO_PROXY", "no_proxy", pc.NoProxy)
		}
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

// originRoots are the CAs trusted for origins, download hosts, module
// source hosts and the shared store: base (nil: the system roots) with the
// certificates of the --origin-ca-file files added. Without files it is
// base. A file that cannot be read or holds no certificate is an error;
// so is one that is no regular file, is larger than maxCertFileBytes, or
// that users other than its owner may write (internal/inputfile.ReadTrusted).
func originRoots(files []string, base *x509.CertPool, logger *slog.Logger) (*x509.CertPool, error) {
	if len(files) == 0 {
		return base, nil
	}
	var pool *x509.CertPool
	switch {
	case base != nil:
		pool = base.Clone()
	default:
		sys, err := x509.SystemCertPool()
		if err != nil {
			logger.Warn("system TLS roots unavailable; origins are trusted with origin_ca_file's CAs only", "error", err)
			sys = x509.NewCertPool()
		}
		pool = sys
	}
	var subjects []string
	for _, f := range files {
		data, err := inputfile.ReadTrusted(f, maxCertFileBytes)
		if err != nil {
			return nil, fmt.Errorf("--origin-ca-file: %w", err)
		}
		n := 0
		for rest := data; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if block.Type != "CERTIFICATE" {
				continue
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("--origin-ca-file %s: certificate %d: %w", f, n+1, err)
			}
			pool.AddCert(cert)
			subjects = append(subjects, cert.Subject.String())
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("--origin-ca-file %s: no PEM certificate in it", f)
		}
	}
	logger.Info("origin TLS trusts the system roots and the CAs of origin_ca_file", "files", files, "cas", subjects)
	return pool, nil
}

// trustHint is what a certificate failure's message tells the operator.
func trustHint(files []string) string {
	const setting = "origin_ca_file (--origin-ca-file, TFMIRROR_ORIGIN_CA_FILE)"
	if len(files) == 0 {
		return "tfmirror trusts the system roots only: behind a TLS-inspecting egress proxy, add the proxy's CA with " + setting
	}
	return fmt.Sprintf("tfmirror trusts the system roots and the CAs of %s (%s): add the CA that signs this certificate there", setting, strings.Join(files, ", "))
}

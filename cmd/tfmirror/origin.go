package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"

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
	route, err := originProxy(cfg.UpstreamProxy, o.lookupEnv)
	if err != nil {
		return err
	}
	switch route.source {
	case "upstream_proxy":
		logger.Info("origin traffic goes through the upstream proxy", "proxy", route.shown)
	case "HTTPS_PROXY":
		logger.Info("origin traffic goes through HTTPS_PROXY, except hosts in NO_PROXY", "proxy", route.shown, "no_proxy", route.noProxy)
	}
	if note := route.unreadNote(); note != "" {
		logger.Warn(note)
	}
	dc.Proxy = func(r *http.Request) (*url.URL, error) { return route.proxyFor(r.URL) }
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

// originRoots are the CAs trusted for origins, download hosts, module
// source hosts and the shared store: base (nil: the system roots) with the
// certificates of the --origin-ca-file files added. Without files it is
// base. A file that cannot be read or holds no certificate is an error;
// so is one that is no regular file, is larger than maxCertFileBytes, or
// that users other than its owner may write (internal/inputfile.ReadTrusted).
func originRoots(files []string, base *x509.CertPool, logger *slog.Logger) (*x509.CertPool, error) {
	_, pool, err := startOriginCAs(files, base, logger, nil) // read once, not followed
	return pool, err
}

// readCAFiles reads the --origin-ca-file files, as every file of the
// operator's that others must not write is read.
func readCAFiles(files []string) ([][]byte, error) {
	contents := make([][]byte, 0, len(files))
	for _, f := range files {
		data, err := inputfile.ReadTrusted(f, maxCertFileBytes)
		if err != nil {
			return nil, fmt.Errorf("--origin-ca-file: %w", err)
		}
		contents = append(contents, data)
	}
	return contents, nil
}

// rootsWith is base (nil: the system roots) with the certificates of the
// PEM contents of files added, and those certificates' subjects. A file
// without a certificate, or with one that does not parse, is an error.
func rootsWith(base *x509.CertPool, files []string, contents [][]byte, logger *slog.Logger) (*x509.CertPool, []string, error) {
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
	for i, f := range files {
		n, blocks := 0, 0
		for rest := contents[i]; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			blocks++
			if block.Type != "CERTIFICATE" {
				continue
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, nil, fmt.Errorf("--origin-ca-file %s: certificate %d: %w", f, n+1, err)
			}
			pool.AddCert(cert)
			subjects = append(subjects, cert.Subject.String())
			n++
		}
		if n == 0 {
			return nil, nil, fmt.Errorf("--origin-ca-file %s: no PEM certificate in it", f)
		}
		// A block begun and not ended (a file read half written, its last
		// certificate cut short) is skipped by pem.Decode: the file is
		// refused rather than trusted without the CAs it was cut before.
		if begun := bytes.Count(contents[i], []byte("-----BEGIN ")); begun > blocks {
			return nil, nil, fmt.Errorf("--origin-ca-file %s: %d PEM blocks begun, %d whole: a block cut short or damaged (a file half written?)", f, begun, blocks)
		}
	}
	return pool, subjects, nil
}

// trustHint is what a certificate failure's message tells the operator.
func trustHint(files []string) string {
	const setting = "origin_ca_file (--origin-ca-file, TFMIRROR_ORIGIN_CA_FILE)"
	if len(files) == 0 {
		return "tfmirror trusts the system roots only: behind a TLS-inspecting egress proxy, add the proxy's CA with " + setting
	}
	return fmt.Sprintf("tfmirror trusts the system roots and the CAs of %s (%s): add the CA that signs this certificate there", setting, strings.Join(files, ", "))
}

// Package certs creates the local certificate authority and server
// certificate that tfmirror serves with when the operator configures none.
//
// It owns only the files under the directory it is given (ca.pem,
// ca-key.pem, server.pem, server-key.pem). It does not load certificates for
// serving or decide when TLS is used; cmd/tfmirror does.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File names inside the directory passed to Ensure.
const (
	CAFile        = "ca.pem"
	caKeyFile     = "ca-key.pem"
	ServerFile    = "server.pem"
	ServerKeyFile = "server-key.pem"
)

const (
	caLifetime     = 10 * 365 * 24 * time.Hour
	serverLifetime = 397 * 24 * time.Hour
	// renewBefore is how long before expiry a server certificate is replaced.
	renewBefore = 30 * 24 * time.Hour
)

// Files are the paths of the generated material.
type Files struct {
	CA      string // the CA certificate clients must trust (SSL_CERT_FILE)
	Cert    string // server certificate chain (leaf, then CA)
	Key     string // server private key
	Created bool   // whether Ensure wrote a new server certificate
}

// Ensure makes sure dir holds a CA and a server certificate valid for every
// name in hosts (DNS names or IP addresses) for at least 30 more days, and
// returns their paths. Existing files are reused, so clients that trusted
// the CA once keep trusting the mirror across restarts. The CA is generated
// only when absent; the server certificate is re-issued from it when it is
// missing, expiring, or does not cover hosts.
func Ensure(dir string, hosts []string, now time.Time) (Files, error) {
	if len(hosts) == 0 {
		return Files{}, errors.New("certs: at least one host name is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("certs: %w", err)
	}
	f := Files{
		CA:   filepath.Join(dir, CAFile),
		Cert: filepath.Join(dir, ServerFile),
		Key:  filepath.Join(dir, ServerKeyFile),
	}
	caCert, caKey, err := loadOrCreateCA(dir, now)
	if err != nil {
		return Files{}, err
	}
	if serverUsable(f.Cert, f.Key, caCert, hosts, now) {
		return f, nil
	}
	if err := issueServer(f, caCert, caKey, hosts, now); err != nil {
		return Files{}, err
	}
	f.Created = true
	return f, nil
}

func loadOrCreateCA(dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, caKeyFile)
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err == nil {
		cert, perr := x509.ParseCertificate(pair.Certificate[0])
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if perr == nil && ok && cert.IsCA && now.Before(cert.NotAfter.Add(-renewBefore)) {
			return cert, key, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("certs: reading CA in %s: %w", dir, err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "tfmirror local CA " + host, Organization: []string{"tfmirror"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: creating CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, err
	}
	if err := writeAtomic(certPath, pemBlock("CERTIFICATE", der), 0o644); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// RenewAt is when Ensure stops reusing the server certificate leaf and
// issues it again: renewBefore its expiry. A process that serves leaf
// longer calls Ensure again then, so that it never serves one expired.
func RenewAt(leaf *x509.Certificate) time.Time { return leaf.NotAfter.Add(-renewBefore) }

func serverUsable(certPath, keyPath string, ca *x509.Certificate, hosts []string, now time.Time) bool {
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || leaf.CheckSignatureFrom(ca) != nil {
		return false
	}
	if now.After(RenewAt(leaf)) {
		return false
	}
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

func issueServer(f Files, ca *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0], Organization: []string{"tfmirror"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(serverLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if !slices.Contains(tmpl.DNSNames, h) {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("certs: issuing server certificate: %w", err)
	}
	if err := writeKey(f.Key, key); err != nil {
		return err
	}
	chain := append(pemBlock("CERTIFICATE", der), pemBlock("CERTIFICATE", ca.Raw)...)
	return writeAtomic(f.Cert, chain, 0o644)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return writeAtomic(path, pemBlock("PRIVATE KEY", der), 0o600)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeAtomic writes data to a temporary file beside path and renames it
// into place, so a crash never leaves a truncated certificate or key.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("certs: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		// crypto/rand does not fail on supported platforms.
		panic(err)
	}
	return n
}

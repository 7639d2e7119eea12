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
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/dirsync"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
)

// File names inside the directory passed to Ensure.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	ServerFile    = "server.pem"
	ServerKeyFile = "server-key.pem"
)

const (
	caLifetime     = 10 * 365 * 24 * time.Hour
	serverLifetime = 397 * 24 * time.Hour
	// renewBefore is how long before expiry a server certificate is replaced.
	renewBefore = 30 * 24 * time.Hour
	// The most read of a generated certificate (a chain of two) and of a
	// key; tfmirror writes a few hundred bytes of each.
	maxCertBytes = 64 << 10
	maxKeyBytes  = 64 << 10
)

// Files are the paths of the generated material.
type Files struct {
	CA      string // the CA certificate clients must trust (SSL_CERT_FILE)
	Cert    string // server certificate chain (leaf, then CA)
	Key     string // server private key
	Created bool   // whether Ensure wrote a new server certificate
	// CAReplaced says Ensure replaced the CA that was there (weeks
	// before it expired, or one not of the kind it makes) by a new one
	// that clients must trust instead.
	CAReplaced bool
}

// In names the files Ensure keeps in dir, whether they exist or not.
func In(dir string) Files {
	return Files{
		CA:   filepath.Join(dir, CAFile),
		Cert: filepath.Join(dir, ServerFile),
		Key:  filepath.Join(dir, ServerKeyFile),
	}
}

// Ensure makes sure dir holds a CA and a server certificate valid for every
// name in hosts (DNS names or IP addresses) for at least 30 more days, and
// returns their paths. Existing files are reused, so clients that trusted
// the CA once keep trusting the mirror across restarts. The CA is made
// when absent, and made again (Files.CAReplaced) when it expires within
// 30 days or is not valid yet at now; the server certificate is issued
// again from it when it is missing, expiring, not valid yet at now, or
// does not cover hosts.
func Ensure(dir string, hosts []string, now time.Time) (Files, error) {
	if len(hosts) == 0 {
		return Files{}, errors.New("certs: at least one host name is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("certs: %w", err)
	}
	removeLeftovers(dir)
	f := In(dir)
	caCert, caKey, replaced, err := loadOrCreateCA(dir, now)
	if err != nil {
		return Files{}, err
	}
	f.CAReplaced = replaced
	if serverUsable(f.Cert, f.Key, caCert, hosts, now) {
		return f, nil
	}
	if err := issueServer(f, caCert, caKey, hosts, now); err != nil {
		return Files{}, err
	}
	f.Created = true
	return f, nil
}

// loadOrCreateCA reads the CA of dir, or makes one when dir has none
// (neither of its files); replaced says a CA there was replaced by a new
// one: weeks before it expired, or not valid yet (also when the key
// there is the new one of a replacement cut short, beside the old
// certificate: caDue), or not a CA of the kind it makes. One of its two
// files without the other is refused, naming the one missing and what to do: a new CA would
// replace the one clients trust. The key, a secret the mirror trusts, is
// read as the operator's keys are (inputfile.ReadTrusted): one that users
// other than its owner may write is refused, and kept.
func loadOrCreateCA(dir string, now time.Time) (ca *x509.Certificate, key *ecdsa.PrivateKey, replaced bool, err error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	certPEM, cerr := inputfile.ReadOperator(certPath, maxCertBytes)
	keyPEM, kerr := inputfile.ReadTrusted(keyPath, maxKeyBytes)
	certMissing, keyMissing := errors.Is(cerr, fs.ErrNotExist), errors.Is(kerr, fs.ErrNotExist)
	switch {
	case certMissing && keyMissing:
	case certMissing && !exists(filepath.Join(dir, ServerFile)):
		// The first CA's making cut short between its key and its
		// certificate (writeAll renames the key first): nothing was
		// issued from it, no client trusts it. Made again.
	case certMissing || keyMissing:
		there, missing := certPath, keyPath
		if certMissing {
			there, missing = keyPath, certPath
		}
		return nil, nil, false, fmt.Errorf("certs: %s is missing while %s of the same generated CA is there: "+
			"a new CA would not be trusted by the clients that trust the one there; restore %s (from a backup of the data directory), "+
			"or remove the other to have a new CA made, which clients must then trust instead: rm %s", missing, there, missing, there)
	case cerr != nil:
		return nil, nil, false, fmt.Errorf("certs: reading CA: %w", cerr)
	case kerr != nil:
		return nil, nil, false, fmt.Errorf("certs: reading CA: %w", kerr)
	default:
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			if !caDue(certPEM, now) {
				return nil, nil, false, fmt.Errorf("certs: reading CA in %s: %w", dir, err)
			}
			// The replacement of a CA due for it, cut short between its
			// key and its certificate: made again.
			replaced = true
			break
		}
		cert, perr := x509.ParseCertificate(pair.Certificate[0])
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if perr == nil && ok && cert.IsCA && !caDueAt(cert, now) {
			return cert, key, false, nil
		}
		replaced = true
	}

	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, false, fmt.Errorf("certs: %w", err)
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
		return nil, nil, false, fmt.Errorf("certs: creating CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, false, fmt.Errorf("certs: %w", err)
	}
	kf, err := keyFile(keyPath, key)
	if err != nil {
		return nil, nil, false, err
	}
	if err := writeAll(kf, file{certPath, pemBlock("CERTIFICATE", der), 0o644}); err != nil {
		return nil, nil, false, err
	}
	return cert, key, replaced, nil
}

// caDue says certPEM is a CA's certificate due for replacement at now
// (caDueAt): one whose key does not match it is the
// replacement of a process killed between the new key and the new
// certificate (writeAll renames the key first), which Ensure makes again
// rather than refuse every start for.
func caDue(certPEM []byte, now time.Time) bool {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	return err == nil && cert.IsCA && caDueAt(cert, now)
}

// caDueAt says the CA cert is to be replaced at now: it ends within
// renewBefore, or it is not valid yet (made while the clock was ahead),
// and every client refuses what it issues until it is.
func caDueAt(cert *x509.Certificate, now time.Time) bool {
	return !now.Before(cert.NotAfter.Add(-renewBefore)) || now.Before(cert.NotBefore)
}

// RenewAt is when Ensure stops reusing the server certificate leaf and
// issues it again: renewBefore its expiry. A process that serves leaf
// longer calls Ensure again then, so that it never serves one expired.
func RenewAt(leaf *x509.Certificate) time.Time { return leaf.NotAfter.Add(-renewBefore) }

// serverUsable says the server certificate at certPath, with its key at
// keyPath, is one ca issued for hosts, valid at now (not one issued
// while the clock was ahead, which clients refuse until then) and not
// due for renewal at now.
// Its files are read as the CA's are: one that is no regular file (a
// FIFO) is not usable, and is replaced, never waited on.
func serverUsable(certPath, keyPath string, ca *x509.Certificate, hosts []string, now time.Time) bool {
	certPEM, err := inputfile.ReadOperator(certPath, maxCertBytes)
	if err != nil {
		return false
	}
	keyPEM, err := inputfile.ReadOperator(keyPath, maxKeyBytes)
	if err != nil {
		return false
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || leaf.CheckSignatureFrom(ca) != nil {
		return false
	}
	if now.After(RenewAt(leaf)) || now.Before(leaf.NotBefore) {
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
		NotAfter:     serverNotAfter(ca, now),
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
	kf, err := keyFile(f.Key, key)
	if err != nil {
		return err
	}
	chain := append(pemBlock("CERTIFICATE", der), pemBlock("CERTIFICATE", ca.Raw)...)
	return writeAll(kf, file{f.Cert, chain, 0o644})
}

// serverNotAfter is when a server certificate ca issues at now expires:
// serverLifetime later, or when ca does if that is sooner, so that it is
// renewed (RenewAt), from a CA made anew then, before the chain it is
// served with has expired.
func serverNotAfter(ca *x509.Certificate, now time.Time) time.Time {
	if end := now.Add(serverLifetime); end.Before(ca.NotAfter) {
		return end
	}
	return ca.NotAfter
}

// keyFile is the file of key at path, mode 0600.
func keyFile(path string, key *ecdsa.PrivateKey) (file, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return file{}, fmt.Errorf("certs: %w", err)
	}
	return file{path, pemBlock("PRIVATE KEY", der), 0o600}, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// WriteError is Ensure's error when it could not write a file it made
// (a full disk, a file system mounted read-only): what was there before
// is as it was, and may still be used.
type WriteError struct {
	Path string
	Err  error
}

func (e *WriteError) Error() string { return fmt.Sprintf("certs: writing %s: %v", e.Path, e.Err) }

func (e *WriteError) Unwrap() error { return e.Err }

// file is a file writeAll writes: its path, content and mode.
type file struct {
	path string
	data []byte
	mode os.FileMode
}

// createTemp is os.CreateTemp; a var, for tests.
var createTemp = os.CreateTemp

// writeAll writes files (a key and its certificate) together: each to a
// temporary file beside its path first, synced, and only once all are
// written are they renamed into place, in order, and their directories
// synced. A crash never leaves a truncated certificate or key, a write
// that fails (a full disk) leaves none of them, never a new key beside
// the certificate of the one it replaced, and a power loss once it
// returned does not take back the CA clients were told to trust.
func writeAll(files ...file) error {
	tmps := make([]string, 0, len(files))
	defer func() {
		for _, t := range tmps {
			os.Remove(t)
		}
	}()
	for _, f := range files {
		tmp, err := stage(f)
		if tmp != "" {
			tmps = append(tmps, tmp)
		}
		if err != nil {
			return err
		}
	}
	var dirs []string
	for i, f := range files {
		if err := os.Rename(tmps[i], f.path); err != nil {
			return &WriteError{f.path, err}
		}
		if d := filepath.Dir(f.path); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if err := syncDir(d); err != nil {
			return &WriteError{d, err}
		}
	}
	return nil
}

// syncDir makes the names in the directory dir durable; a var, for tests.
var syncDir = dirsync.Sync

// leftoverAge is the age from which removeLeftovers takes a temporary
// file of stage's for one a killed process left: writing one takes
// milliseconds, and another process may be writing it now.
const leftoverAge = time.Minute

// removeLeftovers removes from dir the temporary files of stage's that a
// process killed while it wrote left there (a copy of a private key in
// some), once leftoverAge old; what it cannot remove stays.
func removeLeftovers(dir string) {
	for _, name := range []string{CAFile, CAKeyFile, ServerFile, ServerKeyFile} {
		found, _ := filepath.Glob(filepath.Join(dir, ".tmp-"+name+"-*"))
		for _, path := range found {
			if info, err := os.Lstat(path); err == nil && info.Mode().IsRegular() && time.Since(info.ModTime()) >= leftoverAge {
				os.Remove(path)
			}
		}
	}
}

// stage writes f to a temporary file beside its path, and returns its
// name (also when writing it failed, for the caller to remove).
func stage(f file) (string, error) {
	tmp, err := createTemp(filepath.Dir(f.path), ".tmp-"+filepath.Base(f.path)+"-*")
	if err != nil {
		return "", &WriteError{f.path, err}
	}
	err = tmp.Chmod(f.mode)
	if err == nil {
		_, err = tmp.Write(f.data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return tmp.Name(), &WriteError{f.path, err}
	}
	return tmp.Name(), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		// crypto/rand does not fail on supported platforms.
		panic(err)
	}
	return n
}

// exists says whether something is at path.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

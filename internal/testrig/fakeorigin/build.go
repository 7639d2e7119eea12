package fakeorigin

import (
	"archive/zip"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"time"
)

// fixedTime keeps generated archives byte-for-byte deterministic.
func fixedTime() time.Time { return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) }

// buildArchive makes the provider zip for k, size bytes long when size is
// at least the archive's minimal size: the executable Terraform looks for
// plus a stored entry of pseudo-random padding seeded by k.
func buildArchive(k akey, size int64) []byte {
	minimal := zipArchive(k, -1)
	if size <= int64(len(minimal)) {
		return minimal
	}
	// The zip overhead does not depend on the padding's length (below the
	// zip64 limit), so one empty-padding build gives the exact length.
	pad := size - int64(len(zipArchive(k, 0)))
	if pad <= 0 {
		return minimal
	}
	return zipArchive(k, pad)
}

// zipArchive writes the zip with pad bytes of padding; pad < 0 leaves the
// padding entry out.
func zipArchive(k akey, pad int64) []byte {
	var buf bytes.Buffer
	buf.Grow(int(max(pad, 0)) + 1024)
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: fmt.Sprintf("terraform-provider-%s_v%s", k.typ, k.version), Method: zip.Store, Modified: fixedTime()}
	h.SetMode(0o755)
	f, err := zw.CreateHeader(h)
	if err != nil {
		panic(err) // writing to memory cannot fail
	}
	fmt.Fprintf(f, "#!/bin/sh\n# fake provider %s/%s %s %s\necho 'fake provider %s/%s v%s %s'\nexit 1\n",
		k.ns, k.typ, k.version, k.platform, k.ns, k.typ, k.version, k.platform)
	if pad >= 0 {
		ph := &zip.FileHeader{Name: "padding.bin", Method: zip.Store, Modified: fixedTime()}
		ph.SetMode(0o644)
		pf, err := zw.CreateHeader(ph)
		if err != nil {
			panic(err)
		}
		seed := sha256.Sum256([]byte(k.ns + "/" + k.typ + "/" + k.version + "/" + k.platform))
		rng := mrand.NewChaCha8(seed)
		chunk := make([]byte, min(pad, 64<<10))
		for pad > 0 {
			n := min(pad, int64(len(chunk)))
			rng.Read(chunk[:n]) //nolint:errcheck // never fails
			pf.Write(chunk[:n]) //nolint:errcheck // memory
			pad -= n
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// newTLS makes a throwaway ECDSA CA and a server certificate for loopback
// plus hostnames.
func newTLS(hostnames []string) (tls.Certificate, []byte, *x509.CertPool, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "fakeorigin test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "fakeorigin"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	for _, h := range hostnames {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}, caPEM, pool, nil
}

func tlsConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

package fakeorigin

// The stand-in's OpenTofu cosign files, shaped as cosign sign-blob writes
// them with its default --b64: the .sig the base64 of an ECDSA signature
// of the SHA256SUMS (DER), the .pem the base64 of a PEM certificate, each
// without a line break. Nobody verifies them: the key and its
// certificate are the stand-in's own.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"time"
)

// cosignSigner signs as the stand-in's cosign: a key, its certificate.
type cosignSigner struct {
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCosignSigner() (*cosignSigner, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "stand-in OpenTofu release signer"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &cosignSigner{key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// CosignFile is what the stand-in answers for an OpenTofu version's
// cosign file (PRODUCT_VERSION_SHA256SUMS.sig or .pem), the same bytes
// every time: SetCosignFile's, or the real-shaped file.
func (r *Releases) CosignFile(product, version, file string) []byte {
	return r.cosignFile(file, r.Sums("opentofu", product, version))
}

// SetCosignFile answers the cosign file named file with body (an error
// page a proxy in front of the origin answers 200, say); nil answers the
// real-shaped file again.
func (r *Releases) SetCosignFile(file string, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if body == nil {
		delete(r.cosignBody, file)
		return
	}
	r.cosignBody[file] = body
}

// cosignFile is the cosign file named file of the SHA256SUMS doc.
func (r *Releases) cosignFile(file string, doc []byte) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if body, ok := r.cosignBody[file]; ok {
		return body
	}
	if strings.HasSuffix(file, ".pem") {
		return []byte(base64.StdEncoding.EncodeToString(r.cosign.certPEM))
	}
	// ECDSA signatures differ each time: the first is kept, by the
	// SHA256SUMS it signs.
	sum := sha256.Sum256(doc)
	k := file + "/" + string(sum[:])
	if sig, ok := r.cosignSig[k]; ok {
		return sig
	}
	der, err := ecdsa.SignASN1(rand.Reader, r.cosign.key, sum[:])
	if err != nil {
		panic(err)
	}
	sig := []byte(base64.StdEncoding.EncodeToString(der))
	r.cosignSig[k] = sig
	return sig
}

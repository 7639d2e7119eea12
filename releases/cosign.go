package releases

import (
	"bytes"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/tfmirror/tfmirror/v2/mirror/failure"
)

// maxCosignDocument bounds OpenTofu's cosign signature and certificate:
// cosign writes a signature of about a hundred bytes and a certificate
// of about two kilobytes (base64 of its PEM); 64 KiB leaves room for a
// certificate chain and refuses a page that is none of them.
const maxCosignDocument = 64 << 10

// checkCosignFile refuses a cosign file (name, passed through) whose
// bytes are not what cosign sign-blob writes with its default --b64, as
// OpenTofu's releases are signed, or what cosign verify-blob reads: the
// .sig standard base64 of a signature (or the signature's own DER, as
// --b64=false writes it), the .pem a PEM of certificates or its standard
// base64. An error page of a proxy in front of the origin, or any other
// page answered 200, is refused so, not kept as the release's file. The
// signature is not verified (docs/cli-releases.md).
func checkCosignFile(name string, data []byte) error {
	if err := cosignShape(name, data); err != nil {
		// The origin's answer is at fault, not the mirror: a bad gateway,
		// as a malformed version list is.
		return &failure.OriginError{Kind: failure.OriginFailed,
			Err: fmt.Errorf("the origin's %s is not a cosign file: %w", name, err)}
	}
	return nil
}

// cosignShape says why data, a cosign file name, is not one as
// checkCosignFile describes, whoever gave it (an origin, a bundle).
func cosignShape(name string, data []byte) error {
	switch {
	case len(data) > maxCosignDocument:
		return fmt.Errorf("larger than the %d bytes such a file may be", maxCosignDocument)
	case strings.HasSuffix(name, ".sig"):
		return checkCosignSignature(data)
	case strings.HasSuffix(name, ".pem"):
		return checkCosignCertificate(data)
	default:
		return errors.New("not a cosign file")
	}
}

// checkCosignSignature: base64 (line breaks ignored, as cosign's
// decoder ignores them) of a signature, or a DER signature.
func checkCosignSignature(data []byte) error {
	if sig, err := base64.StdEncoding.DecodeString(string(data)); err == nil {
		if len(sig) == 0 {
			return errors.New("an empty signature")
		}
		return nil
	}
	if isDERSequence(data) {
		return nil
	}
	return fmt.Errorf("neither the base64 of a signature nor a DER signature (%s)", pageOf(data))
}

// isDERSequence says whether data is one ASN.1 SEQUENCE in DER, nothing
// after it (an ECDSA signature is).
func isDERSequence(data []byte) bool {
	var v asn1.RawValue
	rest, err := asn1.Unmarshal(data, &v)
	return err == nil && len(rest) == 0 && v.Class == asn1.ClassUniversal && v.Tag == asn1.TagSequence && v.IsCompound
}

// checkCosignCertificate: one or more PEM CERTIFICATE blocks that parse
// as X.509 certificates, nothing else around them but space; or the
// standard base64 of them.
func checkCosignCertificate(data []byte) error {
	what := data
	if dec, err := base64.StdEncoding.DecodeString(string(data)); err == nil {
		what = dec
	}
	rest := bytes.TrimSpace(what)
	if len(rest) == 0 {
		return errors.New("empty")
	}
	for n := 1; len(rest) > 0; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		switch {
		case block == nil:
			return fmt.Errorf("not a PEM certificate, nor the base64 of one (%s)", pageOf(data))
		case block.Type != "CERTIFICATE":
			return fmt.Errorf("PEM block %d is a %q, not a CERTIFICATE", n, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("PEM block %d is not an X.509 certificate: %w", n, err)
		}
		rest = bytes.TrimSpace(rest)
	}
	return nil
}

// heldCosignFile is the cosign file name held under key, if one is that
// passes checkCosignFile: one kept before the mirror checked them, and
// refused now, is asked of the origin again (and replaced), not served.
func heldCosignFile(store Store, key, name string) ([]byte, bool) {
	var data []byte
	if _, err := store.GetMeta(key, &data); err != nil || checkCosignFile(name, data) != nil {
		return nil, false
	}
	return data, true
}

// pageOf says what data looks like, for an error (its bytes are not
// quoted: the origin's answer is no message of the mirror's).
func pageOf(data []byte) string {
	trimmed := bytes.TrimSpace(data)
	if bytes.HasPrefix(trimmed, []byte("<")) {
		return fmt.Sprintf("%d bytes, an HTML or XML page", len(data))
	}
	return fmt.Sprintf("%d bytes", len(data))
}

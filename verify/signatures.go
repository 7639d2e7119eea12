package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// signaturePackets returns the binary packets of a detached signature,
// binary or ASCII-armored ("-----BEGIN PGP SIGNATURE-----"), once walked
// (walkPackets): one holding a secret key packet is refused
// (ErrKeyRefused) before go-crypto parses that packet, whose parsing
// checks the key's parameters at any size.
func signaturePackets(signature []byte) ([]byte, error) {
	body := signature
	if bytes.HasPrefix(bytes.TrimSpace(signature), []byte("-----BEGIN PGP SIGNATURE-----")) {
		block, err := armor.Decode(bytes.NewReader(signature))
		if err != nil {
			return nil, err
		}
		if block.Type != openpgp.SignatureType {
			return nil, fmt.Errorf("armored block is %q, not a signature", block.Type)
		}
		if body, err = io.ReadAll(block.Body); err != nil {
			return nil, err
		}
	}
	if err := walkPackets(body, false, func(packet.Packet) error { return nil }); err != nil {
		return nil, err
	}
	return body, nil
}

// SignatureIssuer returns the key ID (16 upper-case hex digits, or the
// last 8 bytes of the issuer's fingerprint) of the key that made the
// detached signature (binary or ASCII-armored), as its first signature
// packet says, without verifying it; "" when it does not parse or is
// refused as signaturePackets refuses it.
func SignatureIssuer(signature []byte) string {
	body, err := signaturePackets(signature)
	if err != nil {
		return ""
	}
	issuer := ""
	first := errors.New("the first signature packet")
	walkPackets(body, false, func(p packet.Packet) error { //nolint:errcheck // walked once already; first ends it
		s, ok := p.(*packet.Signature)
		if !ok {
			return nil
		}
		switch {
		case s.IssuerKeyId != nil:
			issuer = fmt.Sprintf("%016X", *s.IssuerKeyId)
		case len(s.IssuerFingerprint) >= 8:
			issuer = fmt.Sprintf("%X", s.IssuerFingerprint[len(s.IssuerFingerprint)-8:])
		}
		return first
	})
	return issuer
}

// VerifyDetached verifies the detached signature (binary or
// ASCII-armored) over document with keyring, and returns the key ID of
// the key that made it (as SignatureIssuer gives it) and the signature.
// A signature refused as signaturePackets refuses it fails unverified.
func VerifyDetached(keyring openpgp.EntityList, document, signature []byte) (string, *packet.Signature, error) {
	body, err := signaturePackets(signature)
	if err != nil {
		return "", nil, err
	}
	s, _, err := openpgp.VerifyDetachedSignature(keyring, bytes.NewReader(document), bytes.NewReader(body), nil)
	if err != nil {
		return "", nil, err
	}
	if s.IssuerKeyId != nil {
		return fmt.Sprintf("%016X", *s.IssuerKeyId), s, nil
	}
	return SignatureIssuer(body), s, nil
}

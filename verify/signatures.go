package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
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
	return issuerOf(s, body), s, nil
}

// issuerOf is the key ID of the key that made s, the signature verified
// of the packets body, as SignatureIssuer gives it.
func issuerOf(s *packet.Signature, body []byte) string {
	if s.IssuerKeyId != nil {
		return fmt.Sprintf("%016X", *s.IssuerKeyId)
	}
	return SignatureIssuer(body)
}

// VerifyStoredDetached is VerifyDetached for a signature that may have
// outlived its key (see SignatureTime): one whose key, or a signature of
// it, has expired since is judged again at validFrom, the earliest time
// it could have been verified, when that is not later than now. Any other
// failure stands. VerifyDetached judges the key's validity now.
func VerifyStoredDetached(keyring openpgp.EntityList, document, signature []byte) (string, *packet.Signature, error) {
	body, err := signaturePackets(signature)
	if err != nil {
		return "", nil, err
	}
	s, signer, err := openpgp.VerifyDetachedSignature(keyring, bytes.NewReader(document), bytes.NewReader(body), nil)
	if err != nil {
		// go-crypto returns the signature and its signer when the
		// signature verified over document and only the key's validity
		// now failed.
		if s == nil || signer == nil || !errors.Is(err, pgperrors.ErrKeyExpired) && !errors.Is(err, pgperrors.ErrSignatureExpired) {
			return "", nil, err
		}
		at := validFrom(s, signer)
		if at.After(time.Now()) {
			return "", nil, err
		}
		if s, _, err = openpgp.VerifyDetachedSignature(keyring, bytes.NewReader(document), bytes.NewReader(body),
			&packet.Config{Time: func() time.Time { return at }}); err != nil {
			return "", nil, err
		}
	}
	return issuerOf(s, body), s, nil
}

// validFrom is the earliest time at which sig, the key of signer that
// made it and the self-signatures go-crypto judges that key by (the
// primary key's, and a subkey's binding and its cross-signature) all
// existed.
func validFrom(sig *packet.Signature, signer *openpgp.Entity) time.Time {
	at := sig.CreationTime
	later := func(s *packet.Signature) {
		if s != nil && s.CreationTime.After(at) {
			at = s.CreationTime
		}
	}
	if signer.PrimaryKey.CreationTime.After(at) {
		at = signer.PrimaryKey.CreationTime
	}
	self, _ := signer.PrimarySelfSignature()
	later(self)
	if sig.IssuerKeyId == nil || *sig.IssuerKeyId == signer.PrimaryKey.KeyId {
		return at
	}
	for _, sub := range signer.Subkeys {
		if sub.PublicKey == nil || sub.PublicKey.KeyId != *sig.IssuerKeyId {
			continue
		}
		if sub.PublicKey.CreationTime.After(at) {
			at = sub.PublicKey.CreationTime
		}
		later(sub.Sig)
		if sub.Sig != nil {
			later(sub.Sig.EmbeddedSignature)
		}
	}
	return at
}

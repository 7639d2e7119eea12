package airgap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/verify"
)

// This file holds the keys an import trusts, in their two roles, and the
// exporting mirror's own key: the operator's keys are the only anchor of
// an import; nothing in a bundle vouches for itself.

// maxKeyFileBytes bounds a key file.
const maxKeyFileBytes = 1 << 20

// operatorKeys are the limits a key file of the operator's is read
// within (verify.ReadKeys): its bytes, whatever its number of keys, and a
// private key block when private; the bounds on each key's algorithm and
// size hold as for any key.
func operatorKeys(private bool) verify.KeyLimits {
	return verify.KeyLimits{MaxKeys: math.MaxInt, MaxBytes: maxKeyFileBytes, Private: private}
}

// ExportKey is an exporting mirror's OpenPGP key, whose signature over
// the manifest of an export vouches for every file it lists.
type ExportKey struct {
	entity *openpgp.Entity
}

// GenerateExportKey makes a new export key (Ed25519) named name.
func GenerateExportKey(name string) (*ExportKey, error) {
	e, err := openpgp.NewEntity(name, "tfmirror export key", "", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		return nil, err
	}
	return &ExportKey{entity: e}, nil
}

// ReadExportKey reads an export key: one ASCII-armored OpenPGP private
// key, not protected by a passphrase, that can sign, of an algorithm and
// size verify.ReadKeys reads.
func ReadExportKey(r io.Reader) (*ExportKey, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxKeyFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeyFileBytes {
		return nil, fmt.Errorf("larger than %d bytes: not a key", maxKeyFileBytes)
	}
	el, err := verify.ReadKeys(data, operatorKeys(true))
	if err != nil {
		return nil, fmt.Errorf("not an armored OpenPGP private key: %w", err)
	}
	if len(el) != 1 {
		return nil, fmt.Errorf("holds %d keys, want one", len(el))
	}
	e := el[0]
	if e.PrivateKey == nil {
		return nil, errors.New("holds a public key only; the export key is the private key")
	}
	if e.PrivateKey.Encrypted {
		return nil, errors.New("the private key is protected by a passphrase, which tfmirror cannot give")
	}
	k := &ExportKey{entity: e}
	if _, err := k.sign([]byte("test")); err != nil {
		return nil, fmt.Errorf("the key cannot sign: %w", err)
	}
	return k, nil
}

// WritePrivate writes k as an ASCII-armored private key, which
// ReadExportKey reads.
func (k *ExportKey) WritePrivate(w io.Writer) error {
	aw, err := armor.Encode(w, openpgp.PrivateKeyType, nil)
	if err != nil {
		return err
	}
	if err := k.entity.SerializePrivateWithoutSigning(aw, nil); err != nil {
		return err
	}
	if err := aw.Close(); err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n")
	return err
}

// WritePublic writes k's public key, ASCII-armored: what an importing
// mirror trusts (--trusted-export-keys).
func (k *ExportKey) WritePublic(w io.Writer) error {
	aw, err := armor.Encode(w, openpgp.PublicKeyType, nil)
	if err != nil {
		return err
	}
	if err := k.entity.Serialize(aw); err != nil {
		return err
	}
	if err := aw.Close(); err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n")
	return err
}

// Fingerprint is k's fingerprint in uppercase hex; its last 16 digits are
// the key ID that messages name.
func (k *ExportKey) Fingerprint() string {
	return fmt.Sprintf("%X", k.entity.PrimaryKey.Fingerprint)
}

// sign returns an ASCII-armored detached signature over data.
func (k *ExportKey) sign(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&buf, k.entity, bytes.NewReader(data), nil); err != nil {
		id := keyID(k.entity.PrimaryKey.KeyId)
		if at, ok := keyExpiry(k.keyring(), id); ok && at.Before(time.Now()) {
			return nil, fmt.Errorf("the export key %s expired on %s: give one with its expiry extended, or another (--export-key, whose public key the importing side must then trust) (%w)",
				id, at.UTC().Format(time.DateOnly), err)
		}
		return nil, err
	}
	buf.WriteString("\n")
	return buf.Bytes(), nil
}

// keyring is k's public key alone.
func (k *ExportKey) keyring() openpgp.EntityList { return openpgp.EntityList{k.entity} }

// ReadPublicKeys reads every ASCII-armored OpenPGP public key block of r
// (one file may hold several, one after the other), each through
// verify.ReadKeys: a key of an algorithm or size it refuses is refused
// here too. A private key block is refused: what is trusted is a public
// key, and a private key has no business being carried to the importing
// side.
func ReadPublicKeys(r io.Reader) (openpgp.EntityList, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxKeyFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeyFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxKeyFileBytes)
	}
	var out openpgp.EntityList
	rest := string(data)
	for {
		i := strings.Index(rest, "-----BEGIN PGP ")
		if i < 0 {
			break
		}
		rest = rest[i:]
		header, _, _ := strings.Cut(rest, "\n")
		if strings.Contains(header, "PRIVATE KEY") {
			return nil, errors.New("holds a private key; give the public key (tfmirror export-key prints it)")
		}
		if !strings.HasPrefix(header, "-----BEGIN PGP PUBLIC KEY BLOCK-----") {
			return nil, fmt.Errorf("holds a %s, want public key blocks", strings.Trim(header, "-\r "))
		}
		end := strings.Index(rest, "-----END PGP PUBLIC KEY BLOCK-----")
		if end < 0 {
			return nil, errors.New("a public key block has no end")
		}
		end += len("-----END PGP PUBLIC KEY BLOCK-----")
		el, err := verify.ReadKeys([]byte(rest[:end]), operatorKeys(false))
		if err != nil {
			return nil, fmt.Errorf("reading a public key block: %w", err)
		}
		out = append(out, el...)
		rest = rest[end:]
	}
	if len(out) == 0 {
		return nil, errors.New("holds no ASCII-armored OpenPGP public key")
	}
	return out, nil
}

// Namespace is a provider namespace on its host, HOST/NAMESPACE: the
// scope of a publisher key.
type Namespace struct {
	Host svchost.Hostname
	Name string
}

func (n Namespace) String() string { return n.Host.ForDisplay() + "/" + n.Name }

// ParseNamespace parses HOST/NAMESPACE.
func ParseNamespace(s string) (Namespace, error) {
	host, name, ok := strings.Cut(s, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return Namespace{}, fmt.Errorf("namespace %q: want HOST/NAMESPACE", s)
	}
	h, err := svchost.ForComparison(host)
	if err != nil {
		return Namespace{}, fmt.Errorf("namespace %q: %w", s, err)
	}
	return Namespace{Host: h, Name: strings.ToLower(name)}, nil
}

// Trust is what an import trusts, the operator's keys in two roles:
// mirror keys vouch for the files an exporting mirror listed in the
// manifest it signed, publisher keys for the SHA256SUMS documents of
// their namespace's providers. Neither vouches for anything else.
type Trust struct {
	// ExportKeys are exporting mirrors' public keys (--trusted-export-keys).
	ExportKeys openpgp.EntityList
	// PublisherKeys are keys pinned per namespace
	// (--trusted-publisher-keys).
	PublisherKeys map[Namespace]openpgp.EntityList
}

// keyID is the 16-digit key ID of an OpenPGP key ID.
func keyID(id uint64) string { return fmt.Sprintf("%016X", id) }

// signatureIssuer returns the key ID of the key that made the detached
// signature sig (binary or armored), as the signature says, or "" when it
// does not parse (verify.SignatureIssuer).
func signatureIssuer(sig []byte) string { return verify.SignatureIssuer(sig) }

// checkDetached verifies the detached signature sig (binary or armored)
// over data with keyring, and returns the key ID of the key that made it
// (verify.VerifyDetached).
func checkDetached(keyring openpgp.EntityList, data, sig []byte) (string, error) {
	id, _, err := verify.VerifyDetached(keyring, data, sig)
	return id, err
}

// hasKeyID reports whether keyring holds a key (primary or subkey) of ID id.
func hasKeyID(keyring openpgp.EntityList, id string) bool {
	for _, e := range keyring {
		if keyID(e.PrimaryKey.KeyId) == id {
			return true
		}
		for _, sk := range e.Subkeys {
			if keyID(sk.PublicKey.KeyId) == id {
				return true
			}
		}
	}
	return false
}

// signatureRefusal says why a signature by the key of ID id, one of
// keyring's, did not verify (err, checkDetached's): the key expired
// (naming when), the signature expired, or the key is revoked, which a
// renewed or another key mends, not another bundle; otherwise what it
// signs was changed after it was signed.
func signatureRefusal(keyring openpgp.EntityList, id string, err error) string {
	switch {
	case errors.Is(err, pgperrors.ErrKeyExpired):
		when := "has expired"
		if at, ok := keyExpiry(keyring, id); ok {
			when = "expired on " + at.UTC().Format(time.DateOnly)
		}
		return fmt.Sprintf("the key %s, and a signature is judged by its key's validity now: give the key with its expiry extended, or sign again with a valid one (%v)", when, err)
	case errors.Is(err, pgperrors.ErrSignatureExpired):
		return fmt.Sprintf("the signature has expired (%v)", err)
	case errors.Is(err, pgperrors.ErrKeyRevoked):
		return fmt.Sprintf("the key is revoked (%v)", err)
	}
	return fmt.Sprintf("it was changed after it was signed (%v)", err)
}

// keyExpiry returns when the key of ID id in keyring (a primary key or a
// subkey) expires, by its self-signatures (a subkey's, no later than its
// primary key's), and false when it does not.
func keyExpiry(keyring openpgp.EntityList, id string) (time.Time, bool) {
	expiry := func(pk *packet.PublicKey, sig *packet.Signature) (time.Time, bool) {
		if pk == nil || sig == nil || sig.KeyLifetimeSecs == nil || *sig.KeyLifetimeSecs == 0 {
			return time.Time{}, false
		}
		return pk.CreationTime.Add(time.Duration(*sig.KeyLifetimeSecs) * time.Second), true
	}
	for _, e := range keyring {
		self, _ := e.PrimarySelfSignature()
		primary, primaryOK := expiry(e.PrimaryKey, self)
		if keyID(e.PrimaryKey.KeyId) == id {
			return primary, primaryOK
		}
		for _, sk := range e.Subkeys {
			if sk.PublicKey == nil || keyID(sk.PublicKey.KeyId) != id {
				continue
			}
			at, ok := expiry(sk.PublicKey, sk.Sig)
			if primaryOK && (!ok || primary.Before(at)) {
				at, ok = primary, true
			}
			return at, ok
		}
	}
	return time.Time{}, false
}

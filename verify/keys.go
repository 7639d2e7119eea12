package verify

import (
	"bytes"
	"crypto/dsa" //nolint:staticcheck // DSA keys are read to refuse the costly ones; OpenPGP still allows them
	"crypto/rsa"
	"errors"
	"fmt"
	"io"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/elgamal"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// The bounds on the OpenPGP keys read (ReadKeys). Reading a key verifies
// its self-signatures, and a signature is checked with its signer's key:
// the work is that of the key's algorithm at the key's size, which
// OpenPGP lets be 65,535 bits, and go-crypto reads any size. A DSA key of
// 16,384 bits took over a second of CPU to read, one of 65,535 bits over
// a minute per exponentiation, with no context to cut it short; a package
// answer names its keys itself, before anything vouches for them.
//
// The bounds are the sizes GnuPG makes keys at, the keys publishers hold:
// HashiCorp's, OpenTofu's and most providers' keys are RSA 4096, some
// Ed25519; HCP Terraform's registry takes RSA and DSA keys, so DSA is
// read too, at the sizes GnuPG makes (and FIPS 186 defines). What a key's
// reading verifies is bounded by its count (MaxSelfSignatures), not by
// the key's bytes: a key exported by GnuPG carries the certifications
// others made of it, which go-crypto parses and keeps but does not verify,
// and a well-connected key's are hundreds (an RSA 3072 key with 560
// Ed25519 certifications is 131 KiB armored).
//
// At worst, one answer's keys cost some 0.5 s of CPU to read:
// MaxKeySignatures self-signatures in all, of DSA 3072 keys, each
// verification some 1.8 ms (without that bound, MaxSigningKeys keys of
// MaxSelfSignatures each, 1,024 verifications, 1.9 s); of RSA 8192 keys,
// whose signatures are 1 KiB each, some 0.4 s. A key stuffed with certifications by another
// key to MaxArmoredKeyBytes costs some 50 ms and 36 MB allocated, one
// whose user ID fills it, self-certified MaxSelfSignatures times, some
// 140 ms, hashing it (BenchmarkReadCostliestKeys, on 2 cores of an AMD
// EPYC).
const (
	// MaxSigningKeys is the most keys (primary keys, in all) read of one
	// package answer's signing keys, and of one armored block by default:
	// an answer names one or a few.
	MaxSigningKeys = 16
	// MaxSelfSignatures is the most signatures reading one key may
	// verify, 64: the self-signatures go-crypto verifies as it reads a
	// key (its user IDs' self-certifications, each subkey's binding and
	// revocation signatures and a signing subkey's cross-signature, the
	// key's revocations; weighKeys counts them as go-crypto's ReadEntity
	// finds them). A publisher's key has a few (HashiCorp's, with three
	// subkeys, 6); one renewed yearly for years, with several user IDs
	// and subkeys, a few dozen.
	MaxSelfSignatures = 64
	// MaxKeySignatures is the most signatures reading one package
	// answer's signing keys may verify in all (and reading one armored
	// block, by default), 256: four keys at MaxSelfSignatures, some 0.5 s
	// of CPU at the costliest sizes. An answer names one key or a few of
	// a few self-signatures each (HashiCorp's key 6).
	MaxKeySignatures = 256
	// MaxArmoredKeyBytes is the most bytes of one ASCII-armored key block
	// read by default, 1 MiB: a bound on memory, not on work (that is
	// MaxSelfSignatures'), that a publisher's key with the
	// certifications others made of it comes well within (HashiCorp's,
	// RSA 4096 with three subkeys, is 7.5 KiB without them).
	MaxArmoredKeyBytes = 1 << 20
	// MaxSigningKeyBytes is the most bytes of one package answer's
	// armored signing keys in all, 1 MiB: a few publishers' keys, one of
	// them well-connected, within the bound on memory of one block.
	MaxSigningKeyBytes = 1 << 20
	// MaxRSABits is the largest RSA modulus read: 8192 bits, the largest
	// GnuPG makes (with --enable-large-rsa). go-crypto refuses a public
	// exponent of more than 24 bits itself, so that a verification is a
	// few multiplications of the modulus's size.
	MaxRSABits = 8192
	// MaxDSABits is the largest DSA prime P read: 3072 bits, the largest
	// GnuPG makes and FIPS 186 defines.
	MaxDSABits = 3072
	// MaxDSAQBits is the largest DSA subgroup order Q read: 256 bits, as
	// FIPS 186 defines it for every size of P. A verification's
	// exponents are as long as Q, and Go's dsa.Verify does not bound it.
	MaxDSAQBits = 256
	// MaxElGamalBits is the largest ElGamal prime P read: 4096 bits, the
	// largest GnuPG makes (an encryption subkey of old DSA keys; it never
	// verifies anything, but nothing needs it larger).
	MaxElGamalBits = 4096
)

// KeyLimits bound what ReadKeys reads of one ASCII-armored key block.
// The bounds on each key's algorithm and size, and on the signatures its
// reading verifies, apply whatever the limits.
type KeyLimits struct {
	// MaxKeys bounds the primary keys of the block. Default (0):
	// MaxSigningKeys.
	MaxKeys int
	// MaxBytes bounds the armored block's bytes. Default (0):
	// MaxArmoredKeyBytes.
	MaxBytes int
	// MaxSignatures bounds the self-signatures reading the block's keys
	// verifies, in all (each key's are bounded by MaxSelfSignatures
	// whatever this is). Default (0): MaxKeySignatures.
	MaxSignatures int
	// Private lets a private key block, and secret key packets, be
	// read: only for the operator's own key files (the export key).
	// go-crypto checks a secret key's parameters as it parses it,
	// exponentiations of the key's size, before its size can be refused
	// here; a private key block or a secret key packet is otherwise
	// refused.
	Private bool
}

func (l KeyLimits) withDefaults() KeyLimits {
	if l.MaxKeys <= 0 {
		l.MaxKeys = MaxSigningKeys
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = MaxArmoredKeyBytes
	}
	if l.MaxSignatures <= 0 {
		l.MaxSignatures = MaxKeySignatures
	}
	return l
}

// ErrKeyRefused matches, with errors.Is, every refusal of ReadKeys for
// the block's size or a key's algorithm or size (not for a block that
// does not parse).
var ErrKeyRefused = errors.New("OpenPGP key refused")

// keyRefused is a refusal of ReadKeys: what was refused and why.
type keyRefused struct{ msg string }

func (e *keyRefused) Error() string        { return e.msg }
func (e *keyRefused) Is(target error) bool { return target == ErrKeyRefused }

func refuse(format string, args ...any) error {
	return &keyRefused{msg: fmt.Sprintf(format, args...)}
}

// ReadKeys reads the keys of one ASCII-armored OpenPGP key block, as
// go-crypto's openpgp.ReadArmoredKeyRing reads it, once the block is
// known to cost no more than the bounds allow: the block is refused,
// before any signature in it is verified, when it is longer than
// lim.MaxBytes, holds more than lim.MaxKeys primary keys, holds a key or
// subkey of an algorithm or size beyond the bounds above (MaxRSABits,
// MaxDSABits and MaxDSAQBits, MaxElGamalBits; elliptic curve and the
// other fixed-size algorithms go-crypto knows are read at any size it
// reads them), holds a key whose reading would verify more than
// MaxSelfSignatures signatures, or keys whose reading would verify more
// than lim.MaxSignatures in all (certifications by other keys, which are
// not verified, are read however many), or is a private key block or
// holds a secret key packet without lim.Private. Such a refusal matches ErrKeyRefused and says
// what was refused and the bound; a block that is not an armored key, or
// whose keys go-crypto cannot read, fails with go-crypto's error. Every
// reading of OpenPGP keys in the module goes through ReadKeys
// (internal/layercheck holds it to that).
func ReadKeys(armored []byte, lim KeyLimits) (openpgp.EntityList, error) {
	el, _, err := readKeys(armored, lim.withDefaults())
	return el, err
}

// weight is what weighing a block found: the primary keys it saw, read
// or not, and the self-signatures reading them verifies, counted as far
// as the weighing went.
type weight struct {
	primaries, signatures int
}

// readKeys is ReadKeys with lim's defaults set; it also returns the
// block's weight.
func readKeys(armored []byte, lim KeyLimits) (openpgp.EntityList, weight, error) {
	if len(armored) > lim.MaxBytes {
		return nil, weight{}, refuse("the armored key block is %d bytes, more than the %d read of one", len(armored), lim.MaxBytes)
	}
	block, err := armor.Decode(bytes.NewReader(armored))
	if errors.Is(err, io.EOF) {
		return nil, weight{}, pgperrors.InvalidArgumentError("no armored data found")
	}
	if err != nil {
		return nil, weight{}, err
	}
	switch {
	case block.Type == openpgp.PublicKeyType:
	case block.Type == openpgp.PrivateKeyType && lim.Private:
	case block.Type == openpgp.PrivateKeyType:
		return nil, weight{}, refuse("a private key block: only public keys are read here")
	default:
		return nil, weight{}, pgperrors.InvalidArgumentError("expected public key block, got: " + block.Type)
	}
	// The decoded packets are shorter than their armor, and read twice:
	// once here to weigh them, once by go-crypto.
	body, err := io.ReadAll(block.Body)
	if err != nil {
		return nil, weight{}, err
	}
	w, err := weighKeys(body, lim)
	if err != nil {
		return nil, w, err
	}
	el, err := openpgp.ReadKeyRing(bytes.NewReader(body))
	return el, w, err
}

// weighKeys walks the packets of body as go-crypto's key reading walks
// them, parsing them without verifying any signature, and refuses the
// first key beyond the bounds, the primary key past lim.MaxKeys, the key
// whose reading would verify more than MaxSelfSignatures signatures, or
// the one that takes the block's past lim.MaxSignatures (selfSignatures).
// A secret key packet is refused unless lim.Private (walkPackets).
func weighKeys(body []byte, lim KeyLimits) (weight, error) {
	primaries := 0
	self := selfSignatures{max: lim.MaxSignatures}
	err := walkPackets(body, lim.Private, func(p packet.Packet) error {
		var pub *packet.PublicKey
		switch k := p.(type) {
		case *packet.PublicKey:
			pub = k
		case *packet.PrivateKey:
			pub = &k.PublicKey
		default:
			return self.see(p, nil)
		}
		if !pub.IsSubkey {
			primaries++
			if primaries > lim.MaxKeys {
				return refuse("more than %d keys: no more are read", lim.MaxKeys)
			}
		}
		if err := checkKeyCost(pub); err != nil {
			return err
		}
		return self.see(p, pub)
	})
	return weight{primaries: primaries, signatures: self.total}, err
}

// selfSignatures counts, per primary key, the signatures go-crypto's
// ReadEntity (openpgp/keys.go) verifies as it reads a key, fed the
// packets as its packet.Reader hands them over: after a user ID, each
// certification whose issuer (key ID, or fingerprint when the
// signature states one) is the primary key's; after a subkey, each
// binding or revocation signature, and a binding signature's embedded
// cross-signature when it binds a signing subkey; after the primary key
// or another packet, each key revocation, and for a v6 key its one
// direct-key self-signature. Certifications by other keys are parsed
// and kept, not verified, and not counted. When a signature fails,
// go-crypto verifies no more of the key: the count is what a key whose
// every signature verifies costs.
type selfSignatures struct {
	primary *packet.PublicKey // nil before the first primary key
	after   int               // what the signatures follow: one of the below
	count   int               // signatures verified of primary
	direct  bool              // a v6 key's direct-key self-signature is counted
	total   int               // signatures verified of every key so far
	max     int               // the most total may be
}

// certification says whether t is a type of signature ReadEntity takes
// after a user ID (another fails the key before anything is verified).
func certification(t packet.SignatureType) bool {
	switch t {
	case packet.SigTypeGenericCert, packet.SigTypePersonaCert, packet.SigTypeCasualCert,
		packet.SigTypePositiveCert, packet.SigTypeCertificationRevocation:
		return true
	}
	return false
}

// What a signature packet follows, which says what go-crypto does with it.
const (
	afterKey    = iota // the primary key, or a packet ReadEntity steps over
	afterUserID        // a user ID: its certifications
	afterSubkey        // a subkey: its binding and revocation signatures
)

// see counts what packet p costs the reading of the key it belongs to,
// and refuses that key past MaxSelfSignatures; pub is p's key when p is
// a key or subkey.
func (s *selfSignatures) see(p packet.Packet, pub *packet.PublicKey) error {
	switch k := p.(type) {
	case *packet.Marker:
		return nil // packet.Reader steps over it
	case *packet.UserId:
		s.after = afterUserID
		return nil
	case *packet.Signature:
		return s.signature(k)
	}
	switch {
	case pub != nil && !pub.IsSubkey:
		*s = selfSignatures{primary: pub, total: s.total, max: s.max}
	case pub != nil:
		s.after = afterSubkey
	default:
		s.after = afterKey
	}
	return nil
}

// signature counts what verifying sig costs, in its place after the
// last packet seen.
func (s *selfSignatures) signature(sig *packet.Signature) error {
	if s.primary == nil {
		return nil // ReadEntity fails at once, and looks for the next key
	}
	n := 0
	switch s.after {
	case afterUserID:
		if certification(sig.SigType) && sig.CheckKeyIdOrFingerprint(s.primary) {
			n = 1
		}
	case afterSubkey:
		if sig.SigType == packet.SigTypeSubkeyBinding || sig.SigType == packet.SigTypeSubkeyRevocation {
			n = 1
			if sig.FlagSign && sig.EmbeddedSignature != nil {
				n = 2
			}
		}
	case afterKey:
		switch {
		case sig.SigType == packet.SigTypeKeyRevocation:
			n = 1
		case sig.SigType == packet.SigTypeDirectSignature && s.primary.Version == 6 && !s.direct &&
			sig.CheckKeyIdOrFingerprint(s.primary):
			n, s.direct = 1, true
		}
	}
	if s.count += n; s.count > MaxSelfSignatures {
		return refuse("key %s has more than %d self-signatures, which reading it verifies: no more are verified of one key",
			s.primary.KeyIdString(), MaxSelfSignatures)
	}
	if s.total += n; s.total > s.max {
		return refuse("the keys have more than %d self-signatures in all, which reading them verifies: no more are verified", s.max)
	}
	return nil
}

// Packet tags (RFC 9580, section 5).
const (
	tagSecretKey    = 5
	tagSecretSubkey = 7
)

// walkPackets hands visit each packet of body as go-crypto parses them
// one after the other (packet.Read from where the last one left off, as
// its packet.Reader does, so that every packet go-crypto's readings of
// body would parse is seen, whatever the lengths the packets state). A
// packet go-crypto's readings step over (of an unknown or unsupported
// kind, or malformed) is stepped over; any other error is returned. A
// secret key packet is refused before go-crypto parses it, unless
// secret: parsing one checks its key's parameters, exponentiations as
// large as the key, before anything can weigh it.
func walkPackets(body []byte, secret bool, visit func(packet.Packet) error) error {
	r := bytes.NewReader(body)
	for r.Len() > 0 {
		if tag := packetTag(body[len(body)-r.Len()]); !secret && (tag == tagSecretKey || tag == tagSecretSubkey) {
			return refuse("a secret key packet: only public keys are read here")
		}
		p, err := packet.Read(r)
		switch err.(type) {
		case nil:
		case pgperrors.StructuralError, pgperrors.UnsupportedError, pgperrors.UnknownPacketTypeError:
			continue // consumed, as go-crypto's readings step over it
		default:
			return err
		}
		if err := visit(p); err != nil {
			return err
		}
	}
	return nil
}

// packetTag is the tag of the packet whose header starts with b, in
// either format (0 when b starts none).
func packetTag(b byte) int {
	switch {
	case b&0x80 == 0:
		return 0
	case b&0x40 != 0:
		return int(b & 0x3f)
	default:
		return int(b&0x3f) >> 2
	}
}

// checkKeyCost refuses a key whose algorithm or size makes verifying with
// it costlier than the bounds allow.
func checkKeyCost(pub *packet.PublicKey) error {
	what := "key"
	if pub.IsSubkey {
		what = "subkey"
	}
	tooLarge := func(alg string, name string, bits, max int) error {
		return refuse("%s %s is a %s key whose %s is %d bits, more than the %d read: too large to verify with in bounded time",
			what, pub.KeyIdString(), alg, name, bits, max)
	}
	switch k := pub.PublicKey.(type) {
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n > MaxRSABits {
			return tooLarge("RSA", "modulus", n, MaxRSABits)
		}
	case *dsa.PublicKey:
		if n := k.P.BitLen(); n > MaxDSABits {
			return tooLarge("DSA", "prime P", n, MaxDSABits)
		}
		if n := k.Q.BitLen(); n > MaxDSAQBits {
			return tooLarge("DSA", "subgroup order Q", n, MaxDSAQBits)
		}
	case *elgamal.PublicKey:
		if n := k.P.BitLen(); n > MaxElGamalBits {
			return tooLarge("ElGamal", "prime P", n, MaxElGamalBits)
		}
	default:
		if !fixedSize(pub.PubKeyAlgo) {
			return refuse("%s %s is of public key algorithm %d, which is not read here", what, pub.KeyIdString(), pub.PubKeyAlgo)
		}
	}
	return nil
}

// fixedSize says whether algo is one whose keys come in sizes fixed by
// their curve or parameter set, all of them cheap to verify with:
// go-crypto parses only the curves and sets it knows.
func fixedSize(algo packet.PublicKeyAlgorithm) bool {
	switch algo {
	case packet.PubKeyAlgoECDSA, packet.PubKeyAlgoECDH, packet.PubKeyAlgoEdDSA,
		packet.PubKeyAlgoX25519, packet.PubKeyAlgoX448, packet.PubKeyAlgoEd25519, packet.PubKeyAlgoEd448,
		packet.PubKeyAlgoMlkem768X25519, packet.PubKeyAlgoMlkem1024X448,
		packet.PubKeyAlgoMldsa65Ed25519, packet.PubKeyAlgoMldsa87Ed448,
		packet.PubKeyAlgoSlhdsaShake128s, packet.PubKeyAlgoSlhdsaShake128f, packet.PubKeyAlgoSlhdsaShake256s:
		return true
	}
	return false
}

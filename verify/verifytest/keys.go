package verifytest

import (
	"bytes"
	"crypto/dsa" //nolint:staticcheck // hostile DSA keys are what the tests refuse
	"crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"math/big"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/elgamal"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// keyTime is the creation time of every key and signature made here.
var keyTime = time.Unix(1_600_000_000, 0)

// randomOdd is a random odd number of exactly bits bits.
func randomOdd(bits int) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), uint(bits)))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n.SetBit(n.SetBit(n, bits-1, 1), 0, 1)
}

// DSAKey is a DSA public key packet whose P is pBits and Q qBits long:
// numbers of those sizes, not a group (no prime is searched for, so any
// size is made at once), which is all a reader weighing keys sees.
func DSAKey(pBits, qBits int) *packet.PublicKey {
	p, q := randomOdd(pBits), randomOdd(qBits)
	for new(big.Int).Mod(q, big.NewInt(7)).Sign() == 0 {
		q.Add(q, big.NewInt(2)) // the made-up signature's s (7) has an inverse mod q
	}
	g := new(big.Int).Rsh(q, 1)
	return packet.NewDSAPublicKey(keyTime, &dsa.PublicKey{Parameters: dsa.Parameters{P: p, Q: q, G: g}, Y: g})
}

// DSASecretKey is an unencrypted DSA secret key packet whose Q is bits
// long and divides P-1 (P is 8 bits longer): parsing it, go-crypto
// checks that Q is prime and G's order, exponentiations of Q's and P's
// size, before anything can weigh it (some 0.2 s at 8192 bits, hours at
// 65,535).
func DSASecretKey(bits int) *packet.PrivateKey {
	q := randomOdd(bits)
	for hasSmallFactor(q) { // which would end go-crypto's check at once
		q = randomOdd(bits)
	}
	p := new(big.Int).Add(new(big.Int).Lsh(q, 8), big.NewInt(1))
	return packet.NewDSAPrivateKey(keyTime, &dsa.PrivateKey{
		PublicKey: dsa.PublicKey{Parameters: dsa.Parameters{P: p, Q: q, G: big.NewInt(3)}, Y: big.NewInt(9)},
		X:         big.NewInt(5),
	})
}

// hasSmallFactor says whether n has a prime factor under 100.
func hasSmallFactor(n *big.Int) bool {
	for _, p := range []int64{3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97} {
		if new(big.Int).Mod(n, big.NewInt(p)).Sign() == 0 {
			return true
		}
	}
	return false
}

// RSAKey is an RSA public key packet whose modulus is bits long (a
// random odd number, not a product of two primes), exponent 65537.
func RSAKey(bits int) *packet.PublicKey {
	return packet.NewRSAPublicKey(keyTime, &rsa.PublicKey{N: randomOdd(bits), E: 65537})
}

// ElGamalKey is an ElGamal public key packet whose P is bits long.
func ElGamalKey(bits int) *packet.PublicKey {
	p := randomOdd(bits)
	return packet.NewElGamalPublicKey(keyTime, &elgamal.PublicKey{P: p, G: big.NewInt(2), Y: big.NewInt(4)})
}

// HostileDSAKey is the ASCII-armored DSA key whose P and Q are both bits
// long, with one user ID and a made-up self-signature: reading it as
// go-crypto reads keys verifies that signature, exponentiations as large
// as the key (over a second of CPU at 16,384 bits, minutes at 65,535).
func HostileDSAKey(bits int) string {
	return ArmoredKey(DSAKey(bits, bits))
}

// ArmoredKey is the ASCII-armored public key block of primary (a DSA or
// RSA key) with one user ID and a made-up self-certification, then each
// subkey with a made-up binding signature: packets as a publisher's key
// has them, whose signatures do not verify (r = 5, s = 7 for DSA, 5 for
// RSA). A reader that weighs keys before it verifies anything refuses
// them by their size alone.
func ArmoredKey(primary *packet.PublicKey, subkeys ...*packet.PublicKey) string {
	return SelfSignedKey(primary, 1, subkeys...)
}

// SelfSignedKey is ArmoredKey with n made-up self-certifications of the
// user ID where ArmoredKey has one: a key whose reading, as go-crypto
// reads keys, would verify n signatures and those of the subkeys, were
// they valid.
func SelfSignedKey(primary *packet.PublicKey, n int, subkeys ...*packet.PublicKey) string {
	var key bytes.Buffer
	primary.Serialize(&key) //nolint:errcheck // memory
	uid := packet.NewUserId("hostile", "", "hostile@example.com")
	uid.Serialize(&key) //nolint:errcheck // memory
	for range n {
		key.Write(madeUpSignature(primary, 0x13))
	}
	for _, sub := range subkeys {
		sub.IsSubkey = true
		sub.Serialize(&key) //nolint:errcheck // memory
		key.Write(madeUpSignature(primary, 0x18))
	}
	var out bytes.Buffer
	w, _ := armor.Encode(&out, "PGP PUBLIC KEY BLOCK", nil) // memory: no error
	w.Write(key.Bytes())                                    //nolint:errcheck // memory
	w.Close()                                               //nolint:errcheck // memory
	return out.String()
}

// madeUpSignature is a v4 signature packet of sigType by signer, over
// SHA-256, with a creation time and the issuer's key ID, whose values do
// not verify.
func madeUpSignature(signer *packet.PublicKey, sigType byte) []byte {
	sig := []byte{4, sigType, byte(signer.PubKeyAlgo), 8}
	hashed := []byte{5, 2}
	hashed = binary.BigEndian.AppendUint32(hashed, uint32(keyTime.Unix()))
	sig = binary.BigEndian.AppendUint16(sig, uint16(len(hashed)))
	sig = append(sig, hashed...)
	unhashed := []byte{9, 16}
	unhashed = binary.BigEndian.AppendUint64(unhashed, signer.KeyId)
	sig = binary.BigEndian.AppendUint16(sig, uint16(len(unhashed)))
	sig = append(sig, unhashed...)
	sig = append(sig, 0, 0) // the hash's first two bytes
	sig = append(sig, mpi(big.NewInt(5))...)
	if signer.PubKeyAlgo == packet.PubKeyAlgoDSA {
		sig = append(sig, mpi(big.NewInt(7))...)
	}
	return newPacket(2, sig)
}

// mpi is n as an OpenPGP multiprecision integer.
func mpi(n *big.Int) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(n.BitLen())), n.Bytes()...)
}

// newPacket is a new-format packet of tag with a five-octet length.
func newPacket(tag byte, body []byte) []byte {
	out := binary.BigEndian.AppendUint32([]byte{0xc0 | tag, 0xff}, uint32(len(body)))
	return append(out, body...)
}

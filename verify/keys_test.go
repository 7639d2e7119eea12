package verify

import (
	"bytes"
	"crypto"
	"crypto/dsa" //nolint:staticcheck // the costliest keys read are DSA 3072
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// privateKeyBlock is the ASCII-armored private key block of a new key.
func privateKeyBlock(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := newKey(t, "private").SerializePrivate(w, nil); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return buf.String()
}

// TestReadKeysRefusesCostlyKeys: a key block whose reading would cost
// more than the bounds allow is refused before any signature in it is
// verified, saying what was refused and the bound. Each of these keys
// is read in milliseconds by the bounds, where go-crypto alone spends
// seconds to hours on the first ones (BenchmarkReadHostileKey): a refusal
// that says the key is too large comes from weighing it, not from
// verifying its signatures.
func TestReadKeysRefusesCostlyKeys(t *testing.T) {
	edKey := armored(t, newKey(t, "small"))
	private := privateKeyBlock(t)
	many := func(n int) string {
		var body bytes.Buffer
		for range n {
			el, err := openpgp.ReadArmoredKeyRing(strings.NewReader(edKey))
			if err != nil {
				t.Fatal(err)
			}
			el[0].Serialize(&body)
		}
		var buf bytes.Buffer
		w, _ := armor.Encode(&buf, openpgp.PublicKeyType, nil)
		w.Write(body.Bytes())
		w.Close()
		return buf.String()
	}
	tests := []struct {
		name  string
		key   string
		lim   KeyLimits
		words []string // the refusal says each
	}{
		{name: "DSA of 16,384 bits", key: verifytest.HostileDSAKey(16384),
			words: []string{"DSA key", "prime P is 16384 bits", "more than the 3072 read", "too large"}},
		{name: "DSA of 65,535 bits", key: verifytest.HostileDSAKey(65535),
			words: []string{"prime P is 65535 bits", "more than the 3072 read"}},
		{name: "DSA whose P is one bit too long", key: verifytest.ArmoredKey(verifytest.DSAKey(3073, 256)),
			words: []string{"prime P is 3073 bits"}},
		{name: "DSA of 2048 bits whose Q is as long", key: verifytest.ArmoredKey(verifytest.DSAKey(2048, 2048)),
			words: []string{"subgroup order Q is 2048 bits", "more than the 256 read"}},
		{name: "RSA of 16,384 bits", key: verifytest.ArmoredKey(verifytest.RSAKey(16384)),
			words: []string{"RSA key", "modulus is 16384 bits", "more than the 8192 read"}},
		{name: "DSA subkey of 16,384 bits under a small key", key: verifytest.ArmoredKey(verifytest.DSAKey(1024, 160), verifytest.DSAKey(16384, 16384)),
			words: []string{"subkey", "prime P is 16384 bits"}},
		{name: "ElGamal subkey of 8192 bits", key: verifytest.ArmoredKey(verifytest.DSAKey(1024, 160), verifytest.ElGamalKey(8192)),
			words: []string{"subkey", "ElGamal key", "prime P is 8192 bits", "more than the 4096 read"}},
		{name: "more keys than the block may hold", key: many(MaxSigningKeys + 1),
			words: []string{"more than 16 keys"}},
		{name: "more keys than the limits say", key: many(3), lim: KeyLimits{MaxKeys: 2},
			words: []string{"more than 2 keys"}},
		{name: "a block over 1 MiB", key: edKey + strings.Repeat("\n", MaxArmoredKeyBytes),
			words: []string{"more than the 1048576 read of one"}},
		{name: "RSA 8192 with more self-signatures than a key may have", key: verifytest.SelfSignedKey(verifytest.RSAKey(8192), MaxSelfSignatures+1),
			words: []string{"more than 64 self-signatures", "no more are verified of one key"}},
		{name: "a subkey's binding signature counts with the user ID's", key: verifytest.SelfSignedKey(verifytest.DSAKey(1024, 160), MaxSelfSignatures, verifytest.DSAKey(1024, 160)),
			words: []string{"more than 64 self-signatures"}},
		{name: "a block over the limits' bytes", key: edKey, lim: KeyLimits{MaxBytes: 100},
			words: []string{"more than the 100 read of one"}},
		{name: "a private key block", key: private,
			words: []string{"private key block", "only public keys"}},
		{name: "a secret key packet in a public key block", key: func() string {
			var buf bytes.Buffer
			w, _ := armor.Encode(&buf, openpgp.PublicKeyType, nil)
			verifytest.DSASecretKey(8192).Serialize(w)
			w.Close()
			return buf.String()
		}(), words: []string{"secret key packet", "only public keys"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			el, err := ReadKeys([]byte(tc.key), tc.lim)
			if !errors.Is(err, ErrKeyRefused) {
				t.Fatalf("read %d keys, error %v: want a refusal (ErrKeyRefused)", len(el), err)
			}
			for _, w := range tc.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestReadKeysWeighsWithinTheBounds: keys at the bounds are weighed and
// handed to go-crypto's reading, which decides on them as before: the
// made-up keys of verifytest fail there, on their signatures, and are
// not refused for their size.
func TestReadKeysWeighsWithinTheBounds(t *testing.T) {
	for name, key := range map[string]string{
		"DSA 3072, Q 256":                  verifytest.ArmoredKey(verifytest.DSAKey(3072, 256)),
		"RSA 8192":                         verifytest.ArmoredKey(verifytest.RSAKey(8192)),
		"DSA 1024 with ElGamal 4096":       verifytest.ArmoredKey(verifytest.DSAKey(1024, 160), verifytest.ElGamalKey(4096)),
		"DSA 2048 with a DSA 3072 subkey":  verifytest.ArmoredKey(verifytest.DSAKey(2048, 224), verifytest.DSAKey(3072, 256)),
		"RSA 8192 with 64 self-signatures": verifytest.SelfSignedKey(verifytest.RSAKey(8192), MaxSelfSignatures),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadKeys([]byte(key), KeyLimits{})
			if errors.Is(err, ErrKeyRefused) {
				t.Fatalf("refused within the bounds: %v", err)
			}
		})
	}
	// As many keys as the block may hold are read.
	var body bytes.Buffer
	for i := range MaxSigningKeys {
		if err := newKey(t, "k"+string(rune('a'+i))).Serialize(&body); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	w, _ := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	w.Write(body.Bytes())
	w.Close()
	el, err := ReadKeys(buf.Bytes(), KeyLimits{})
	if err != nil || len(el) != MaxSigningKeys {
		t.Fatalf("read %d keys, error %v; want %d", len(el), err, MaxSigningKeys)
	}
}

// TestReadKeysCountsTheSignaturesGoCryptoVerifies: a key is weighed by
// the signatures go-crypto's reading verifies, counted as it counts them:
// a user ID's self-certification one, a signing subkey's binding
// signature two (with its cross-signature), a certification by another
// key none. A key of MaxSelfSignatures is read; one more is refused
// naming the bound, whatever the certifications by others.
func TestReadKeysCountsTheSignaturesGoCryptoVerifies(t *testing.T) {
	certifier := newKey(t, "certifier")
	// key is an Ed25519 key (its user ID's self-certification and its
	// encryption subkey's binding: 2) with signing more signing subkeys
	// and selfCerts more self-certifications, certified 10 times by
	// another key.
	key := func(signing, selfCerts int) string {
		e := newKey(t, "renewed")
		var uid string
		for name := range e.Identities {
			uid = name
		}
		for range signing {
			if err := e.AddSigningSubkey(&packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}); err != nil {
				t.Fatal(err)
			}
		}
		for range selfCerts {
			if err := e.SignIdentity(uid, e, nil); err != nil {
				t.Fatal(err)
			}
		}
		for range 10 {
			if err := e.SignIdentity(uid, certifier, nil); err != nil {
				t.Fatal(err)
			}
		}
		return armored(t, e)
	}
	for _, c := range []struct{ signing, selfCerts int }{{31, 0}, {30, 2}} {
		el, err := ReadKeys([]byte(key(c.signing, c.selfCerts)), KeyLimits{})
		if err != nil || len(el) != 1 || len(el[0].Subkeys) != c.signing+1 || len(el[0].Identities["renewed <renewed@example.test>"].Signatures) != c.selfCerts+11 {
			t.Fatalf("a key of %d self-signatures (%d signing subkeys, %d self-certifications more): read %d keys, error %v; want it with its subkeys and certifications",
				MaxSelfSignatures, c.signing, c.selfCerts, len(el), err)
		}
	}
	for name, k := range map[string]string{
		"one self-certification more": key(31, 1),
		"one signing subkey more":     key(32, 0),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadKeys([]byte(k), KeyLimits{})
			if !errors.Is(err, ErrKeyRefused) || !strings.Contains(err.Error(), "more than 64 self-signatures") {
				t.Fatalf("error %v: want a refusal naming the bound of 64 self-signatures", err)
			}
		})
	}
}

// TestSignatureVerifiesWithAWellCertifiedKey: a publisher's key exported
// with the certifications others made of it (GnuPG's --export), hundreds
// for a well-connected key, verifies its signatures: go-crypto does not
// verify those certifications, and the bounds do not weigh them. An RSA
// 3072 key with 560 is 131 KiB armored, which the bound of 64 KiB a block
// refused whole ("no usable signing key").
func TestSignatureVerifiesWithAWellCertifiedKey(t *testing.T) {
	pub, err := openpgp.NewEntity("Busy Publisher", "", "busy@example.com", &packet.Config{Algorithm: packet.PubKeyAlgoRSA, RSABits: 3072})
	if err != nil {
		t.Fatal(err)
	}
	var uid string
	for name := range pub.Identities {
		uid = name
	}
	for range 560 {
		if err := pub.SignIdentity(uid, newKey(t, "certifier"), nil); err != nil {
			t.Fatal(err)
		}
	}
	key := armored(t, pub)
	if _, err := openpgp.ReadArmoredKeyRing(strings.NewReader(key)); err != nil {
		t.Fatalf("go-crypto itself: %v", err)
	}
	doc := []byte("0000  terraform-provider-x_1.0.0_linux_amd64.zip\n")
	if _, err := SignatureTime(doc, sign(t, pub, doc), []string{key}); err != nil {
		t.Errorf("key of %d armored bytes (RSA 3072, 560 third-party certifications): %v", len(key), err)
	}
}

// TestReadKeysReadsRealKeys: publishers' keys as they come are read
// within the bounds (testdata/README.md says where each comes from):
// HashiCorp's and OpenTofu's keys shipped for the CLI releases (RSA
// 4096), HashiCorp's key of 2014 (RSA 2048), keys GnuPG made at the
// largest sizes it makes (DSA 3072 with ElGamal 4096, RSA 8192; their
// signatures verify through CheckSignature), a generated RSA 4096 key
// and an Ed25519 one, a private key block when the limits let one be
// read.
func TestReadKeysReadsRealKeys(t *testing.T) {
	files := []string{
		"../releases/keys/hashicorp.asc",
		"../releases/keys/opentofu.asc",
		"testdata/hashicorp-2014-rsa2048.asc",
		"testdata/gnupg/dsa3072-elg4096.asc",
		"testdata/gnupg/rsa8192.asc",
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			el, err := ReadKeys(data, KeyLimits{})
			if err != nil || len(el) != 1 {
				t.Fatalf("read %d keys, error %v; want 1", len(el), err)
			}
			want, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if len(el[0].Subkeys) != len(want[0].Subkeys) || len(el[0].Identities) != len(want[0].Identities) {
				t.Errorf("read %d subkeys, %d identities; go-crypto alone reads %d, %d",
					len(el[0].Subkeys), len(el[0].Identities), len(want[0].Subkeys), len(want[0].Identities))
			}
		})
	}
	t.Run("GnuPG's signatures verify", func(t *testing.T) {
		doc, err := os.ReadFile("testdata/gnupg/SHA256SUMS")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"dsa3072-elg4096", "rsa8192"} {
			key, err := os.ReadFile("testdata/gnupg/" + k + ".asc")
			if err != nil {
				t.Fatal(err)
			}
			sig, err := os.ReadFile("testdata/gnupg/" + k + ".sig")
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckSignature(doc, sig, []string{string(key)}); err != nil {
				t.Errorf("%s: %v", k, err)
			}
		}
	})
	t.Run("generated RSA 4096", func(t *testing.T) {
		e, err := openpgp.NewEntity("rsa", "", "rsa@example.test", &packet.Config{Algorithm: packet.PubKeyAlgoRSA, RSABits: 4096})
		if err != nil {
			t.Fatal(err)
		}
		doc := []byte("doc")
		if err := CheckSignature(doc, sign(t, e, doc), []string{armored(t, e)}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("generated Ed25519", func(t *testing.T) {
		e := newKey(t, "ed25519")
		doc := []byte("doc")
		if err := CheckSignature(doc, sign(t, e, doc), []string{armored(t, e)}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a private key block, when let", func(t *testing.T) {
		el, err := ReadKeys([]byte(privateKeyBlock(t)), KeyLimits{Private: true})
		if err != nil || len(el) != 1 || el[0].PrivateKey == nil {
			t.Fatalf("read %d keys, error %v; want the private key", len(el), err)
		}
	})
}

// TestSignatureRefusesCostlyKeys: through CheckSignature, a key too
// costly to read is left out as an unreadable key is: alone, the check
// fails with ReasonSignature and says why the key was refused; beside
// the signer's key, the signature still verifies. More keys than are
// read fail the check whatever they hold.
func TestSignatureRefusesCostlyKeys(t *testing.T) {
	good := newKey(t, "origin")
	doc := []byte("doc")
	sig := sign(t, good, doc)
	goodKey, hostile := armored(t, good), verifytest.HostileDSAKey(16384)

	err := CheckSignature(doc, sig, []string{hostile})
	checkReason(t, err, ReasonSignature)
	if !errors.Is(err, ErrKeyRefused) || !strings.Contains(err.Error(), "signing key 1: ") || !strings.Contains(err.Error(), "too large") {
		t.Errorf("error %q does not say the signing key was refused as too large", err)
	}
	checkReason(t, CheckSignature(doc, sig, []string{hostile, goodKey}), "")

	seventeen := make([]string, MaxSigningKeys+1)
	for i := range seventeen {
		seventeen[i] = goodKey
	}
	err = CheckSignature(doc, sig, seventeen)
	checkReason(t, err, ReasonSignature)
	if !strings.Contains(err.Error(), "signing keys are 17, more than the 16 read") {
		t.Errorf("error %q does not say how many keys were given and read", err)
	}

	// Two blocks of 9 keys each: each within the bound, not together.
	var body bytes.Buffer
	for range 9 {
		good.Serialize(&body)
	}
	var nine bytes.Buffer
	w, _ := armor.Encode(&nine, openpgp.PublicKeyType, nil)
	w.Write(body.Bytes())
	w.Close()
	err = CheckSignature(doc, sig, []string{nine.String(), nine.String()})
	checkReason(t, err, ReasonSignature)
	if !strings.Contains(err.Error(), "hold more than the 16 keys read") {
		t.Errorf("error %q does not say the keys together are too many", err)
	}
	checkReason(t, CheckSignature(doc, sig, []string{nine.String()}), "")

	// Five blocks of 240 KiB each: each within its bound, not together.
	padded := goodKey + strings.Repeat("\n", 240<<10-len(goodKey))
	err = CheckSignature(doc, sig, []string{padded, padded, padded, padded, padded})
	checkReason(t, err, ReasonSignature)
	if !strings.Contains(err.Error(), "signing keys are 1228800 bytes, more than the 1048576 read") {
		t.Errorf("error %q does not say the keys together are too large", err)
	}
	checkReason(t, CheckSignature(doc, sig, []string{padded, padded, padded, padded}), "")

	// A signature that starts with a DSA secret key of 8192 bits whose
	// parameters go-crypto would check (a modular exponentiation of their
	// size, hours at 65,535 bits) before it finds no signature there.
	var withSecret bytes.Buffer
	if err := verifytest.DSASecretKey(8192).Serialize(&withSecret); err != nil {
		t.Fatal(err)
	}
	withSecret.Write(sig)
	err = CheckSignature(doc, withSecret.Bytes(), []string{goodKey})
	checkReason(t, err, ReasonSignature)
	if !errors.Is(err, ErrKeyRefused) || !strings.Contains(err.Error(), "secret key packet") {
		t.Errorf("error %q does not say the signature's secret key packet was refused", err)
	}
}

// TestKeysBoundedBySignaturesInAll: however few self-signatures each key
// has, a block, and one answer's blocks together, verify no more than
// MaxKeySignatures in reading them: the block (or the answer) that would
// is refused, saying so, before go-crypto verifies any of them; keys
// that reach the bound exactly are read.
func TestKeysBoundedBySignaturesInAll(t *testing.T) {
	e := newKey(t, "renewed")
	within := keyBlock(t, e.PrivateKey, "renewed", MaxKeySignatures/MaxSelfSignatures, MaxSelfSignatures, 0)
	if el, err := ReadKeys([]byte(within), KeyLimits{}); err != nil || len(el) != MaxKeySignatures/MaxSelfSignatures {
		t.Fatalf("%d self-signatures in all: read %d keys, error %v", MaxKeySignatures, len(el), err)
	}
	over := keyBlock(t, e.PrivateKey, "renewed", 5, 52, 0) // 260
	_, err := ReadKeys([]byte(over), KeyLimits{})
	if !errors.Is(err, ErrKeyRefused) || !strings.Contains(err.Error(), "more than 256 self-signatures in all") {
		t.Fatalf("a block of 260 self-signatures: error %v, want a refusal naming the bound in all", err)
	}
	if _, err := ReadKeys([]byte(over), KeyLimits{MaxSignatures: 260}); err != nil {
		t.Fatalf("a block of 260 self-signatures, 260 allowed: %v", err)
	}

	// One answer: each block within the bound, not together.
	doc := []byte("doc")
	sig := sign(t, e, doc)
	sixty := keyBlock(t, e.PrivateKey, "renewed", 1, 60, 0)
	err = CheckSignature(doc, sig, []string{sixty, sixty, sixty, sixty, sixty}) // 300
	checkReason(t, err, ReasonSignature)
	if !strings.Contains(err.Error(), "have more than the 256 self-signatures verified in all") {
		t.Errorf("error %q does not say the keys together verify too many self-signatures", err)
	}
	// Four such blocks (240) and the signer's own key: within the bound,
	// and the signature verifies.
	checkReason(t, CheckSignature(doc, sig, []string{sixty, sixty, sixty, sixty, armored(t, e)}), "")
}

// BenchmarkReadHostileKey prints what reading a hostile DSA key of
// 16,384 bits costs with the bounds (a refusal) and, with -bench
// 'ReadHostileKey/unbounded', with go-crypto alone (over a second each).
func BenchmarkReadHostileKey(b *testing.B) {
	key := []byte(verifytest.HostileDSAKey(16384))
	b.Run("bounded", func(b *testing.B) {
		for b.Loop() {
			if _, err := ReadKeys(key, KeyLimits{}); !errors.Is(err, ErrKeyRefused) {
				b.Fatal(err)
			}
		}
	})
	b.Run("unbounded", func(b *testing.B) {
		for b.Loop() {
			openpgp.ReadArmoredKeyRing(bytes.NewReader(key))
		}
	})
}

// BenchmarkReadCostliestKeys prints what reading the costliest keys the
// bounds let through costs, one answer's worth a loop: as many keys as an
// answer may hold of the algorithms costliest to verify with, each with
// MaxSelfSignatures valid self-signatures (RSA 8192: as many keys as
// MaxSigningKeyBytes holds, its signatures being 1 KiB each, and DSA
// 3072, each as many as MaxKeySignatures lets be read in all); a key with certifications by another key to
// MaxArmoredKeyBytes; a key whose user ID fills MaxArmoredKeyBytes, self-
// certified MaxSelfSignatures times. Copies of one signature cost
// go-crypto what as many signatures do. Making the RSA 8192 key takes
// some 20 s; run with -bench ReadCostliestKeys -benchtime 5x.
func BenchmarkReadCostliestKeys(b *testing.B) {
	now := time.Unix(1_600_000_000, 0)
	cases := []struct {
		name string
		key  func() (blocks []string, verified int)
	}{
		{"RSA 8192, 64 self-signatures a key, 256 in all", func() ([]string, int) {
			rk, err := rsa.GenerateKey(rand.Reader, 8192)
			if err != nil {
				b.Fatal(err)
			}
			block := keyBlock(b, packet.NewRSAPrivateKey(now, rk), "rsa", 1, MaxSelfSignatures, 0)
			var blocks []string
			for (len(blocks)+1)*len(block) <= MaxSigningKeyBytes && (len(blocks)+1)*MaxSelfSignatures <= MaxKeySignatures {
				blocks = append(blocks, block)
			}
			return blocks, len(blocks) * MaxSelfSignatures
		}},
		{"DSA 3072, 64 self-signatures a key, 256 in all", func() ([]string, int) {
			dk := new(dsa.PrivateKey)
			if err := dsa.GenerateParameters(&dk.Parameters, rand.Reader, dsa.L3072N256); err != nil {
				b.Fatal(err)
			}
			if err := dsa.GenerateKey(dk, rand.Reader); err != nil {
				b.Fatal(err)
			}
			return []string{keyBlock(b, packet.NewDSAPrivateKey(now, dk), "dsa", MaxKeySignatures/MaxSelfSignatures, MaxSelfSignatures, 0)}, MaxKeySignatures
		}},
		{"Ed25519, certifications by another key to 1 MiB", func() ([]string, int) {
			e, err := openpgp.NewEntity("busy", "", "busy@example.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
			if err != nil {
				b.Fatal(err)
			}
			one, two := keyBlock(b, e.PrivateKey, "busy", 1, 1, 1), keyBlock(b, e.PrivateKey, "busy", 1, 1, 101)
			certs := 1 + 100*(MaxArmoredKeyBytes-len(one))/(len(two)-len(one)) // what the armor of one more takes
			for len(keyBlock(b, e.PrivateKey, "busy", 1, 1, certs)) > MaxArmoredKeyBytes {
				certs--
			}
			return []string{keyBlock(b, e.PrivateKey, "busy", 1, 1, certs)}, 1
		}},
		{"Ed25519, a user ID of 1 MiB, 64 self-signatures", func() ([]string, int) {
			e, err := openpgp.NewEntity("long", "", "long@example.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
			if err != nil {
				b.Fatal(err)
			}
			long := func(n int) string { return keyBlock(b, e.PrivateKey, strings.Repeat("x", n), 1, MaxSelfSignatures, 0) }
			n := (MaxArmoredKeyBytes - len(long(0))) * 3 / 4 * 64 / 65 // the armor's 64 characters and a newline a line
			for len(long(n)) > MaxArmoredKeyBytes {
				n -= 64
			}
			return []string{long(n)}, MaxSelfSignatures
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			blocks, verified := c.key()
			size := 0
			for _, k := range blocks {
				size += len(k)
			}
			if size > MaxSigningKeyBytes {
				b.Fatalf("%d bytes of keys, more than an answer holds", size)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for _, k := range blocks {
					if _, err := ReadKeys([]byte(k), KeyLimits{}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(size), "armored-bytes")
			b.ReportMetric(float64(verified), "signatures-verified")
		})
	}
}

// keyBlock is the ASCII-armored block of keys copies of priv's public
// key, each with one user ID, uid, followed by selfSigs copies of one
// self-certification of it and certs copies of one certification of it
// by another key.
func keyBlock(tb testing.TB, priv *packet.PrivateKey, uid string, keys, selfSigs, certs int) string {
	tb.Helper()
	id := packet.NewUserId(uid, "", "")
	certify := func(by *packet.PrivateKey) []byte {
		sig := &packet.Signature{Version: 4, SigType: packet.SigTypePositiveCert, PubKeyAlgo: by.PubKeyAlgo, Hash: crypto.SHA256,
			CreationTime: time.Unix(1_600_000_000, 0), IssuerKeyId: &by.KeyId}
		if err := sig.SignUserId(id.Id, &priv.PublicKey, by, nil); err != nil {
			tb.Fatal(err)
		}
		var buf bytes.Buffer
		if err := sig.Serialize(&buf); err != nil {
			tb.Fatal(err)
		}
		return buf.Bytes()
	}
	self := certify(priv)
	var other []byte
	if certs > 0 {
		certifier, err := openpgp.NewEntity("certifier", "", "c@example.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
		if err != nil {
			tb.Fatal(err)
		}
		other = certify(certifier.PrivateKey)
	}
	var key bytes.Buffer
	if err := priv.PublicKey.Serialize(&key); err != nil {
		tb.Fatal(err)
	}
	if err := id.Serialize(&key); err != nil {
		tb.Fatal(err)
	}
	key.Write(bytes.Repeat(self, selfSigs))
	key.Write(bytes.Repeat(other, certs))
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		tb.Fatal(err)
	}
	w.Write(bytes.Repeat(key.Bytes(), keys))
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.String()
}

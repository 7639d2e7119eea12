package verify

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		{name: "a block over 64 KiB", key: edKey + strings.Repeat("\n", MaxArmoredKeyBytes),
			words: []string{"more than the 65536 read of one"}},
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
		"DSA 3072, Q 256":                 verifytest.ArmoredKey(verifytest.DSAKey(3072, 256)),
		"RSA 8192":                        verifytest.ArmoredKey(verifytest.RSAKey(8192)),
		"DSA 1024 with ElGamal 4096":      verifytest.ArmoredKey(verifytest.DSAKey(1024, 160), verifytest.ElGamalKey(4096)),
		"DSA 2048 with a DSA 3072 subkey": verifytest.ArmoredKey(verifytest.DSAKey(2048, 224), verifytest.DSAKey(3072, 256)),
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

	// Five blocks of 60 KiB each: each within its bound, not together.
	padded := goodKey + strings.Repeat("\n", 60<<10-len(goodKey))
	err = CheckSignature(doc, sig, []string{padded, padded, padded, padded, padded})
	checkReason(t, err, ReasonSignature)
	if !strings.Contains(err.Error(), "signing keys are 307200 bytes, more than the 262144 read") {
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

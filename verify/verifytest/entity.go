package verifytest

import (
	"bytes"
	"crypto"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// ExpiringKey is a new Ed25519 key made at the time made that expires
// lifetime after it, as a publisher's key made with GnuPG's default
// expiry does; a failure to make it fails tb.
func ExpiringKey(tb testing.TB, made time.Time, lifetime time.Duration) *openpgp.Entity {
	tb.Helper()
	e, err := openpgp.NewEntity("publisher", "", "publisher@example.test", &packet.Config{
		Algorithm: packet.PubKeyAlgoEdDSA, KeyLifetimeSecs: uint32(lifetime / time.Second), Time: func() time.Time { return made },
	})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// SignedAt is e's detached signature over doc made at the time at,
// whatever e's validity then (go-crypto's DetachSign makes none once the
// key expired); a failure to make it fails tb.
func SignedAt(tb testing.TB, e *openpgp.Entity, doc []byte, at time.Time) []byte {
	tb.Helper()
	sig := &packet.Signature{Version: 4, SigType: packet.SigTypeBinary, PubKeyAlgo: e.PrivateKey.PubKeyAlgo,
		Hash: crypto.SHA256, CreationTime: at, IssuerKeyId: &e.PrivateKey.KeyId}
	cfg := &packet.Config{Time: func() time.Time { return at }}
	h, err := sig.PrepareSign(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	h.Write(doc)
	if err := sig.Sign(h, e.PrivateKey, cfg); err != nil {
		tb.Fatal(err)
	}
	var b bytes.Buffer
	if err := sig.Serialize(&b); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// ArmoredPublic is e's public key block, ASCII-armored as a publisher
// hands it out (a real key, whose self-signatures verify); a failure to
// write it fails tb.
func ArmoredPublic(tb testing.TB, e *openpgp.Entity) string {
	tb.Helper()
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.String()
}

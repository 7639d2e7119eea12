package verifytest

import (
	"bytes"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

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

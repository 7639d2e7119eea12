package releases

import (
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/tfmirror/tfmirror/v2/verify"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// A publisher's keys that each verification would refuse together (more
// self-signatures in all than verify.MaxKeySignatures, each key within
// its own bound) are refused at start, naming the bound, instead of
// failing every verification; as many as the bound are read.
func TestKeyringBoundedBySignaturesInAll(t *testing.T) {
	// key is an Ed25519 key with its user ID self-certified selfCerts
	// times more (its encryption subkey's binding and the first
	// certification: 2 more).
	key := func(selfCerts int) string {
		e, err := openpgp.NewEntity("publisher", "", "p@example.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
		if err != nil {
			t.Fatal(err)
		}
		for range selfCerts {
			if err := e.SignIdentity("publisher <p@example.test>", e, nil); err != nil {
				t.Fatal(err)
			}
		}
		return verifytest.ArmoredPublic(t, e)
	}
	sixty := key(58) // 60 self-signatures
	if _, err := newKeyring([]string{sixty, sixty, sixty, sixty}); err != nil {
		t.Fatalf("four keys of 60 self-signatures (240): %v", err)
	}
	_, err := newKeyring([]string{sixty, sixty, sixty, sixty, sixty})
	if err == nil || !strings.Contains(err.Error(), "the keys together") || !strings.Contains(err.Error(), "more than the 256 self-signatures verified in all") {
		t.Fatalf("five keys of 60 self-signatures (300): %v, want a refusal naming the bound in all", err)
	}
	if verify.MaxKeySignatures != 256 {
		t.Fatalf("verify.MaxKeySignatures is %d: the keys above are sized for 256", verify.MaxKeySignatures)
	}
}

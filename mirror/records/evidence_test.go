package records

import (
	"crypto"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// extendedAt gives e a new self-signature made at the time at, which
// sets its expiry to lifetime after its creation, as a publisher who
// extends a key's expiry does (the registry then serves the key with it).
func extendedAt(t *testing.T, e *openpgp.Entity, at time.Time, lifetime time.Duration) {
	t.Helper()
	secs, primary := uint32(lifetime/time.Second), true
	cfg := &packet.Config{Time: func() time.Time { return at }}
	for _, id := range e.Identities {
		ss := &packet.Signature{Version: 4, SigType: packet.SigTypePositiveCert, PubKeyAlgo: e.PrimaryKey.PubKeyAlgo,
			Hash: crypto.SHA256, CreationTime: at, IssuerKeyId: &e.PrimaryKey.KeyId, KeyLifetimeSecs: &secs,
			FlagsValid: true, FlagSign: true, FlagCertify: true, IsPrimaryId: &primary}
		if err := ss.SignUserId(id.UserId.Id, e.PrimaryKey, e.PrivateKey, cfg); err != nil {
			t.Fatal(err)
		}
		id.SelfSignature = ss
		id.Signatures = append(id.Signatures, ss)
	}
}

// recordSignedBy is the stored record of terraform-provider-x 1.0.0 for
// linux_amd64, its SHA256SUMS signed by sig with e's public key as the
// origin's answer gave it.
func recordSignedBy(t *testing.T, e *openpgp.Entity, doc, sig []byte, verifiedAt time.Time) *PackageRecord {
	t.Helper()
	sha := strings.Repeat("ab", 32)
	name := "terraform-provider-x_1.0.0_linux_amd64.zip"
	return &PackageRecord{
		Schema: Schema, Version: "1.0.0", VerifiedAt: verifiedAt,
		Documents: []SumsDocument{{
			URL: "https://origin.example/SHA256SUMS", SignatureURL: "https://origin.example/SHA256SUMS.sig",
			Content: doc, Signature: sig,
			SigningKeys: []registryjson.GPGPublicKey{{KeyID: e.PrimaryKey.KeyIdString(), ASCIIArmor: verifytest.ArmoredPublic(t, e)}},
		}},
		Archives: map[string]ArchiveRecord{"linux_amd64": {
			Filename: name, URL: "https://origin.example/" + name, SHA256: sha,
			Evidence: &PackageEvidence{OS: "linux", Arch: "amd64", Shasum: sha, Document: 0},
		}},
		Sums: map[string]string{name: sha},
	}
}

// TestStoredEvidenceOutlivesItsKeysExpiry: a record verified while its
// publisher's key was valid still verifies once the key has expired
// (GnuPG makes keys that expire after a few years; HashiCorp's signing
// subkey 7685B676 expired in 2022 and its primary key expires in 2030):
// checking a stored record again is checking what was verified, not a
// new decision, and a record that fails it is deleted, which on an
// air-gapped mirror, whose imports cannot be fetched again, loses the
// version for good. What was never valid still fails: a signature made
// after the key expired, or by a key revoked in its stored copy.
func TestStoredEvidenceOutlivesItsKeysExpiry(t *testing.T) {
	now := time.Now()
	doc := []byte(strings.Repeat("ab", 32) + "  terraform-provider-x_1.0.0_linux_amd64.zip\n")
	v := mustVersion(t, "1.0.0")

	// Made 3 days ago, valid for 2: expired a day ago. The version was
	// signed and verified 2 days ago.
	key := verifytest.ExpiringKey(t, now.Add(-72*time.Hour), 48*time.Hour)
	signed := now.Add(-48 * time.Hour)
	rec := recordSignedBy(t, key, doc, verifytest.SignedAt(t, key, doc, signed), signed)
	if err := rec.VerifyEvidence("x", v); err != nil {
		t.Errorf("the stored record verified while its key was valid is refused once the key expired: %v", err)
	}

	// Its expiry extended after the version was signed, and expired
	// since: the stored key's self-signature is newer than the signature.
	extended := verifytest.ExpiringKey(t, now.Add(-96*time.Hour), 48*time.Hour)
	sig := verifytest.SignedAt(t, extended, doc, now.Add(-60*time.Hour))
	extendedAt(t, extended, now.Add(-55*time.Hour), 72*time.Hour)
	if err := recordSignedBy(t, extended, doc, sig, now.Add(-55*time.Hour)).VerifyEvidence("x", v); err != nil {
		t.Errorf("the stored record verified after its key's expiry was extended is refused once the key expired: %v", err)
	}

	// Signed after the key expired: never valid.
	late := recordSignedBy(t, key, doc, verifytest.SignedAt(t, key, doc, now.Add(-12*time.Hour)), now.Add(-12*time.Hour))
	if err := late.VerifyEvidence("x", v); err == nil {
		t.Error("a stored signature made after its key expired verifies")
	}

	// A key whose stored copy revokes it.
	revoked := verifytest.ExpiringKey(t, now.Add(-72*time.Hour), 0)
	sig = verifytest.SignedAt(t, revoked, doc, now.Add(-48*time.Hour))
	if err := revoked.RevokeKey(packet.KeyCompromised, "stolen", &packet.Config{Time: func() time.Time { return now.Add(-24 * time.Hour) }}); err != nil {
		t.Fatal(err)
	}
	if err := recordSignedBy(t, revoked, doc, sig, now.Add(-48*time.Hour)).VerifyEvidence("x", v); err == nil {
		t.Error("a stored signature by a key its stored copy revokes verifies")
	}
}

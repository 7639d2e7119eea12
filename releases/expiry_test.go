package releases_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/releases"
	"github.com/tfmirror/tfmirror/v2/verify"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// TestStoredSumsOutliveTheirKeysExpiry: a CLI version's SHA256SUMS
// verified while the publisher's key was valid (HashiCorp's primary key
// expires in 2030; GnuPG's keys expire after a few years) is still held,
// listed and served from the cache once the key has expired, on a sealed
// mirror, which could fetch nothing again; a bundle exported the day
// before the key expired (its manifest signed by a trusted export key,
// which package airgap requires of every CLI version) is still imported
// after. A signature made after the key expired is refused on both.
func TestStoredSumsOutliveTheirKeysExpiry(t *testing.T) {
	o := startOrigin(t)
	now := time.Now()
	key := verifytest.ExpiringKey(t, now.Add(-72*time.Hour), 48*time.Hour)
	armored := verifytest.ArmoredPublic(t, key)
	doc := o.Sums("hashicorp", "terraform", "1.6.0")
	whileValid := verifytest.SignedAt(t, key, doc, now.Add(-48*time.Hour))
	late := verifytest.SignedAt(t, key, doc, now.Add(-12*time.Hour))
	if _, _, err := verify.VerifyDetached(openpgp.EntityList{key}, doc, whileValid); err == nil {
		t.Fatal("a verification with the expired key's validity now succeeded; the test needs one refused")
	}
	zip := o.Archive("terraform", "1.6.0", "linux_amd64")
	ctx := context.Background()

	// A sealed mirror trusting key, on a cache of its own.
	sealed := func(t *testing.T) (*releases.Releases, *cache.Store) {
		side := harness.StartReleasesSide(t, o, releases.Config{HashiCorpKeys: []string{armored}, Offline: true})
		return side.Releases, side.Store
	}
	in := func(sig []byte) releases.Imported {
		return releases.Imported{Publisher: releases.HashiCorp, Product: "terraform", Version: "1.6.0",
			Document: doc, Signature: sig, Archives: []releases.ImportedArchive{archiveOf(tfZip, zip)}}
	}

	t.Run("cached", func(t *testing.T) {
		rel, store := sealed(t)
		if err := store.PutMeta("releases/sums/hashicorp/terraform/1.6.0", &releases.Sums{Publisher: releases.HashiCorp,
			Product: "terraform", Version: "1.6.0", Document: doc, Signature: whileValid, Schema: 1}); err != nil {
			t.Fatal(err)
		}
		s, err := rel.HeldSums(releases.HashiCorp, "terraform", "1.6.0")
		if err != nil {
			t.Fatalf("the stored SHA256SUMS verified while its key was valid is refused once the key expired: %v", err)
		}
		if !s.SignedAt.Equal(now.Add(-48 * time.Hour).Truncate(time.Second).UTC()) {
			t.Errorf("signed at %v", s.SignedAt)
		}
		var held []releases.HeldVersion
		if err := rel.AirGap().Held(func(h releases.HeldVersion) error { held = append(held, h); return nil }); err != nil {
			t.Fatal(err)
		}
		for _, h := range held {
			if h.Err != nil {
				t.Errorf("an export would fail the version: %v", h.Err)
			}
		}
	})

	t.Run("imported", func(t *testing.T) {
		rel, _ := sealed(t)
		if _, err := rel.AirGap().Import(ctx, in(whileValid)); err != nil {
			t.Fatalf("a bundle's SHA256SUMS signed while its key was valid is refused once the key expired: %v", err)
		}
		arc, err := rel.OpenArchive(ctx, releases.HashiCorp, "terraform", "1.6.0", tfZip)
		if err != nil {
			t.Fatalf("the imported version is not served: %v", err)
		}
		got, err := io.ReadAll(arc)
		arc.Close()
		if err != nil || !bytes.Equal(got, zip) {
			t.Fatalf("served: %v", err)
		}
	})

	t.Run("signed after it expired", func(t *testing.T) {
		rel, store := sealed(t)
		if _, err := rel.AirGap().Import(ctx, in(late)); err == nil {
			t.Error("a bundle's SHA256SUMS signed after its key expired is imported")
		}
		if err := store.PutMeta("releases/sums/hashicorp/terraform/1.6.0", &releases.Sums{Publisher: releases.HashiCorp,
			Product: "terraform", Version: "1.6.0", Document: doc, Signature: late, Schema: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := rel.HeldSums(releases.HashiCorp, "terraform", "1.6.0"); err == nil {
			t.Error("a stored SHA256SUMS signed after its key expired verifies")
		}
	})
}

package releases_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/releases"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// TestKeyIDOfTheKeyThatSignedInOneBlock: a key file whose one armored
// block holds two keys (what `gpg --export --armor OLD NEW` writes when a
// publisher rotates its key) names a SHA256SUMS's signature by the ID of
// the key that made it, not by the first key of the block: tfenv and
// tfswitch ask for PRODUCT_VERSION_SHA256SUMS.72D7468F.sig, hc-install
// picks from shasums_signatures the entry named by its key's ID, and both
// must find the signature the publisher's key made.
func TestKeyIDOfTheKeyThatSignedInOneBlock(t *testing.T) {
	o := startOrigin(t)
	other, err := openpgp.NewEntity("the publisher's earlier key", "", "old@example.test", nil)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := openpgp.ReadArmoredKeyRing(strings.NewReader(o.HashiCorpKey))
	if err != nil || len(hc) != 1 {
		t.Fatalf("the stand-in's key: %v", err)
	}
	var block bytes.Buffer
	w, err := armor.Encode(&block, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*openpgp.Entity{other, hc[0]} {
		if err := e.Serialize(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	store := enginetest.OpenStore(t, "", cache.Options{})
	client, host := enginetest.ReleasesClient(t, o)
	engine, err := mirror.New(mirror.Config{AllowedOrigins: []string{host}, Logger: enginetest.Logger(t)}, client, store)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := releases.New(releases.Config{
		HashiCorpURL: o.HashiCorpURL, HashiCorpKeys: []string{block.String()},
		OpenTofuDownloadURL: o.OpenTofuDownloadURL, OpenTofuAPIURL: o.OpenTofuAPIURL, OpenTofuKeys: []string{o.OpenTofuKey},
		Logger: enginetest.Logger(t),
	}, client, engine, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rel.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		engine.Shutdown(ctx) //nolint:errcheck
		store.Close()
	})

	ctx := context.Background()
	if id := rel.SignerKeyID(releases.HashiCorp, "terraform", "1.6.0"); id != "" {
		t.Errorf("before a SHA256SUMS is fetched, with two keys in force, its signature is said to be named %q; which key made it is not known yet", id)
	}
	s, err := rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0")
	if err != nil {
		t.Fatalf("Sums: %v", err)
	}
	if s.KeyID != o.HashiCorpKeyID {
		t.Errorf("the signature is named by key %s; the key that made it is %s", s.KeyID, o.HashiCorpKeyID)
	}
	if id := rel.SignerKeyID(releases.HashiCorp, "terraform", "1.6.0"); id != o.HashiCorpKeyID {
		t.Errorf("once held, its signature is said to be named %q; the key that made it is %s", id, o.HashiCorpKeyID)
	}
	name := "terraform_1.6.0_SHA256SUMS." + o.HashiCorpKeyID + ".sig"
	sig, err := rel.Document(ctx, releases.HashiCorp, "terraform", "1.6.0", name)
	if err != nil {
		t.Fatalf("%s, as tfenv and tfswitch ask for it: %v", name, err)
	}
	if err := verify.CheckSignature(s.Document, sig, []string{o.HashiCorpKey}); err != nil {
		t.Errorf("%s does not verify with the key it is named by: %v", name, err)
	}
}

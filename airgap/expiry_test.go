package airgap

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// TestImportOutlivesThePublishersKeyExpiry: a bundle exported by a
// connected mirror, whose manifest a trusted export key signed, carries
// SHA256SUMS the exporting mirror verified while the publisher's key was
// valid; imported after that key expired (on an air-gapped site, a
// bundle made a day before), it is taken, as the exporting mirror still
// serves it from its cache. A signature made after the key expired is
// refused under the manifest too, and the publisher's key alone
// (--trusted-publisher-keys, which vouches for the bundle by that
// signature only) does not vouch for an expired key's signature: that is
// a new verification, judged now as Terraform judges one.
func TestImportOutlivesThePublishersKeyExpiry(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64"})
	src := newEngine(t, o)
	ctx := context.Background()
	p := netProvider
	cacheArchive(t, src, p, "1.0.0", "linux_amd64")
	v, _ := addrs.ParseSemver("1.0.0")
	linux := addrs.Platform{OS: "linux", Arch: "amd64"}

	now := time.Now()
	key := verifytest.ExpiringKey(t, now.Add(-72*time.Hour), 48*time.Hour)
	exporter := newKey(t, "exporter")
	// exported is the bundle as the exporting mirror would have written
	// it had the origin's SHA256SUMS been signed by key at the time at.
	exported := func(at time.Time) string {
		t.Helper()
		out := exportAll(t, src, exporter)
		dir := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type)
		evPath := filepath.Join(dir, evidenceName(p.Type, "1.0.0"))
		raw, err := os.ReadFile(evPath)
		if err != nil {
			t.Fatal(err)
		}
		var ef evidenceFile
		if err := json.Unmarshal(raw, &ef); err != nil {
			t.Fatal(err)
		}
		for i, d := range ef.Documents {
			doc, err := os.ReadFile(filepath.Join(dir, d.File))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, d.SignatureFile), verifytest.SignedAt(t, key, doc, at), 0o644); err != nil {
				t.Fatal(err)
			}
			ef.Documents[i].SigningKeys = []registryjson.GPGPublicKey{{KeyID: key.PrimaryKey.KeyIdString(), ASCIIArmor: verifytest.ArmoredPublic(t, key)}}
		}
		if raw, err = json.Marshal(ef); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(evPath, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		resign(t, out, exporter)
		return out
	}
	trusted := ImportOptions{Trust: Trust{ExportKeys: publicOf(t, exporter)}}

	dst := newEngine(t, nil) // sealed
	if sum, reports := importInto(t, dst, exported(now.Add(-48*time.Hour)), trusted); sum.Imported != 1 || sum.Failed != 0 {
		t.Fatalf("a bundle signed while the publisher's key was valid, imported after it expired: %+v %q", sum, reports)
	}
	if a, err := dst.OpenArchive(ctx, p, v, linux); err != nil {
		t.Errorf("the imported package is not served: %v", err)
	} else {
		a.Close()
	}

	late := exported(now.Add(-12 * time.Hour))
	if sum, reports := importInto(t, newEngine(t, nil), late, trusted); sum.Imported != 0 || sum.Failed != 1 {
		t.Errorf("a bundle whose SHA256SUMS was signed after the publisher's key expired: %+v %q", sum, reports)
	}

	pinned := exported(now.Add(-48 * time.Hour))
	os.Remove(filepath.Join(pinned, manifestName))
	os.Remove(filepath.Join(pinned, manifestSigName))
	ns := Namespace{Host: p.Hostname, Name: p.Namespace}
	if sum, reports := importInto(t, newEngine(t, nil), pinned, ImportOptions{Trust: Trust{PublisherKeys: map[Namespace]openpgp.EntityList{ns: {key}}}}); sum.Imported != 0 || sum.Failed != 1 {
		t.Errorf("a version vouched for by an expired publisher key alone: %+v %q", sum, reports)
	}
}

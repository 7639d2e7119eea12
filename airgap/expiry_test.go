package airgap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestImportSaysTheKeyExpired: a manifest signed by a trusted export key
// while it was valid, or a SHA256SUMS by a pinned publisher key, and
// imported after the key expired is refused (a new verification, judged
// now), saying that the key expired, and when: not that the file was
// changed after it was signed, which would send the operator looking for
// a tampered bundle rather than a key to renew.
func TestImportSaysTheKeyExpired(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64"})
	src := newEngine(t, o)
	p := netProvider
	cacheArchive(t, src, p, "1.0.0", "linux_amd64")
	now := time.Now()
	expiring := verifytest.ExpiringKey(t, now.Add(-72*time.Hour), 48*time.Hour)
	expires := now.Add(-24 * time.Hour).UTC().Format(time.DateOnly)

	t.Run("trusted export key", func(t *testing.T) {
		out := exportAll(t, src, newKey(t, "exporter"))
		data, err := os.ReadFile(filepath.Join(out, manifestName))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(out, manifestSigName), string(verifytest.SignedAt(t, expiring, data, now.Add(-48*time.Hour))))
		sum, reports := importInto(t, newEngine(t, nil), out, ImportOptions{Trust: Trust{ExportKeys: openpgp.EntityList{expiring}}})
		if sum.Imported != 0 || sum.Failed != 1 {
			t.Fatalf("%+v %q", sum, reports)
		}
		if msg := strings.Join(reports, "\n"); !strings.Contains(msg, "expired on "+expires) || strings.Contains(msg, "changed after it was signed") {
			t.Errorf("the refusal does not say that the trusted export key expired on %s:\n%s", expires, msg)
		}
	})

	t.Run("pinned publisher key", func(t *testing.T) {
		out := exportAll(t, src, newKey(t, "exporter"))
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
			write(t, filepath.Join(dir, d.SignatureFile), string(verifytest.SignedAt(t, expiring, doc, now.Add(-48*time.Hour))))
			ef.Documents[i].SigningKeys = []registryjson.GPGPublicKey{{KeyID: expiring.PrimaryKey.KeyIdString(), ASCIIArmor: verifytest.ArmoredPublic(t, expiring)}}
		}
		if raw, err = json.Marshal(ef); err != nil {
			t.Fatal(err)
		}
		write(t, evPath, string(raw))
		os.Remove(filepath.Join(out, manifestName))
		os.Remove(filepath.Join(out, manifestSigName))
		ns := Namespace{Host: p.Hostname, Name: p.Namespace}
		sum, reports := importInto(t, newEngine(t, nil), out, ImportOptions{Trust: Trust{PublisherKeys: map[Namespace]openpgp.EntityList{ns: {expiring}}}})
		if sum.Imported != 0 || sum.Failed != 1 {
			t.Fatalf("%+v %q", sum, reports)
		}
		if msg := strings.Join(reports, "\n"); !strings.Contains(msg, "expired on "+expires) || strings.Contains(msg, "changed after it was signed") {
			t.Errorf("the refusal does not say that the pinned publisher key expired on %s:\n%s", expires, msg)
		}
	})
}

// TestExportKeyExpired: an export key made to expire (as GnuPG makes
// keys by default) that has expired is refused when it is read, and an
// export signed with one that expired since it was read fails, each
// saying that the key expired and when, rather than that the key has no
// valid signing keys; nothing is signed with it.
func TestExportKeyExpired(t *testing.T) {
	now := time.Now()
	expired := &ExportKey{entity: verifytest.ExpiringKey(t, now.Add(-72*time.Hour), 48*time.Hour)}
	want := "expired on " + now.Add(-24*time.Hour).UTC().Format(time.DateOnly)
	var priv bytes.Buffer
	if err := expired.WritePrivate(&priv); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadExportKey(&priv); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ReadExportKey of an expired key: %v, want an error saying it %s", err, want)
	}

	src := newEngine(t, nil)
	out := filepath.Join(t.TempDir(), "out.tar")
	_, err := Export(context.Background(), src, servedBy(t, src, nil), nil, Selection{}, out, expired, func(string) {})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("an export signed with an expired key: %v, want an error saying it %s", err, want)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an export whose manifest could not be signed left %s: %v", out, err)
	}
}

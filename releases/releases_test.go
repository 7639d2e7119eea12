package releases_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/releases"
	"github.com/tfmirror/tfmirror/v2/verify"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

const (
	tfZip   = "terraform_1.6.0_linux_amd64.zip"
	tofuZip = "tofu_1.8.0_linux_amd64.zip"
)

// TestShippedKeys: the keys in keys/ are the publishers' (their
// fingerprints as the publishers state them).
func TestShippedKeys(t *testing.T) {
	for _, tc := range []struct{ name, armored, fingerprint string }{
		{"HashiCorp", releases.HashiCorpKey, "C874011F0AB405110D02105534365D9472D7468F"},
		{"OpenTofu", releases.OpenTofuKey, "E3E6E43D84CB852EADB0051D0C0AF313E5FD9F80"},
	} {
		el, err := openpgp.ReadArmoredKeyRing(strings.NewReader(tc.armored))
		if err != nil || len(el) != 1 {
			t.Fatalf("%s: %v (%d keys)", tc.name, err, len(el))
		}
		if got := strings.ToUpper(fmtHex(el[0].PrimaryKey.Fingerprint)); got != tc.fingerprint {
			t.Errorf("%s key fingerprint %s, want %s", tc.name, got, tc.fingerprint)
		}
	}
}

func fmtHex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// TestVerifiedPullThrough: each publisher's list, SHA256SUMS, signature
// and archive come through verified, the archive byte for byte the
// origin's, fetched once and then served from the cache.
func TestVerifiedPullThrough(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	ctx := context.Background()
	for _, tc := range []struct {
		pub              releases.Publisher
		product, version string
		file, path, sig  string
	}{
		{releases.HashiCorp, "terraform", "1.6.0", tfZip, "/hc/terraform/1.6.0/" + tfZip, "terraform_1.6.0_SHA256SUMS." + o.HashiCorpKeyID + ".sig"},
		{releases.OpenTofu, "tofu", "1.8.0", tofuZip, "/tofu/download/v1.8.0/" + tofuZip, "tofu_1.8.0_SHA256SUMS.gpgsig"},
	} {
		t.Run(string(tc.pub), func(t *testing.T) {
			list, st, err := r.rel.Versions(ctx, tc.pub, tc.product)
			if err != nil || st.Stale || len(list.Versions) == 0 || list.Versions[0].Version != tc.version {
				t.Fatalf("Versions: %+v %+v %v", list, st, err)
			}
			sums, err := r.rel.Document(ctx, tc.pub, tc.product, tc.version, releases.SumsName(tc.pub, tc.product, tc.version))
			if err != nil || !bytes.Equal(sums, o.Sums(string(tc.pub), tc.product, tc.version)) {
				t.Fatalf("SHA256SUMS: %q %v", sums, err)
			}
			sig, err := r.rel.Document(ctx, tc.pub, tc.product, tc.version, tc.sig)
			if err != nil {
				t.Fatal(err)
			}
			key := o.HashiCorpKey
			if tc.pub == releases.OpenTofu {
				key = o.OpenTofuKey
			}
			if err := verify.CheckSignature(sums, sig, []string{key}); err != nil {
				t.Fatalf("the signature served does not verify the SHA256SUMS served: %v", err)
			}
			for i, want := range []records.Source{records.Miss, records.Hit} {
				data, src, err := r.read(tc.pub, tc.product, tc.version, tc.file)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(data, fakeorigin.ReleaseArchive(tc.product, tc.version, "linux_amd64")) {
					t.Fatalf("read %d: not the origin's archive", i)
				}
				if src != want {
					t.Errorf("read %d: source %v, want %v", i, src, want)
				}
				r.waitIdle()
			}
			if n := o.Hits(tc.path); n != 1 {
				t.Errorf("origin archive hits %d, want 1", n)
			}
			if _, err := r.rel.OpenArchive(ctx, tc.pub, tc.product, tc.version, tc.product+"_"+tc.version+"_plan9_amd64.zip"); !isNotFound(err) {
				t.Errorf("an archive the SHA256SUMS does not list: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestOneFetchFor20Clients: 20 clients at once cause one origin fetch.
func TestOneFetchFor20Clients(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	want := fakeorigin.ReleaseArchive("terraform", "1.6.0", "linux_amd64")
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			data, _, err := r.read(releases.HashiCorp, "terraform", "1.6.0", tfZip)
			if err == nil && !bytes.Equal(data, want) {
				err = errors.New("wrong bytes")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	r.waitIdle()
	for _, p := range []string{"/hc/terraform/1.6.0/" + tfZip, "/hc/terraform/1.6.0/terraform_1.6.0_SHA256SUMS", "/hc/terraform/1.6.0/terraform_1.6.0_SHA256SUMS.sig"} {
		if n := o.Hits(p); n != 1 {
			t.Errorf("%s fetched %d times, want 1", p, n)
		}
	}
}

// TestTamperedArchiveRefused: an archive whose sha256 is not the signed
// one is refused to every reader, counted, and not cached.
func TestTamperedArchiveRefused(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	o.Tamper(tofuZip)
	for i := range 2 {
		_, _, err := r.read(releases.OpenTofu, "tofu", "1.8.0", tofuZip)
		if !errors.Is(err, verify.ErrIntegrity) {
			t.Fatalf("read %d: %v, want an integrity error", i, err)
		}
		r.waitIdle()
		if r.engine.HasBlob(fakeorigin.ArchiveSHA256("tofu", "1.8.0", "linux_amd64")) {
			t.Fatal("the tampered archive was cached")
		}
	}
	if n := o.Hits("/tofu/download/v1.8.0/" + tofuZip); n != 2 {
		t.Errorf("origin hits %d, want 2 (nothing cached between)", n)
	}
	if n := r.metrics.refusals("opentofu/tofu/" + string(verify.ReasonChecksum)); n != 2 {
		t.Errorf("checksum refusals counted %d, want 2", n)
	}
	// The origin that answered them is told (its row on the status page).
	if told, want := r.metrics.toldOrigins(), map[string]int{originHost(t, o) + "/" + string(verify.ReasonChecksum): 2}; !maps.Equal(told, want) {
		t.Errorf("Config.OriginRefused told %v, want %v", told, want)
	}
}

// originHost is the host of o's URLs, as Config.OriginRefused names it.
func originHost(t *testing.T, o *fakeorigin.Releases) string {
	t.Helper()
	u, err := url.Parse(o.HashiCorpURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestBadSignatureRefused: a SHA256SUMS signed by a key the operator did
// not choose is refused, counted, and nothing of the version is kept.
func TestBadSignatureRefused(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	o.SignWithOtherKey("terraform_1.6.0_SHA256SUMS")
	ctx := context.Background()
	for i := range 2 {
		if _, err := r.rel.Document(ctx, releases.HashiCorp, "terraform", "1.6.0", "terraform_1.6.0_SHA256SUMS"); !errors.Is(err, verify.ErrIntegrity) {
			t.Fatalf("try %d: %v, want an integrity error", i, err)
		}
		if _, _, err := r.read(releases.HashiCorp, "terraform", "1.6.0", tfZip); !errors.Is(err, verify.ErrIntegrity) {
			t.Fatalf("try %d: archive: %v, want an integrity error", i, err)
		}
	}
	if n := r.metrics.refusals("hashicorp/terraform/signature"); n != 4 {
		t.Errorf("refusals counted %d, want 4", n)
	}
	if n := r.metrics.verificationFailures("signature"); n != 4 {
		t.Errorf("verification failures counted %d, want 4 (the alert's series)", n)
	}
	if told, want := r.metrics.toldOrigins(), map[string]int{originHost(t, o) + "/signature": 4}; !maps.Equal(told, want) {
		t.Errorf("Config.OriginRefused told %v, want %v", told, want)
	}
	if n := o.Hits("/hc/terraform/1.6.0/" + tfZip); n != 0 {
		t.Errorf("the archive of an unverified SHA256SUMS was fetched %d times", n)
	}
	var s releases.Sums
	if _, err := r.store.GetMeta("releases/sums/hashicorp/terraform/1.6.0", &s); err == nil {
		t.Error("the refused SHA256SUMS was stored")
	}
}

// TestOriginDownServedStale: with the origin down, the cached list is
// served (marked stale) and the cached archive too.
func TestOriginDownServedStale(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	ctx := context.Background()
	if _, _, err := r.rel.Versions(ctx, releases.HashiCorp, "terraform"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.read(releases.HashiCorp, "terraform", "1.6.0", tfZip); err != nil {
		t.Fatal(err)
	}
	r.waitIdle()
	o.SetDown(true)
	r.clock.Add(time.Hour)
	list, st, err := r.rel.Versions(ctx, releases.HashiCorp, "terraform")
	if err != nil || !st.Stale || len(list.Versions) != 2 {
		t.Fatalf("origin down: %+v %+v %v, want the cached list, stale", list, st, err)
	}
	if data, _, err := r.read(releases.HashiCorp, "terraform", "1.6.0", tfZip); err != nil || len(data) == 0 {
		t.Fatalf("cached archive with the origin down: %v", err)
	}
	if _, _, err := r.read(releases.HashiCorp, "terraform", "1.5.7", "terraform_1.5.7_linux_amd64.zip"); err == nil || isNotFound(err) {
		t.Fatalf("a version never fetched, origin down: %v, want an origin error", err)
	}
}

// TestOffline: a sealed mirror lists only the versions it holds, serves
// them, and contacts no origin.
func TestOffline(t *testing.T) {
	o := startOrigin(t)
	dir := t.TempDir()
	online := newRig(t, o, dir, false)
	ctx := context.Background()
	for _, pub := range []releases.Publisher{releases.HashiCorp, releases.OpenTofu} {
		product, file, version := "terraform", tfZip, "1.6.0"
		if pub == releases.OpenTofu {
			product, file, version = "tofu", tofuZip, "1.8.0"
		}
		if _, _, err := online.rel.Versions(ctx, pub, product); err != nil {
			t.Fatal(err)
		}
		if _, _, err := online.read(pub, product, version, file); err != nil {
			t.Fatal(err)
		}
	}
	online.waitIdle()
	// 1.5.7's SHA256SUMS is known, none of its archives: not listed offline.
	if _, err := online.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.5.7"); err != nil {
		t.Fatal(err)
	}
	online.stop()
	before := o.TotalHits()

	r := newRig(t, o, dir, true)
	list, _, err := r.rel.Versions(ctx, releases.HashiCorp, "terraform")
	if err != nil || len(list.Versions) != 1 || list.Versions[0].Version != "1.6.0" {
		t.Fatalf("offline list: %+v %v, want 1.6.0 alone", list, err)
	}
	if data, _, err := r.read(releases.HashiCorp, "terraform", "1.6.0", tfZip); err != nil || len(data) == 0 {
		t.Fatalf("offline archive: %v", err)
	}
	if data, _, err := r.read(releases.OpenTofu, "tofu", "1.8.0", tofuZip); err != nil || len(data) == 0 {
		t.Fatalf("offline tofu archive: %v", err)
	}
	// What the sealed mirror does not hold is not found (404), and says
	// why (offline).
	if _, _, err := r.read(releases.HashiCorp, "terraform", "1.6.0", "terraform_1.6.0_darwin_arm64.zip"); !errors.Is(err, records.ErrOffline) || !isNotFound(err) {
		t.Fatalf("an archive not cached, offline: %v, want ErrNotFound and ErrOffline", err)
	}
	if _, _, err := r.read(releases.HashiCorp, "terraform", "1.4.0", "terraform_1.4.0_linux_amd64.zip"); !errors.Is(err, records.ErrOffline) || !isNotFound(err) {
		t.Fatalf("a version not cached, offline: %v, want ErrNotFound and ErrOffline", err)
	}
	// 1.5.7's SHA256SUMS is held, none of its archives: not served either.
	if _, err := r.rel.Document(ctx, releases.HashiCorp, "terraform", "1.5.7", "terraform_1.5.7_SHA256SUMS"); !isNotFound(err) {
		t.Fatalf("the SHA256SUMS of a version none of whose archives is held, offline: %v, want ErrNotFound", err)
	}
	if n := o.TotalHits(); n != before {
		t.Errorf("the sealed mirror made %d origin requests", n-before)
	}
}

// TestProducts: only configured products are served, never a provider.
func TestProducts(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	ctx := context.Background()
	if _, _, err := r.rel.Versions(ctx, releases.HashiCorp, "vault"); !isNotFound(err) {
		t.Errorf("a product not configured: %v", err)
	}
	if _, _, err := r.rel.Versions(ctx, releases.OpenTofu, "terraform"); !isNotFound(err) {
		t.Errorf("OpenTofu's terraform: %v", err)
	}
	if _, err := r.rel.Sums(ctx, releases.HashiCorp, "terraform", "v1.6.0"); !isNotFound(err) {
		t.Errorf("a version not in its one spelling: %v", err)
	}
	for _, p := range []string{"terraform-provider-aws", "Terraform", "../x", ""} {
		if _, err := releases.New(releases.Config{HashiCorpProducts: []string{p}}, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "not a product") {
			t.Errorf("product %q: %v, want refused", p, err)
		}
	}
	if n := o.TotalHits(); n != 0 {
		t.Errorf("refusals reached the origin (%d requests)", n)
	}
}

// TestSignedArchiveWithoutTheProgramRefused: an archive its publisher
// signed that is no zip holding the program (or a zip bomb) is refused
// to every reader, counted, and not cached.
func TestSignedArchiveWithoutTheProgramRefused(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, _ := zw.Create("README")
	f.Write([]byte("no program here")) //nolint:errcheck
	zw.Close()
	o.SetArchiveBytes("terraform", "1.6.0", "linux_amd64", buf.Bytes())
	o.SetArchiveBytes("terraform", "1.6.0", "darwin_arm64", verifytest.Zeros("terraform", 3<<30))
	for _, name := range []string{tfZip, "terraform_1.6.0_darwin_arm64.zip"} {
		_, _, err := r.read(releases.HashiCorp, "terraform", "1.6.0", name)
		if !errors.Is(err, verify.ErrIntegrity) {
			t.Fatalf("%s: %v, want refused", name, err)
		}
		r.waitIdle()
	}
	if r.engine.HasBlob(fakeorigin.ArchiveSHA256("terraform", "1.6.0", "linux_amd64")) {
		t.Error("cached")
	}
	if n := r.metrics.refusals("hashicorp/terraform/" + string(verify.ReasonBadArchive)); n != 1 {
		t.Errorf("bad archive refusals %d, want 1", n)
	}
	if n := r.metrics.refusals("hashicorp/terraform/" + string(verify.ReasonTooLarge)); n != 1 {
		t.Errorf("too large refusals %d, want 1", n)
	}
}

// TestShortKeyIDIsNotTrust: a key whose short ID is HashiCorp's 72D7468F
// (the tests' key made to match it) and nothing else of it is refused by
// HashiCorp's shipped key, from the origin and from the cache; the
// signature file named by that ID is not served. Trusted by
// configuration, the same key verifies.
func TestShortKeyIDIsNotTrust(t *testing.T) {
	o, err := fakeorigin.StartReleasesWith(fakeorigin.ReleasesOptions{HashiCorpShortID: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	o.Add("hashicorp", "terraform", "1.6.0", "linux_amd64")
	if o.HashiCorpKeyID != "72D7468F" {
		t.Fatalf("the test key's short ID is %s", o.HashiCorpKeyID)
	}
	r := newRig(t, o, "", false) // trusts the test key
	shipped, err := releases.New(releases.Config{HashiCorpURL: o.HashiCorpURL, OpenTofuDownloadURL: o.OpenTofuDownloadURL,
		OpenTofuAPIURL: o.OpenTofuAPIURL, Logger: enginetest.Logger(t), Now: r.clock.Now}, r.client, r.engine, r.store)
	if err != nil {
		t.Fatal(err)
	}
	defer shipped.Close()
	if id := shipped.SignerKeyID(releases.HashiCorp, "terraform", "1.6.0"); id != o.HashiCorpKeyID {
		t.Fatalf("the shipped key names signatures %q", id)
	}
	ctx := context.Background()
	sig := "terraform_1.6.0_SHA256SUMS.72D7468F.sig"
	for _, from := range []string{"the origin", "the cache"} {
		if _, err := shipped.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0"); !errors.Is(err, verify.ErrIntegrity) {
			t.Fatalf("from %s: %v, want refused", from, err)
		}
		if _, err := shipped.Document(ctx, releases.HashiCorp, "terraform", "1.6.0", sig); err == nil {
			t.Fatalf("from %s: the signature was served", from)
		}
		if _, err := r.rel.Document(ctx, releases.HashiCorp, "terraform", "1.6.0", sig); err != nil {
			t.Fatalf("the test key trusted: %v", err)
		}
	}
}

// TestSumsOfAnotherReleaseRefused: a SHA256SUMS and its signature that
// the publisher really made, for another version or another product,
// answered for a version, are refused for it (counted, nothing kept, no
// archive fetched): the signature vouches for the names it signed, and
// none of them is this version's. Kept, it would date the version by
// another release's signature and stand for it until pruned.
func TestSumsOfAnotherReleaseRefused(t *testing.T) {
	o := startOrigin(t)
	o.Add("hashicorp", "packer", "1.7.0", "linux_amd64")
	for _, c := range []struct {
		pub                      releases.Publisher
		product, version         string
		fromProduct, fromVersion string
	}{
		{releases.HashiCorp, "terraform", "1.7.0", "terraform", "1.5.7"},
		{releases.HashiCorp, "terraform", "1.7.1", "packer", "1.7.0"},
		{releases.HashiCorp, "terraform", "1.5.7+x", "terraform", "1.5.7"},
		{releases.OpenTofu, "tofu", "1.9.0", "tofu", "1.8.0"},
	} {
		t.Run(c.product+"_"+c.version, func(t *testing.T) {
			o.Add(string(c.pub), c.product, c.version, "linux_amd64")
			o.ReplaySums(string(c.pub), c.product, c.version, c.fromProduct, c.fromVersion)
			r := newRig(t, o, "", false)
			ctx := context.Background()
			sums := releases.SumsName(c.pub, c.product, c.version)
			zip := fakeorigin.ArchiveName(c.product, c.version, "linux_amd64")
			for i := range 2 {
				if _, err := r.rel.Sums(ctx, c.pub, c.product, c.version); !errors.Is(err, verify.ErrIntegrity) {
					t.Fatalf("try %d: %v, want an integrity error", i, err)
				}
				if _, err := r.rel.Document(ctx, c.pub, c.product, c.version, sums); !errors.Is(err, verify.ErrIntegrity) {
					t.Fatalf("try %d: the SHA256SUMS: %v, want an integrity error", i, err)
				}
				if _, _, err := r.read(c.pub, c.product, c.version, zip); !errors.Is(err, verify.ErrIntegrity) {
					t.Fatalf("try %d: the archive: %v, want an integrity error", i, err)
				}
			}
			if n := r.metrics.refusals(string(c.pub) + "/" + c.product + "/" + string(verify.ReasonChecksum)); n != 6 {
				t.Errorf("refusals counted %d, want 6", n)
			}
			var s releases.Sums
			if _, err := r.store.GetMeta("releases/sums/"+string(c.pub)+"/"+c.product+"/"+c.version, &s); err == nil {
				t.Error("the SHA256SUMS of another release was stored")
			}
		})
	}
}

// TestStoredTofuListNamesOnlyFileNames: an OpenTofu list stored with a
// name that is no plain file name of its version (stored before such
// names were left out) is served without it, sealed as connected.
func TestStoredTofuListNamesOnlyFileNames(t *testing.T) {
	o := startOrigin(t)
	dir := t.TempDir()
	r := newRig(t, o, dir, false)
	if _, _, err := r.read(releases.OpenTofu, releases.TofuProduct, "1.8.0", tofuZip); err != nil {
		t.Fatal(err)
	}
	r.waitIdle()
	stored := releases.List{At: r.clock.Now(), Schema: 1, Versions: []releases.Listed{{Version: "1.8.0",
		Files: []string{tofuZip, "tofu_1.8.0_linux_amd64.zip?x=1", "tofu_1.8.0_..%2Fx"}}}}
	if err := r.store.PutMeta("releases/list/opentofu/tofu", stored); err != nil {
		t.Fatal(err)
	}
	r.stop()
	for _, offline := range []bool{false, true} {
		r := newRig(t, o, dir, offline)
		list, _, err := r.rel.Versions(context.Background(), releases.OpenTofu, releases.TofuProduct)
		if err != nil {
			t.Fatalf("offline %v: %v", offline, err)
		}
		if len(list.Versions) != 1 || !slices.Equal(list.Versions[0].Files, []string{tofuZip}) {
			t.Fatalf("offline %v: %+v, want %s alone", offline, list.Versions, tofuZip)
		}
		r.stop()
	}
}

// TestStoredSumsOfAnotherReleaseRefused: a SHA256SUMS of another release
// stored for a version (by a release that kept it) no longer stands for
// it when read from the cache: neither held (what the policy dates
// versions by, and exports carry) nor served.
func TestStoredSumsOfAnotherReleaseRefused(t *testing.T) {
	o := startOrigin(t)
	o.Add("hashicorp", "terraform", "1.7.0", "linux_amd64")
	o.ReplaySums("hashicorp", "terraform", "1.7.0", "terraform", "1.5.7")
	dir := t.TempDir()
	r := newRig(t, o, dir, false)
	old, err := r.rel.Sums(context.Background(), releases.HashiCorp, "terraform", "1.5.7")
	if err != nil {
		t.Fatal(err)
	}
	r.stop()
	// Stored for 1.7.0 as such, and as the record of 1.5.7 it is.
	for _, as := range []string{"1.7.0", "1.5.7"} {
		r := newRig(t, o, dir, false)
		forged := releases.Sums{Publisher: releases.HashiCorp, Product: "terraform", Version: as,
			Document: old.Document, Signature: old.Signature, KeyID: old.KeyID, SignedAt: old.SignedAt, Schema: 1}
		if err := r.store.PutMeta("releases/sums/hashicorp/terraform/1.7.0", forged); err != nil {
			t.Fatal(err)
		}
		r.stop()
		r = newRig(t, o, dir, false)
		if s, err := r.rel.HeldSums(releases.HashiCorp, "terraform", "1.7.0"); err == nil {
			t.Fatalf("as %s: the stored SHA256SUMS of 1.5.7 is held for 1.7.0, signed at %s", as, s.SignedAt)
		}
		if rel := r.rel.StoredRelease(releases.HashiCorp, "terraform", "1.7.0"); rel.Known {
			t.Fatalf("as %s: 1.7.0 dated by 1.5.7's signature: %+v", as, rel)
		}
		if _, err := r.rel.Sums(context.Background(), releases.HashiCorp, "terraform", "1.7.0"); !errors.Is(err, verify.ErrIntegrity) {
			t.Fatalf("as %s: served: %v, want an integrity error", as, err)
		}
		r.stop()
	}
}

// An origin URL with a user name or password is refused, the password
// never repeated: the client would send it as Basic credentials, and it
// would be shown wherever the URL is. An origin's token goes in the
// credentials file.
func TestOriginURLWithCredentialsRefused(t *testing.T) {
	for _, cfg := range []releases.Config{
		{HashiCorpURL: "https://mirror:hunter2@artifactory.corp/hashicorp/"},
		{OpenTofuDownloadURL: "https://mirror:hunter2@artifactory.corp/tofu/"},
		{OpenTofuAPIURL: "https://mirror@artifactory.corp/tofu/api.json"},
		{HashiCorpURL: "http://mirror:hunter2@artifactory.corp/hashicorp/"},
	} {
		_, err := releases.New(cfg, nil, nil, nil)
		if err == nil {
			t.Errorf("%+v: accepted", cfg)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "mirror@") {
			t.Errorf("the refusal repeats the credentials: %v", err)
		}
	}
}

// TestRotatedPlainSignatureFallsBackToKeyIDSignature: HashiCorp's plain
// .sig made by a key not in force (a rotation: the new key before the
// operator added it, or the old one after) does not refuse a release
// whose signature named by the ID of a key in force (.KEYID.sig), which
// HashiCorp publishes for just that, verifies: that one is kept and
// served, under both names.
func TestRotatedPlainSignatureFallsBackToKeyIDSignature(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	sums := "terraform_1.6.0_SHA256SUMS"
	o.SignPlainWithOtherKey(sums)
	ctx := context.Background()
	s, err := r.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0")
	if err != nil {
		t.Fatalf("a release whose %s.%s.sig verifies refused: %v", sums, o.HashiCorpKeyID, err)
	}
	if s.KeyID != o.HashiCorpKeyID {
		t.Errorf("key ID %q, want %q", s.KeyID, o.HashiCorpKeyID)
	}
	for _, name := range []string{sums + ".sig", sums + "." + o.HashiCorpKeyID + ".sig"} {
		sig, err := r.rel.Document(ctx, releases.HashiCorp, "terraform", "1.6.0", name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := verify.CheckSignature(s.Document, sig, []string{o.HashiCorpKey}); err != nil {
			t.Errorf("%s served does not verify with the key in force: %v", name, err)
		}
	}
	if _, _, err := r.read(releases.HashiCorp, "terraform", "1.6.0", tfZip); err != nil {
		t.Errorf("archive: %v", err)
	}
	if n := r.metrics.refusals("hashicorp/terraform/signature"); n != 0 {
		t.Errorf("refusals counted %d, want 0", n)
	}
}

// TestSignatureOfEachKeyInForceServed: during a rotation, with both keys
// in force, HashiCorp's .sig made by one key and each key's own
// .KEYID.sig by that key, the signature named by the ID of the key that
// did not make the .sig is served too, once it verifies the SHA256SUMS
// with that key: installers that trust it ask for it by its ID (tfenv
// and js-releases ask for .72D7468F.sig whatever key made the .sig). It
// was answered 404, failing those installs through the mirror alone. A
// file named by a key not in force is still not found, and one that does
// not verify with the key it names is refused and not kept.
func TestSignatureOfEachKeyInForceServed(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	r.rel.Close()
	var err error
	r.rel, err = releases.New(releases.Config{
		HashiCorpURL: o.HashiCorpURL, HashiCorpKeys: []string{o.OtherKey, o.HashiCorpKey},
		OpenTofuDownloadURL: o.OpenTofuDownloadURL, OpenTofuAPIURL: o.OpenTofuAPIURL, OpenTofuKeys: []string{o.OpenTofuKey},
		Logger: enginetest.Logger(t), Metrics: r.metrics, Now: r.clock.Now,
	}, r.client, r.engine, r.store)
	if err != nil {
		t.Fatal(err)
	}
	sums := "terraform_1.6.0_SHA256SUMS"
	o.SignPlainWithOtherKey(sums) // .sig by the other key, .KEYID.sig by HashiCorp's
	ctx := context.Background()
	s, err := r.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0")
	if err != nil {
		t.Fatal(err)
	}
	if s.KeyID != o.OtherKeyID {
		t.Fatalf("verified by %s, want the .sig's key %s", s.KeyID, o.OtherKeyID)
	}
	keyed := sums + "." + o.HashiCorpKeyID + ".sig"
	for range 2 {
		sig, err := r.rel.Document(ctx, releases.HashiCorp, "terraform", "1.6.0", keyed)
		if err != nil {
			t.Fatalf("%s, named by a key in force: %v", keyed, err)
		}
		if err := verify.CheckSignature(s.Document, sig, []string{o.HashiCorpKey}); err != nil {
			t.Errorf("%s served does not verify with its key: %v", keyed, err)
		}
	}
	if n := o.Hits("/hc/terraform/1.6.0/" + keyed); n != 1 {
		t.Errorf("%s fetched %d times, want once: kept", keyed, n)
	}
	if _, err := r.rel.Document(ctx, releases.HashiCorp, "terraform", "1.6.0", sums+".0000FFFF.sig"); !isNotFound(err) {
		t.Errorf("a signature named by a key not in force: %v, want not found", err)
	}
	// 1.5.7: its .KEYID.sig made by another key than the one it names.
	o.SignWithOtherKey("terraform_1.5.7_SHA256SUMS")
	bad := "terraform_1.5.7_SHA256SUMS." + o.HashiCorpKeyID + ".sig"
	if _, err := r.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.5.7"); err != nil {
		t.Fatal(err)
	}
	var verr *verify.Error
	if _, err := r.rel.Document(ctx, releases.HashiCorp, "terraform", "1.5.7", bad); !errors.As(err, &verr) {
		t.Errorf("%s made by another key: %v, want refused", bad, err)
	}
}

package mirror

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// documentRecorder remembers every document the origin client returned,
// by URL, to compare with what the engine kept.
type documentRecorder struct {
	Origin
	mu   sync.Mutex
	docs map[string][]byte
}

func (r *documentRecorder) FetchSums(ctx context.Context, p addrs.Provider, pkg *discovery.Package, sumsLimit, signatureLimit int64) ([]byte, []byte, error) {
	sums, sig, err := r.Origin.FetchSums(ctx, p, pkg, sumsLimit, signatureLimit)
	if err == nil {
		r.mu.Lock()
		r.docs[pkg.SHASumsURL] = bytes.Clone(sums)
		r.docs[pkg.SHASumsSignatureURL] = bytes.Clone(sig)
		r.mu.Unlock()
	}
	return sums, sig, err
}

func (r *documentRecorder) doc(u string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.docs[u]
}

// originPackage fetches the fake origin's package response for platform
// pl of version straight from it, bypassing the engine.
func originPackage(t *testing.T, o *fakeorigin.Origin, version, pl string) registryjson.Package {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: o.CertPool()}}}
	defer c.CloseIdleConnections()
	goos, arch, _ := strings.Cut(pl, "_")
	resp, err := c.Get(o.URL + "/v1/providers/" + ns + "/" + typ + "/" + version + "/download/" + goos + "/" + arch)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var pkg registryjson.Package
	if err := json.NewDecoder(resp.Body).Decode(&pkg); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("origin package response: status %d, %v", resp.StatusCode, err)
	}
	return pkg
}

// The engine keeps, for a version it verified, the origin's SHA256SUMS and
// signature byte for byte and its package metadata as given, on disk:
// after a restart, with the origin down, records.Evidence still returns them, and
// each platform's package response is rebuilt exactly as the origin sent
// it. The version list keeps the protocols.
func TestEvidenceKeptAsTheOriginGaveIt(t *testing.T) {
	t.Parallel()
	rec := &documentRecorder{docs: map[string][]byte{}}
	opts := harnessOptions{
		cacheDir:   t.TempDir(),
		wrapOrigin: func(o Origin) Origin { rec.Origin = o; return rec },
	}
	h := newHarness(t, opts)
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	v := mustVersion(t, "1.0.0")

	first, err := h.engine.Evidence(t.Context(), h.provider(), v, nil)
	if err != nil {
		t.Fatalf("Evidence: %v", err)
	}
	list, _, err := h.engine.Versions(t.Context(), h.provider())
	if err != nil {
		t.Fatalf("Versions: %v", err)
	}
	if e, _ := list.Find(v); !slices.Equal(e.Protocols, []string{"5.0"}) {
		t.Errorf("version list protocols %q, want [5.0]", e.Protocols)
	}
	want := map[string]registryjson.Package{}
	for _, pl := range platforms {
		want[pl] = originPackage(t, h.origin, "1.0.0", pl)
	}

	h.stop()
	h.origin.SetDown(http.StatusServiceUnavailable)
	h.origin.ResetHits()
	h.start(opts)
	ev, err := h.engine.Evidence(t.Context(), h.provider(), v, nil)
	if err != nil {
		t.Fatalf("Evidence after a restart, origin down: %v", err)
	}
	if n := h.origin.TotalHits(); n != 0 {
		t.Errorf("origin asked %d times after the restart, want 0", n)
	}
	if !reflect.DeepEqual(ev, first) {
		t.Errorf("evidence after a restart differs:\n got %+v\nwant %+v", ev, first)
	}
	if len(ev.Documents) != 1 {
		t.Fatalf("%d SHA256SUMS documents, want 1", len(ev.Documents))
	}
	doc := ev.Documents[0]
	if got, sent := doc.Content, rec.doc(doc.URL); len(sent) == 0 || !bytes.Equal(got, sent) {
		t.Errorf("SHA256SUMS kept %q, origin sent %q", got, sent)
	}
	if got, sent := doc.Signature, rec.doc(doc.SignatureURL); len(sent) == 0 || !bytes.Equal(got, sent) {
		t.Errorf("signature kept %x, origin sent %x", got, sent)
	}
	if want := []registryjson.GPGPublicKey{h.origin.SigningKey()}; !reflect.DeepEqual(doc.SigningKeys, want) {
		t.Errorf("signing keys %+v, want %+v", doc.SigningKeys, want)
	}
	if len(ev.Platforms) != len(platforms) {
		t.Fatalf("evidence of %d platforms, want %d", len(ev.Platforms), len(platforms))
	}
	for _, pl := range platforms {
		got, ok := ev.Package(pl)
		if !ok {
			t.Errorf("no evidence of %s", pl)
			continue
		}
		if !reflect.DeepEqual(got, want[pl]) {
			t.Errorf("%s package response rebuilt as\n%+v\nthe origin sent\n%+v", pl, got, want[pl])
		}
		pe, _ := ev.Platform(pl)
		if pe.SHA256 != h.origin.SHA256(ns, typ, "1.0.0", pl) {
			t.Errorf("%s sha256 %s, want the archive's %s", pl, pe.SHA256, h.origin.SHA256(ns, typ, "1.0.0", pl))
		}
	}
	// Only platforms asked for, in the order asked.
	some, err := h.engine.Evidence(t.Context(), h.provider(), v, []addrs.Platform{mustPlatform(t, "windows_amd64"), mustPlatform(t, "darwin_arm64")})
	if err != nil {
		t.Fatal(err)
	}
	if len(some.Platforms) != 2 || some.Platforms[0].Platform != "windows_amd64" || some.Platforms[1].Platform != "darwin_arm64" {
		t.Errorf("evidence of %+v, want windows_amd64 then darwin_arm64", some.Platforms)
	}
}

// packageRewriter changes the origin's package metadata of some platforms.
type packageRewriter struct {
	Origin
	rewrite func(pl string, pkg *discovery.Package)
}

func (r packageRewriter) Package(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (*discovery.Package, error) {
	pkg, err := r.Origin.Package(ctx, p, version, pl)
	if err != nil {
		return nil, err
	}
	c := *pkg
	r.rewrite(pl.String(), &c)
	return &c, nil
}

// One version may have several SHA256SUMS documents: each is kept with
// its signature and keys, and each platform refers to the one that
// verified it. A platform naming a document already kept with other keys
// is verified with its own keys from the kept bytes, without fetching the
// document again.
func TestEvidenceOfSeveralDocuments(t *testing.T) {
	t.Parallel()
	otherKeys := func(keys []registryjson.GPGPublicKey) []registryjson.GPGPublicKey {
		keys = slices.Clone(keys)
		keys[0].Source = "another source"
		return keys
	}
	h := newHarness(t, harnessOptions{wrapOrigin: func(o Origin) Origin {
		return packageRewriter{Origin: o, rewrite: func(pl string, pkg *discovery.Package) {
			switch pl {
			case "windows_amd64": // the same document, at another URL
				pkg.SHASumsURL += "?copy=2"
				pkg.SHASumsSignatureURL += "?copy=2"
			case "darwin_arm64":
				pkg.SigningKeys = otherKeys(pkg.SigningKeys)
			}
		}}
	}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	// One platform first, then the rest: the second fetch adds to the record.
	if _, err := h.packages("1.0.0", "linux_amd64"); err != nil {
		t.Fatal(err)
	}
	ev, err := h.engine.Evidence(t.Context(), h.provider(), mustVersion(t, "1.0.0"), nil)
	if err != nil {
		t.Fatalf("Evidence: %v", err)
	}
	if n := h.origin.Hits(fakeorigin.Shasums); n != 2 {
		t.Errorf("SHA256SUMS fetched %d times, want 2 (two URLs)", n)
	}
	if len(ev.Documents) != 3 {
		t.Fatalf("%d documents kept, want 3", len(ev.Documents))
	}
	for _, pl := range platforms {
		pe, _ := ev.Platform(pl)
		doc := ev.Documents[pe.Document]
		pkg, _ := ev.Package(pl)
		wantURL := strings.HasSuffix(doc.URL, "?copy=2")
		wantKeys := []registryjson.GPGPublicKey{h.origin.SigningKey()}
		if pl == "darwin_arm64" {
			wantKeys = otherKeys(wantKeys)
		}
		if wantURL != (pl == "windows_amd64") || pkg.SHASumsURL != doc.URL || !reflect.DeepEqual(doc.SigningKeys, wantKeys) {
			t.Errorf("%s refers to document %d (%s, keys %+v)", pl, pe.Document, doc.URL, doc.SigningKeys)
		}
		if err := verify.CheckSignature(doc.Content, doc.Signature, records.ArmoredKeys(doc.SigningKeys)); err != nil {
			t.Errorf("%s document: %v", pl, err)
		}
		if _, err := h.engine.EnsureArchive(t.Context(), h.provider(), mustVersion(t, "1.0.0"), mustPlatform(t, pl)); err != nil {
			t.Fatal(err)
		}
		if err := h.engine.Verify(t.Context(), h.provider(), mustVersion(t, "1.0.0"), mustPlatform(t, pl)); err != nil {
			t.Errorf("Verify %s: %v", pl, err)
		}
	}
}

// blobSwapper opens another cached archive in place of one, as a cache
// whose stored bytes were damaged would.
type blobSwapper struct {
	Store
	mu   sync.Mutex
	swap map[string]string
}

func (b *blobSwapper) OpenBlob(sha string) (cache.BlobReader, error) {
	b.mu.Lock()
	if other, ok := b.swap[sha]; ok {
		sha = other
	}
	b.mu.Unlock()
	return b.Store.OpenBlob(sha)
}

// Verify checks a cached archive again from the stored evidence alone,
// and refuses it when any stored piece was altered.
func TestVerifyFromStoredEvidence(t *testing.T) {
	t.Parallel()
	swapper := &blobSwapper{swap: map[string]string{}}
	h := newHarness(t, harnessOptions{wrap: func(s Store) Store { swapper.Store = s; return swapper }})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	v := mustVersion(t, "1.0.0")
	for _, pl := range []string{"linux_amd64", "darwin_arm64"} {
		if _, err := h.engine.EnsureArchive(t.Context(), h.provider(), v, mustPlatform(t, pl)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.packages("1.0.0"); err != nil { // windows_amd64: metadata only
		t.Fatal(err)
	}
	key := records.PackageKey(h.provider(), v)
	var stored records.PackageRecord
	if _, err := h.store.GetMeta(key, &stored); err != nil {
		t.Fatal(err)
	}
	// tamper stores a changed copy of the record for the duration of a case.
	tamper := func(t *testing.T, change func(rec *records.PackageRecord)) {
		var rec records.PackageRecord
		if _, err := h.store.GetMeta(key, &rec); err != nil {
			t.Fatal(err)
		}
		change(&rec)
		if err := h.store.PutMeta(key, &rec); err != nil {
			t.Fatal(err)
		}
		h.engine.memo.Forget(key)
		t.Cleanup(func() {
			if err := h.store.PutMeta(key, &stored); err != nil {
				t.Fatal(err)
			}
			h.engine.memo.Forget(key)
		})
	}
	linuxSHA := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	tests := []struct {
		name     string
		platform string
		version  string
		change   func(rec *records.PackageRecord)
		swap     bool // open darwin_arm64's archive for linux_amd64's
		reason   verify.Reason
		is       error // when not a *verify.Error
	}{
		{name: "intact", platform: "linux_amd64"},
		{name: "intact other platform", platform: "darwin_arm64"},
		{name: "tampered SHA256SUMS byte", platform: "linux_amd64", reason: verify.ReasonSignature,
			change: func(rec *records.PackageRecord) {
				doc := &rec.Documents[rec.Archives["linux_amd64"].Evidence.Document]
				doc.Content = flip(doc.Content, len(doc.Content)/2)
			}},
		{name: "tampered signature", platform: "linux_amd64", reason: verify.ReasonSignature,
			change: func(rec *records.PackageRecord) {
				doc := &rec.Documents[rec.Archives["linux_amd64"].Evidence.Document]
				doc.Signature = flip(doc.Signature, len(doc.Signature)-8)
			}},
		{name: "signing key replaced", platform: "linux_amd64", reason: verify.ReasonSignature,
			change: func(rec *records.PackageRecord) {
				doc := &rec.Documents[rec.Archives["linux_amd64"].Evidence.Document]
				doc.SigningKeys = []registryjson.GPGPublicKey{{ASCIIArmor: "not a key"}}
			}},
		{name: "shasum not the signed line", platform: "linux_amd64", reason: verify.ReasonChecksum,
			change: func(rec *records.PackageRecord) {
				a := rec.Archives["linux_amd64"]
				ev := *a.Evidence
				ev.Shasum = strings.Repeat("0", 64)
				a.Evidence = &ev
				rec.Archives["linux_amd64"] = a
			}},
		{name: "archive bytes differ", platform: "linux_amd64", swap: true, reason: verify.ReasonChecksum},
		{name: "archive not cached", platform: "windows_amd64", is: records.ErrNotCached},
		{name: "platform not cached", platform: "freebsd_amd64", is: records.ErrNotCached},
		{name: "version not cached", platform: "linux_amd64", version: "9.9.9", is: records.ErrNotCached},
		{name: "no evidence", platform: "linux_amd64", is: records.ErrNoEvidence,
			change: func(rec *records.PackageRecord) { rec.Schema = 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.change != nil {
				tamper(t, tc.change)
			}
			if tc.swap {
				swapper.mu.Lock()
				swapper.swap[linuxSHA] = h.origin.SHA256(ns, typ, "1.0.0", "darwin_arm64")
				swapper.mu.Unlock()
				t.Cleanup(func() {
					swapper.mu.Lock()
					clear(swapper.swap)
					swapper.mu.Unlock()
				})
			}
			version := "1.0.0"
			if tc.version != "" {
				version = tc.version
			}
			err := h.engine.Verify(t.Context(), h.provider(), mustVersion(t, version), mustPlatform(t, tc.platform))
			var verr *verify.Error
			switch {
			case tc.reason != "":
				if !errors.As(err, &verr) || verr.Reason != tc.reason || !errors.Is(err, verify.ErrIntegrity) {
					t.Errorf("Verify: %v, want a *verify.Error with reason %s", err, tc.reason)
				}
			case tc.is != nil:
				if !errors.Is(err, tc.is) || errors.As(err, &verr) {
					t.Errorf("Verify: %v, want %v", err, tc.is)
				}
			case err != nil:
				t.Errorf("Verify: %v, want nil", err)
			}
		})
	}
	if n := h.origin.TotalHits(); n == 0 {
		t.Fatal("the origin was never asked (the test set-up is broken)")
	}
	h.origin.ResetHits()
	if err := h.engine.Verify(t.Context(), h.provider(), v, mustPlatform(t, "linux_amd64")); err != nil {
		t.Errorf("Verify after the cases: %v", err)
	}
	if n := h.origin.TotalHits(); n != 0 {
		t.Errorf("Verify asked the origin %d times, want 0", n)
	}
}

// A changed byte in a cached SHA256SUMS document or signature, or a
// cached "packages" zh: hash that is not its signed line, is never
// handed out as evidence: records.Evidence fails with an integrity error, drops
// the record, and the next call fetches and verifies it anew.
func TestEvidenceRefusesTamperedCache(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(rec *records.PackageRecord)
	}{
		{"SHA256SUMS first byte", func(rec *records.PackageRecord) { rec.Documents[0].Content = flip(rec.Documents[0].Content, 0) }},
		{"SHA256SUMS middle byte", func(rec *records.PackageRecord) {
			rec.Documents[0].Content = flip(rec.Documents[0].Content, len(rec.Documents[0].Content)/2)
		}},
		{"SHA256SUMS last byte", func(rec *records.PackageRecord) {
			rec.Documents[0].Content = flip(rec.Documents[0].Content, len(rec.Documents[0].Content)-1)
		}},
		{"signature byte", func(rec *records.PackageRecord) {
			rec.Documents[0].Signature = flip(rec.Documents[0].Signature, len(rec.Documents[0].Signature)-8)
		}},
		{"signature first byte", func(rec *records.PackageRecord) { rec.Documents[0].Signature = flip(rec.Documents[0].Signature, 0) }},
		{"packages zh of another platform", func(rec *records.PackageRecord) {
			rec.Archives["linux_amd64"].Evidence.Packages["windows_amd64"] = registryjson.PackageHashes{
				Hashes: []string{"zh:" + strings.Repeat("ab", 32)}, PackageSize: 1}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{origin: fakeorigin.Options{PackageHashes: true}})
			h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
			v := mustVersion(t, "1.0.0")
			pls := []addrs.Platform{mustPlatform(t, "linux_amd64")}
			intact, err := h.engine.Evidence(t.Context(), h.provider(), v, pls)
			if err != nil {
				t.Fatal(err)
			}
			want := intact.Documents[0]

			key := records.PackageKey(h.provider(), v)
			var rec records.PackageRecord
			if _, err := h.store.GetMeta(key, &rec); err != nil {
				t.Fatal(err)
			}
			tc.change(&rec)
			if err := h.store.PutMeta(key, &rec); err != nil {
				t.Fatal(err)
			}
			h.engine.memo.Forget(key) // as after a restart
			h.origin.ResetHits()

			_, err = h.engine.Evidence(t.Context(), h.provider(), v, pls)
			if !errors.Is(err, verify.ErrIntegrity) {
				t.Fatalf("Evidence of a tampered record: %v; want an integrity error", err)
			}
			if _, err := h.store.GetMeta(key, &records.PackageRecord{}); !errors.Is(err, cache.ErrNotFound) {
				t.Fatalf("the tampered record is still cached: %v", err)
			}
			ev, err := h.engine.Evidence(t.Context(), h.provider(), v, pls)
			if err != nil {
				t.Fatalf("Evidence after the drop: %v", err)
			}
			if h.origin.Hits(fakeorigin.Shasums) == 0 || h.origin.Hits(fakeorigin.Signature) == 0 {
				t.Error("the dropped record was not fetched again from the origin")
			}
			// The fake origin signs every request afresh (the signature
			// differs each time); the document is the same.
			if got := ev.Documents[0]; !bytes.Equal(got.Content, want.Content) {
				t.Error("the refetched SHA256SUMS differs from the origin's")
			}
		})
	}
}

// flip returns a copy of b with the lowest bit of byte i changed.
func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x01
	return b
}

// A version cached while its publisher's key was valid is served from
// its stored record once the key has expired: the record is not dropped
// and nothing is asked of the origin (on an air-gapped mirror nothing
// could be). The record here is the one the engine stored, its
// SHA256SUMS signed two days ago by a key that expired a day ago, as
// an origin would have served it then.
func TestCachedVersionOutlivesItsKeysExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	v := mustVersion(t, "1.0.0")
	pls := []addrs.Platform{mustPlatform(t, "linux_amd64")}
	if _, err := h.engine.Evidence(t.Context(), h.provider(), v, pls); err != nil {
		t.Fatal(err)
	}
	key := records.PackageKey(h.provider(), v)
	var rec records.PackageRecord
	if _, err := h.store.GetMeta(key, &rec); err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	made, signed := now.Add(-72*time.Hour), now.Add(-48*time.Hour)
	publisher := verifytest.ExpiringKey(t, made, 48*time.Hour)
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, publisher, bytes.NewReader(rec.Documents[0].Content),
		&packet.Config{Time: func() time.Time { return signed }}); err != nil {
		t.Fatal(err)
	}
	rec.Documents[0].Signature = sig.Bytes()
	rec.Documents[0].SigningKeys = []registryjson.GPGPublicKey{{
		KeyID: publisher.PrimaryKey.KeyIdString(), ASCIIArmor: verifytest.ArmoredPublic(t, publisher)}}
	if err := h.store.PutMeta(key, &rec); err != nil {
		t.Fatal(err)
	}
	h.engine.memo.Forget(key) // as after a restart
	h.origin.ResetHits()

	if _, err := h.engine.Evidence(t.Context(), h.provider(), v, pls); err != nil {
		t.Fatalf("Evidence of a version whose key expired after it was cached: %v", err)
	}
	if _, err := h.store.GetMeta(key, &records.PackageRecord{}); err != nil {
		t.Fatalf("the record of a version whose key expired after it was cached was dropped: %v", err)
	}
	if n := h.origin.Hits(fakeorigin.Shasums); n != 0 {
		t.Errorf("the origin was asked for SHA256SUMS %d times", n)
	}
}

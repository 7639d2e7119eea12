package mirror

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// The records as the release before schema 2 stored them, under the same
// keys: {{BASE}} is the fake origin's release URL, {{SHA_os_arch}} the
// sha256 of its archives (both differ between runs).
const (
	oldVersionList = `{"schema":1,"versions":[{"version":"1.0.0","platforms":["darwin_arm64","linux_amd64","windows_amd64"]}]}`

	oldPackageRecord = `{"schema":1,"version":"1.0.0",` +
		`"sums":{"terraform-provider-random_1.0.0_darwin_arm64.zip":"{{SHA_darwin_arm64}}",` +
		`"terraform-provider-random_1.0.0_linux_amd64.zip":"{{SHA_linux_amd64}}",` +
		`"terraform-provider-random_1.0.0_windows_amd64.zip":"{{SHA_windows_amd64}}"},` +
		`"sums_urls":["{{BASE}}terraform-provider-random_1.0.0_SHA256SUMS"],` +
		`"archives":{"linux_amd64":{"filename":"terraform-provider-random_1.0.0_linux_amd64.zip",` +
		`"url":"{{BASE}}terraform-provider-random_1.0.0_linux_amd64.zip","sha256":"{{SHA_linux_amd64}}"}},` +
		`"verified_at":"2025-06-01T12:00:00Z"}`
)

// A data directory written by the release before evidence was kept still
// works: with the origin down, or offline, its records are served as
// before; with the origin up, the package record is fetched and verified
// again and gets its evidence, and the archive already cached is not
// downloaded again.
func TestOldLayoutRecords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		version string // the version list as stored
		record  string // the package record as stored
	}{
		{"schema 1", oldVersionList, oldPackageRecord},
		// Records stored before the schema field existed.
		{"no schema field", strings.Replace(oldVersionList, `"schema":1,`, "", 1), strings.Replace(oldPackageRecord, `"schema":1,`, "", 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			testOldLayout(t, tc.version, tc.record)
		})
	}
}

func testOldLayout(t *testing.T, versionJSON, recordJSON string) {
	opts := harnessOptions{cacheDir: t.TempDir()}
	h := newHarness(t, opts)
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	p, v, linux := h.provider(), mustVersion(t, "1.0.0"), mustPlatform(t, "linux_amd64")
	archiveURL := h.origin.ArchiveURL(ns, typ, "1.0.0", "linux_amd64")
	fill := []string{"{{BASE}}", archiveURL[:strings.LastIndex(archiveURL, "/")+1]}
	for _, pl := range platforms {
		fill = append(fill, "{{SHA_"+pl+"}}", h.origin.SHA256(ns, typ, "1.0.0", pl))
	}
	recordJSON = strings.NewReplacer(fill...).Replace(recordJSON)

	// The old release's data directory: its records and the archive it cached.
	zip, h1 := writeOldCache(t, h, v, versionJSON, recordJSON)

	// served checks that the old records are served as before.
	served := func(t *testing.T) {
		t.Helper()
		list, _, err := h.engine.Versions(t.Context(), p)
		if err != nil {
			t.Fatalf("Versions: %v", err)
		}
		if e, ok := list.Find(v); !ok || !slices.Equal(e.Platforms, platforms) {
			t.Errorf("version list %+v, want 1.0.0 for %v", list.Versions, platforms)
		}
		pkg, err := h.packages("1.0.0", "linux_amd64")
		if err != nil {
			t.Fatalf("Package: %v", err)
		}
		if len(pkg.Archives) != 1 || pkg.Archives[0].SHA256 != h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64") || pkg.Archives[0].H1 != h1 {
			t.Errorf("Package: %+v, want linux_amd64 with the cached archive's hashes", pkg.Archives)
		}
		got := h.read(t.Context(), "1.0.0", "linux_amd64")
		if got.err != nil || got.source != records.Hit || !bytes.Equal(got.body, zip) {
			t.Errorf("archive: source %v, %d bytes, error %v; want the cached archive", got.source, len(got.body), got.err)
		}
	}
	storedSchema := func(t *testing.T) int {
		t.Helper()
		var rec records.PackageRecord
		if _, err := h.store.GetMeta(records.PackageKey(p, v), &rec); err != nil {
			t.Fatal(err)
		}
		return rec.Schema
	}

	t.Run("origin down", func(t *testing.T) {
		h.stop()
		h.origin.SetDown(http.StatusServiceUnavailable)
		h.start(opts)
		served(t)
		if _, err := h.engine.Evidence(t.Context(), p, v, []addrs.Platform{linux}); err == nil {
			t.Error("Evidence without the origin: no error")
		}
		if err := h.engine.Verify(t.Context(), p, v, linux); !errors.Is(err, records.ErrNoEvidence) {
			t.Errorf("Verify: %v, want ErrNoEvidence", err)
		}
		if n := h.origin.Hits(fakeorigin.Archive); n != 0 {
			t.Errorf("archive requested %d times, want 0", n)
		}
	})

	t.Run("offline", func(t *testing.T) {
		h.stop()
		h.origin.ResetHits()
		offline := opts
		offline.cfg.Offline = true
		h.start(offline)
		served(t)
		_, err := h.engine.Evidence(t.Context(), p, v, []addrs.Platform{linux})
		if !errors.Is(err, records.ErrOffline) || !errors.Is(err, records.ErrNoEvidence) {
			t.Errorf("Evidence offline: %v, want ErrOffline and ErrNoEvidence", err)
		}
		if n := h.origin.TotalHits(); n != 0 {
			t.Errorf("origin asked %d times offline, want 0", n)
		}
		if s := storedSchema(t); s >= records.EvidenceSchema {
			t.Errorf("stored record has schema %d offline, want the old one", s)
		}
	})

	t.Run("origin up", func(t *testing.T) {
		h.stop()
		h.origin.SetDown(0)
		h.origin.ResetHits()
		h.start(opts)
		served(t)
		if s := storedSchema(t); s != records.Schema {
			t.Errorf("stored record has schema %d, want %d", s, records.Schema)
		}
		if n := h.origin.Hits(fakeorigin.Archive); n != 0 {
			t.Errorf("archive downloaded %d times, want 0 (it was cached)", n)
		}
		if n := h.origin.Hits(fakeorigin.Download); n != 1 {
			t.Errorf("package metadata fetched %d times, want 1 (the platform the old record had)", n)
		}
		if err := h.engine.Verify(t.Context(), p, v, linux); err != nil {
			t.Errorf("Verify: %v", err)
		}
		ev, err := h.engine.Evidence(t.Context(), p, v, []addrs.Platform{linux})
		if err != nil {
			t.Fatalf("Evidence: %v", err)
		}
		if got, ok := ev.Package("linux_amd64"); !ok || !reflect.DeepEqual(got, originPackage(t, h.origin, "1.0.0", "linux_amd64")) {
			t.Errorf("evidence of linux_amd64: %+v", got)
		}
		list, st, err := h.engine.Versions(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if e, _ := list.Find(v); st.Stale || !slices.Equal(e.Protocols, []string{"5.0"}) {
			t.Errorf("version list (stale %v) protocols %q, want refreshed with [5.0]", st.Stale, e.Protocols)
		}
		cached := 0
		err = h.engine.ListCachedAfter("", "", func(cv CachedVersion) error {
			cached++
			if !cv.HasEvidence {
				t.Errorf("ListCachedAfter: %s %s has no evidence", cv.Provider, cv.Version)
			}
			return nil
		})
		if err != nil || cached != 1 {
			t.Errorf("ListCachedAfter: %d versions, %v", cached, err)
		}
	})
}

// A package record as the release before the signed-names rule stored it
// (schema 2, with its evidence): the origin's SHA256SUMS with its
// signature and key, and the package metadata of one platform. {{SUMS}}
// and {{SIG}} are the origin's SHA256SUMS and signature (base64), {{KEY}}
// its signing key (JSON-escaped), {{BASE}} its release URL, {{SHA}} the
// linux_amd64 archive's sha256, {{VERSION}} the version it is stored as.
const schema2PackageRecord = `{"schema":2,"version":"{{VERSION}}",` +
	`"sums":{"terraform-provider-random_1.0.0_darwin_arm64.zip":"{{SHA_darwin_arm64}}",` +
	`"terraform-provider-random_1.0.0_linux_amd64.zip":"{{SHA_linux_amd64}}",` +
	`"terraform-provider-random_1.0.0_manifest.json":"{{SHA_manifest}}",` +
	`"terraform-provider-random_1.0.0_windows_amd64.zip":"{{SHA_windows_amd64}}"},` +
	`"documents":[{"url":"{{BASE}}terraform-provider-random_1.0.0_SHA256SUMS",` +
	`"signature_url":"{{BASE}}terraform-provider-random_1.0.0_SHA256SUMS.sig",` +
	`"content":"{{SUMS}}","signature":"{{SIG}}",` +
	`"signing_keys":[{"key_id":"{{KEYID}}","ascii_armor":{{KEY}},"trust_signature":"","source":"","source_url":""}]}],` +
	`"archives":{"linux_amd64":{"filename":"terraform-provider-random_1.0.0_linux_amd64.zip",` +
	`"url":"{{BASE}}terraform-provider-random_1.0.0_linux_amd64.zip","sha256":"{{SHA_linux_amd64}}",` +
	`"evidence":{"protocols":["5.0"],"os":"linux","arch":"amd64","shasum":"{{SHA_linux_amd64}}","document":0}}},` +
	`"verified_at":"2026-01-10T12:00:00Z"}`

// Names are checked again on records stored before the rule: a record the
// earlier release stored from a real registry's answer (whose SHA256SUMS
// lists the release's manifest beside the archives) passes `cache verify`
// and is served through the registry protocol as before; the same signed
// files stored as another version, as that release's import let a bundle
// relabel them, are found damaged, for their name.
func TestRecordsOfEarlierReleasesRecheckedForNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stored string        // the version the record is stored as
		reason verify.Reason // "": intact
	}{
		{name: "the signed version", stored: "1.0.0"},
		{name: "relabeled as another version", stored: "9.9.9", reason: verify.ReasonName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{origin: fakeorigin.Options{ReleaseManifest: true}})
			h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
			p, v := h.provider(), mustVersion(t, tc.stored)
			archiveURL := h.origin.ArchiveURL(ns, typ, "1.0.0", "linux_amd64")
			base := archiveURL[:strings.LastIndex(archiveURL, "/")+1]
			sums := fetchBody(t, h, base+"terraform-provider-random_1.0.0_SHA256SUMS")
			sig := fetchBody(t, h, base+"terraform-provider-random_1.0.0_SHA256SUMS.sig")
			parsed, err := verify.ParseSHA256SUMS(sums)
			if err != nil {
				t.Fatal(err)
			}
			key, _ := json.Marshal(h.origin.ArmoredPublicKey())
			fill := []string{"{{BASE}}", base, "{{VERSION}}", tc.stored, "{{KEYID}}", h.origin.KeyID(), "{{KEY}}", string(key),
				"{{SUMS}}", base64.StdEncoding.EncodeToString(sums), "{{SIG}}", base64.StdEncoding.EncodeToString(sig),
				"{{SHA_manifest}}", parsed["terraform-provider-random_1.0.0_manifest.json"]}
			for _, pl := range platforms {
				fill = append(fill, "{{SHA_"+pl+"}}", h.origin.SHA256(ns, typ, "1.0.0", pl))
			}
			record := strings.NewReplacer(fill...).Replace(schema2PackageRecord)
			list := `{"schema":2,"versions":[{"version":"` + tc.stored + `","protocols":["5.0"],"platforms":["linux_amd64"]}]}`
			writeOldCache(t, h, v, list, record)
			h.origin.SetDown(http.StatusServiceUnavailable) // what is checked is the cache's alone

			var checks []cachecheck.Result
			if err := h.engine.CacheChecker().VerifyCache(t.Context(), func(c cachecheck.Result) { checks = append(checks, c) }); err != nil {
				t.Fatal(err)
			}
			if len(checks) != 1 || checks[0].By != cachecheck.CheckedEvidence || checks[0].Version != tc.stored || checks[0].Reason != string(tc.reason) {
				t.Fatalf("cache verify: %+v, want %s checked by its evidence with reason %q", checks, tc.stored, tc.reason)
			}
			_, err = h.engine.Evidence(t.Context(), p, v, []addrs.Platform{mustPlatform(t, "linux_amd64")})
			if tc.reason == "" {
				if err != nil || checks[0].Problem != "" {
					t.Errorf("a good record: cache verify says %q; Evidence: %v", checks[0].Problem, err)
				}
				return
			}
			var verr *verify.Error
			if !errors.As(err, &verr) || verr.Reason != tc.reason {
				t.Errorf("Evidence of the relabeled record: %v, want a %s failure", err, tc.reason)
			}
			if !strings.Contains(checks[0].Problem, "not of version "+tc.stored) {
				t.Errorf("cache verify says %q, want why", checks[0].Problem)
			}
		})
	}
}

// fetchBody GETs url from h's origin.
func fetchBody(t *testing.T, h *harness, url string) []byte {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.origin.CertPool()}}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return body
}

// writeOldCache writes what an earlier release kept of the test
// provider: its version list, and the package record of v, as given, and
// the linux_amd64 archive of 1.0.0 it cached, which it returns with its
// h1: hash.
func writeOldCache(t *testing.T, h *harness, v versions.Version, listJSON, recordJSON string) (zip []byte, h1 string) {
	t.Helper()
	p := h.provider()
	if err := h.store.PutMeta(records.VersionsKey(p), json.RawMessage(listJSON)); err != nil {
		t.Fatal(err)
	}
	if err := h.store.PutMeta(records.PackageKey(p, v), json.RawMessage(recordJSON)); err != nil {
		t.Fatal(err)
	}
	zip = h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	h1, err := verify.H1(bytes.NewReader(zip), int64(len(zip)))
	if err != nil {
		t.Fatal(err)
	}
	w, err := h.store.NewBlobWriter(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(zip)
	if _, err := w.Commit(h1); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return zip, h1
}

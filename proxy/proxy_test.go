package proxy

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/verify"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

var update = flag.Bool("update", false, "rewrite golden files")

const (
	ns  = "hashicorp"
	typ = "random"
)

var platforms = []string{"darwin_arm64", "linux_amd64", "windows_amd64"}

func providerPath(file string) string { return "/" + originHost + "/" + ns + "/" + typ + "/" + file }

func archivePath(version, platform string) string {
	return providerPath("terraform-provider-" + typ + "_" + version + "_" + platform + ".zip")
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./proxy -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file:\n got: %s\nwant: %s", name, got, want)
	}
}

func TestIndexTranslation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.1.0", "2.0.0-beta1"}, platforms)

	r := h.get(providerPath("index.json"))
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var doc map[string]map[string]map[string]any
	r.json(t, &doc)
	golden(t, "index.json", r.body)

	// A second request within the TTL is answered from the cache.
	h.get(providerPath("index.json"))
	if n := h.origin.Hits(fakeorigin.Versions); n != 1 {
		t.Errorf("origin versions hits = %d, want 1", n)
	}
}

func TestVersionTranslation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)

	r := h.get(providerPath("1.0.0.json"))
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var doc versionDocument
	r.json(t, &doc)
	if len(doc.Archives) != len(platforms) {
		t.Fatalf("archives %v, want one per platform %v", doc.Archives, platforms)
	}
	for _, pl := range platforms {
		a := doc.Archives[pl]
		want := "zh:" + h.origin.SHA256(ns, typ, "1.0.0", pl)
		if len(a.Hashes) != 1 || a.Hashes[0] != want {
			t.Errorf("%s hashes %v, want [%s] before the archive is cached", pl, a.Hashes, want)
		}
	}
	golden(t, "version-uncached.json", r.body)

	// Once an archive is cached its h1: hash is listed too.
	ar := h.get("/" + originHost + "/" + ns + "/" + typ + "/" + doc.Archives["linux_amd64"].URL)
	if ar.status != http.StatusOK || ar.err != nil {
		t.Fatalf("archive: status %d err %v", ar.status, ar.err)
	}
	// The archive is committed (and its h1 known) just after its last byte went out.
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	r = h.get(providerPath("1.0.0.json"))
	r.json(t, &doc)
	data := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	wantH1, err := verify.H1(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	got := doc.Archives["linux_amd64"].Hashes
	if len(got) != 2 || got[0] != wantH1 || !strings.HasPrefix(got[1], "zh:") {
		t.Errorf("hashes after caching %v, want [%s zh:...]", got, wantH1)
	}
	golden(t, "version-cached.json", r.body)
}

func TestPlatformFilter(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{engine: mirror.Config{Platforms: []string{"linux_amd64"}}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)

	var doc versionDocument
	h.get(providerPath("1.0.0.json")).json(t, &doc)
	if len(doc.Archives) != 1 || doc.Archives["linux_amd64"].URL == "" {
		t.Fatalf("archives %v, want only linux_amd64", doc.Archives)
	}
	if n := h.origin.Hits(fakeorigin.Download); n != 1 {
		t.Errorf("package metadata requests = %d, want 1 (only the served platform)", n)
	}
	if r := h.get(archivePath("1.0.0", "darwin_arm64")); r.status != http.StatusNotFound {
		t.Errorf("archive of a filtered platform: status %d, want 404", r.status)
	}
}

func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)

	tests := []struct {
		name       string
		method     string
		path       string
		setup      func()
		wantStatus int
		wantInBody string
	}{
		{name: "unknown provider", path: "/" + originHost + "/" + ns + "/nope/index.json", wantStatus: 404, wantInBody: "not found"},
		{name: "host not allowed", path: "/evil.example.com/a/b/index.json", wantStatus: 404, wantInBody: "not allowed"},
		{name: "unknown version", path: providerPath("9.9.9.json"), wantStatus: 404, wantInBody: "no version"},
		{name: "non-canonical version", path: providerPath("1.0.json"), wantStatus: 400, wantInBody: "canonical"},
		{name: "bad platform", path: archivePath("1.0.0", "linux_AMD64"), wantStatus: 400, wantInBody: "platform"},
		{name: "platform not offered", path: archivePath("1.0.0", "plan9_mips"), wantStatus: 404, wantInBody: "no package"},
		{name: "encoded slash", path: "/" + originHost + "/a%2Fb/c/index.json", wantStatus: 400, wantInBody: "forbidden"},
		{name: "unknown file", path: providerPath("README.md"), wantStatus: 404, wantInBody: "unknown file"},
		{name: "not a mirror path", path: "/foo", wantStatus: 404, wantInBody: "not a provider network mirror path"},
		{name: "post", method: http.MethodPost, path: providerPath("index.json"), wantStatus: 405, wantInBody: "method"},
		{name: "origin failing", path: "/" + originHost + "/other/thing/index.json",
			setup: func() { h.origin.SetKindStatus(fakeorigin.Versions, 500) }, wantStatus: 502, wantInBody: originHost},
		{name: "origin rate limiting", path: "/" + originHost + "/other/thing2/index.json",
			setup: func() { h.origin.SetKindStatus(fakeorigin.Versions, 429) }, wantStatus: 503, wantInBody: originHost},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
				defer h.origin.SetKindStatus(fakeorigin.Versions, 0)
			}
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			r := h.do(context.Background(), method, tc.path)
			if r.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.status, tc.wantStatus, r.body)
			}
			var body errorBody
			r.json(t, &body)
			if len(body.Errors) != 1 || !strings.Contains(body.Errors[0], tc.wantInBody) {
				t.Errorf("errors %q do not mention %q", body.Errors, tc.wantInBody)
			}
		})
	}
	if n := h.origin.Hits(fakeorigin.Discovery); n > 1 {
		t.Errorf("discovery requests = %d, want at most 1", n)
	}
}

func TestNotAllowedHostMakesNoConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{engine: mirror.Config{AllowedOrigins: []string{"registry.opentofu.org"}}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	for _, path := range []string{providerPath("index.json"), providerPath("1.0.0.json"), archivePath("1.0.0", "linux_amd64")} {
		if r := h.get(path); r.status != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, r.status)
		}
	}
	if n := h.origin.TotalHits(); n != 0 {
		t.Errorf("origin saw %d requests for a host that is not allowed", n)
	}
}

func TestVerificationFailuresCacheNothing(t *testing.T) {
	t.Parallel()
	const version, pl = "1.0.0", "linux_amd64"
	tests := []struct {
		name   string
		inject func(o *fakeorigin.Origin)
		reason verify.Reason
	}{
		{"wrong signing key", func(o *fakeorigin.Origin) { o.SetWrongSigningKey(true) }, verify.ReasonSignature},
		// A key too costly to read (over a second of CPU for go-crypto
		// alone) is refused by its size, as an unreadable key is.
		{"signing key too large to read", func(o *fakeorigin.Origin) {
			o.SetSigningKeys(verifytest.HostileDSAKey(16384))
		}, verify.ReasonSignature},
		{"more signing keys than are read", func(o *fakeorigin.Origin) {
			keys := make([]string, verify.MaxSigningKeys+1)
			for i := range keys {
				keys[i] = o.ArmoredPublicKey()
			}
			o.SetSigningKeys(keys...)
		}, verify.ReasonSignature},
		{"checksum missing from SHA256SUMS", func(o *fakeorigin.Origin) { o.OmitFromSums(ns, typ, version, pl, true) }, verify.ReasonMissingChecksum},
		{"registry shasum disagrees with SHA256SUMS", func(o *fakeorigin.Origin) {
			o.SetShasumOverride(ns, typ, version, pl, strings.Repeat("ab", 32))
		}, verify.ReasonChecksum},
		// The answer gives a signed release of another platform or
		// version: its archive's name is not the one asked for.
		{"package answer of another platform", func(o *fakeorigin.Origin) {
			o.SetAnswerOf(ns, typ, version, pl, version, "darwin_arm64")
		}, verify.ReasonName},
		{"package answer of another version", func(o *fakeorigin.Origin) {
			o.SetAnswerOf(ns, typ, version, pl, "0.9.0", pl)
		}, verify.ReasonName},
	}
	// What the error says of a refused key, by case.
	said := map[string]string{
		"signing key too large to read":   "prime P is 16384 bits, more than the 3072 read: too large to verify with",
		"more signing keys than are read": "signing keys are 17, more than the 16 read",
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{engine: mirror.Config{Platforms: []string{pl}}})
			h.origin.AddProvider(ns, typ, []string{"0.9.0", version}, platforms)
			tc.inject(h.origin)

			for _, path := range []string{providerPath(version + ".json"), archivePath(version, pl)} {
				r := h.get(path)
				if r.status != http.StatusBadGateway {
					t.Fatalf("%s: status %d, want 502: %s", path, r.status, r.body)
				}
				var body errorBody
				r.json(t, &body)
				if !strings.Contains(body.Errors[0], "integrity") || !strings.Contains(body.Errors[0], string(tc.reason)) {
					t.Errorf("error %q does not say the integrity check failed (%s)", body.Errors[0], tc.reason)
				}
				if say := said[tc.name]; !strings.Contains(body.Errors[0], say) {
					t.Errorf("error %q does not say %q", body.Errors[0], say)
				}
			}
			if n := h.origin.Hits(fakeorigin.Archive); n != 0 {
				t.Errorf("archive downloaded %d times although its metadata failed verification", n)
			}
			if err := h.engine.ListCachedAfter("", "", func(cv mirror.CachedVersion) error {
				return fmt.Errorf("%s %s", cv.Provider, cv.Version)
			}); err != nil {
				t.Errorf("package metadata was cached despite failing verification: %v", err)
			}
		})
	}
}

func TestArchivePullThrough(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{SeparateDownloadHost: true}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	want := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")

	first := h.get(archivePath("1.0.0", "linux_amd64"))
	if first.status != 200 || first.err != nil || !bytes.Equal(first.body, want) {
		t.Fatalf("cold download: status %d err %v, %d bytes (want %d)", first.status, first.err, len(first.body), len(want))
	}
	if first.header.Get("Content-Type") != "application/zip" || first.header.Get("X-Tfmirror-Cache") != "miss" {
		t.Errorf("cold headers %v", first.header)
	}
	h.waitCommitted(sha)

	second := h.get(archivePath("1.0.0", "linux_amd64"))
	if !bytes.Equal(second.body, want) || second.header.Get("X-Tfmirror-Cache") != "hit" {
		t.Fatalf("warm download differs or was not a hit: %v", second.header)
	}
	if etag := second.header.Get("ETag"); etag != `"`+sha+`"` {
		t.Errorf("ETag %q", etag)
	}
	if n := h.origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 1 {
		t.Errorf("origin archive fetches = %d, want 1", n)
	}

	ranged := h.get(archivePath("1.0.0", "linux_amd64"), "Range", "bytes=10-19")
	if ranged.status != http.StatusPartialContent || !bytes.Equal(ranged.body, want[10:20]) {
		t.Errorf("range request: status %d body %q", ranged.status, ranged.body)
	}
	cond := h.get(archivePath("1.0.0", "linux_amd64"), "If-None-Match", `"`+sha+`"`)
	if cond.status != http.StatusNotModified {
		t.Errorf("conditional request: status %d, want 304", cond.status)
	}
}

func TestTamperedArchiveIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.TamperArchive(ns, typ, "1.0.0", "linux_amd64", true)
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	want := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")

	r := h.get(archivePath("1.0.0", "linux_amd64"))
	if r.status == http.StatusOK && r.err == nil {
		t.Fatalf("a tampered archive was delivered whole (%d bytes)", len(r.body))
	}
	h.waitIdle()
	if _, err := h.store.StatBlob(sha); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("tampered archive in the cache: %v", err)
	}

	// Once the origin serves the right bytes, the next request fetches again.
	h.origin.TamperArchive(ns, typ, "1.0.0", "linux_amd64", false)
	r = h.get(archivePath("1.0.0", "linux_amd64"))
	if r.status != 200 || !bytes.Equal(r.body, want) {
		t.Fatalf("after the origin recovered: status %d, %d bytes", r.status, len(r.body))
	}
	if n := h.origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 2 {
		t.Errorf("origin archive fetches = %d, want 2", n)
	}
}

// A HEAD of an archive not cached yet, which the origin serves
// tampered, is answered 502 once the download is refused, naming no
// archive; it had been answered 200 with the archive's length and ETag
// at once, before any byte was read, which a cache or a script checking
// for the archive took as final. Once the origin serves the right bytes,
// a HEAD is answered 200 with their length, and the archive is cached.
func TestHeadOfARefusedArchive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.SetArchiveBytes(ns, typ, "1.0.0", "linux_amd64", enginetest.ZipOfSize(t, typ, 256<<10, 7))
	want := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	h.origin.TamperArchive(ns, typ, "1.0.0", "linux_amd64", true)
	h.origin.SetArchiveRate(512 << 10) // half a second: the HEAD comes while it runs

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	head := h.do(ctx, http.MethodHead, archivePath("1.0.0", "linux_amd64"))
	if head.status != http.StatusBadGateway || head.header.Get("Etag") != "" {
		t.Errorf("HEAD of a tampered archive: status %d, ETag %q, want 502 and none", head.status, head.header.Get("Etag"))
	}

	h.origin.TamperArchive(ns, typ, "1.0.0", "linux_amd64", false)
	head = h.do(ctx, http.MethodHead, archivePath("1.0.0", "linux_amd64"))
	if head.status != http.StatusOK || head.header.Get("Content-Length") != strconv.Itoa(len(want)) {
		t.Errorf("HEAD once the origin recovered: status %d, Content-Length %q, want 200 and %d", head.status, head.header.Get("Content-Length"), len(want))
	}
	h.waitIdle()
	if r := h.get(archivePath("1.0.0", "linux_amd64")); r.status != http.StatusOK || r.header.Get("X-Tfmirror-Cache") != "hit" || !bytes.Equal(r.body, want) {
		t.Errorf("GET after the HEAD: status %d, cache %q", r.status, r.header.Get("X-Tfmirror-Cache"))
	}
}

func TestFirstBytesBeforeOriginFinishes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{engine: mirror.Config{HoldBack: 1024}, origin: fakeorigin.Options{ArchiveSize: 1 << 20}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.get(providerPath("1.0.0.json"))
	want := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")

	release := h.origin.GateArchives()
	defer release()
	req, _ := http.NewRequest(http.MethodGet, h.http.URL+archivePath("1.0.0", "linux_amd64"), nil)
	resp, err := h.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The origin has sent half and is blocked; the client must already
	// be able to read bytes.
	buf := make([]byte, 4096)
	n, err := io.ReadFull(resp.Body, buf)
	if err != nil {
		t.Fatalf("reading first bytes while the origin is mid-download: %v", err)
	}
	if !bytes.Equal(buf[:n], want[:n]) {
		t.Fatal("first bytes differ from the origin's")
	}
	release()
	rest, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(append(buf[:n:n], rest...), want) {
		t.Fatalf("full body: err %v, %d bytes", err, n+len(rest))
	}
}

func TestClientDisconnectDoesNotCancelFetch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{ArchiveSize: 1 << 20}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	h.get(providerPath("1.0.0.json"))

	release := h.origin.GateArchives()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan response)
	go func() { done <- h.do(ctx, http.MethodGet, archivePath("1.0.0", "linux_amd64")) }()
	h.origin.WaitArchiveStarted()
	cancel()
	<-done
	release()
	h.waitCommitted(sha)
	if n := h.origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 1 {
		t.Errorf("origin archive fetches = %d, want 1", n)
	}
}

func TestStaleVersionListWhenOriginDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{engine: mirror.Config{VersionsTTL: 1}}) // every request refreshes
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	if r := h.get(providerPath("index.json")); r.status != 200 {
		t.Fatalf("warm-up: %d", r.status)
	}
	h.origin.SetDown(http.StatusServiceUnavailable)
	r := h.get(providerPath("index.json"))
	if r.status != 200 || r.header.Get("X-Tfmirror-Stale") == "" {
		t.Fatalf("origin down: status %d, stale header %q", r.status, r.header.Get("X-Tfmirror-Stale"))
	}
	// An explicit 404 from the origin is believed.
	h.origin.SetDown(0)
	h.origin.SetKindStatus(fakeorigin.Versions, http.StatusNotFound)
	if r := h.get(providerPath("index.json")); r.status != 404 {
		t.Fatalf("origin says not found: status %d, want 404", r.status)
	}
}

func TestCacheSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := harnessOptions{cacheDir: dir}
	h := newHarness(t, opts)
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	want := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	h.get(providerPath("index.json"))
	h.get(providerPath("1.0.0.json"))
	h.get(archivePath("1.0.0", "linux_amd64"))
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	h.stop()

	h.origin.SetDown(http.StatusServiceUnavailable)
	h.start(opts)
	if r := h.get(providerPath("index.json")); r.status != 200 {
		t.Errorf("index.json after restart with the origin down: %d", r.status)
	}
	var doc versionDocument
	h.get(providerPath("1.0.0.json")).json(t, &doc)
	if len(doc.Archives["linux_amd64"].Hashes) != 2 {
		t.Errorf("VERSION.json after restart lacks the h1 hash: %v", doc.Archives["linux_amd64"])
	}
	r := h.get(archivePath("1.0.0", "linux_amd64"))
	if r.status != 200 || !bytes.Equal(r.body, want) {
		t.Errorf("archive after restart: status %d", r.status)
	}
}

package proxy

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// registryPath is a path of the registry protocol for the test provider.
func registryPath(rest string) string {
	return "/" + RegistryPath(originHost) + ns + "/" + typ + "/" + rest
}

// originGet fetches an origin URL directly, as a client without the
// mirror would.
func originGet(t *testing.T, o *fakeorigin.Origin, u string) []byte {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: o.CertPool()}}}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("origin GET %s: %d %v", u, resp.StatusCode, err)
	}
	return body
}

// resolve resolves ref against the mirror path base, giving a path.
func resolve(t *testing.T, base, ref string) string {
	t.Helper()
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	r, err := url.Parse(ref)
	if err != nil {
		t.Fatal(err)
	}
	return b.ResolveReference(r).RequestURI()
}

// The download answer is the origin's but for the three URLs, which lead
// to the origin's SHA256SUMS, signature and archive, byte for byte (with
// OpenTofu's "packages", which OpenTofu records in the lock file); the
// versions answer has the origin's protocols and the served platforms.
func TestRegistryPassesTheOriginsAnswersThrough(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{SeparateDownloadHost: true, PackageHashes: true},
		engine: mirror.Config{Platforms: []string{"linux_amd64", "darwin_arm64"}}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "1.1.0"}, platforms)

	var versions registryjson.Versions
	h.get(registryPath("versions")).json(t, &versions)
	var originVersions registryjson.Versions
	if err := json.Unmarshal(originGet(t, h.origin, h.origin.URL+"/v1/providers/"+ns+"/"+typ+"/versions"), &originVersions); err != nil {
		t.Fatal(err)
	}
	if len(versions.Versions) != len(originVersions.Versions) {
		t.Fatalf("versions %+v, origin's %+v", versions, originVersions)
	}
	for i, v := range versions.Versions {
		ov := originVersions.Versions[i]
		if v.Version != ov.Version || !reflect.DeepEqual(v.Protocols, ov.Protocols) {
			t.Errorf("version %+v, origin's %+v", v, ov)
		}
		want := []registryjson.Platform{{OS: "darwin", Arch: "arm64"}, {OS: "linux", Arch: "amd64"}}
		if !reflect.DeepEqual(v.Platforms, want) {
			t.Errorf("version %s platforms %v, want the served %v", v.Version, v.Platforms, want)
		}
	}

	path := registryPath("1.0.0/download/linux/amd64")
	r := h.get(path)
	var got registryjson.Package
	r.json(t, &got)
	if r.header.Get("ETag") == "" || r.header.Get("Cache-Control") != h.server.documentCacheControl[0] {
		t.Errorf("download answer headers %v", r.header)
	}
	var want registryjson.Package
	if err := json.Unmarshal(originGet(t, h.origin, h.origin.URL+"/v1/providers/"+ns+"/"+typ+"/1.0.0/download/linux/amd64"), &want); err != nil {
		t.Fatal(err)
	}
	// The fake origin signs afresh on every request: the signature the
	// mirror verified and kept is the one to serve.
	v, err := addrs.ParseSemver("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	p := addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	ev, err := h.engine.Evidence(t.Context(), p, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		got, origin string
		want        []byte
	}{
		{got.DownloadURL, want.DownloadURL, originGet(t, h.origin, want.DownloadURL)},
		{got.SHASumsURL, want.SHASumsURL, originGet(t, h.origin, want.SHASumsURL)},
		{got.SHASumsSignatureURL, want.SHASumsSignatureURL, ev.Documents[0].Signature},
	} {
		if body := h.get(resolve(t, path, f.got)); body.status != 200 || !bytes.Equal(body.body, f.want) {
			t.Errorf("%s (resolved from %s): status %d, not the bytes of the origin's %s", resolve(t, path, f.got), f.got, body.status, f.origin)
		}
	}
	if !bytes.Equal(ev.Documents[0].Content, originGet(t, h.origin, want.SHASumsURL)) {
		t.Fatal("the kept SHA256SUMS is not the origin's")
	}
	if want.SigningKeys.GPGPublicKeys[0].TrustSignature == "" && want.SigningKeys.GPGPublicKeys[0].Source == "" {
		t.Fatal("the origin's signing key has neither trust_signature nor source: the test proves little")
	}
	if len(want.Packages) != len(platforms) {
		t.Fatalf("the origin's answer has packages %v, want one per platform: the test proves little", want.Packages)
	}
	got.DownloadURL, got.SHASumsURL, got.SHASumsSignatureURL = want.DownloadURL, want.SHASumsURL, want.SHASumsSignatureURL
	if !reflect.DeepEqual(got, want) {
		t.Errorf("download answer but for the URLs\n%+v\nthe origin's\n%+v", got, want)
	}

	// The SHA256SUMS answer supports ETag revalidation and Range.
	sums := resolve(t, path, mustDecode(t, r.body).SHASumsURL)
	first := h.get(sums)
	if ct := first.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("SHA256SUMS Content-Type %q", ct)
	}
	if again := h.get(sums, "If-None-Match", first.header.Get("ETag")); again.status != http.StatusNotModified {
		t.Errorf("SHA256SUMS revalidation: status %d, want 304", again.status)
	}
	if part := h.get(sums, "Range", "bytes=0-9"); part.status != http.StatusPartialContent || !bytes.Equal(part.body, first.body[:10]) {
		t.Errorf("SHA256SUMS range: status %d, %q", part.status, part.body)
	}
}

func mustDecode(t *testing.T, body []byte) registryjson.Package {
	t.Helper()
	var p registryjson.Package
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// 404 only for what the origin says does not exist; origin trouble is 5xx.
func TestRegistryErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	tests := []struct {
		name   string
		path   string
		status int
	}{
		{"unknown provider", "/" + RegistryPath(originHost) + ns + "/nothing/versions", 404},
		{"unknown version", registryPath("9.9.9/download/linux/amd64"), 404},
		{"unknown platform", registryPath("1.0.0/download/plan9/amd64"), 404},
		{"platform's SHA256SUMS unknown", registryPath("1.0.0/download/plan9/amd64/SHA256SUMS"), 404},
		{"unknown file", registryPath("1.0.0/download/linux/amd64/README"), 404},
		{"origin not allowed", "/" + RegistryPath("example.com") + ns + "/" + typ + "/versions", 404},
		{"non-canonical version", registryPath("1.0/download/linux/amd64"), 400},
		{"underscore in os", registryPath("1.0.0/download/linux_x/amd64"), 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.get(tc.path)
			var body errorBody
			r.json(t, &body)
			if r.status != tc.status || len(body.Errors) != 1 {
				t.Errorf("status %d %q, want %d", r.status, body.Errors, tc.status)
			}
		})
	}

	h.origin.AddProvider(ns, "cold", []string{"1.0.0"}, []string{"linux_amd64"})
	h.origin.SetDown(http.StatusBadGateway)
	for _, path := range []string{"/" + RegistryPath(originHost) + ns + "/cold/versions", registryPath("1.0.0/download/linux/amd64")} {
		if r := h.get(path); r.status != http.StatusBadGateway {
			t.Errorf("%s with the origin down and nothing cached: status %d, want 502", path, r.status)
		}
	}
}

// A changed byte in a cached SHA256SUMS or signature is never served: the
// mirror answers 502 and fetches the record anew on the next request.
func TestRegistryRefusesTamperedEvidence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := newHarness(t, harnessOptions{cacheDir: dir})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	sumsPath := registryPath("1.0.0/download/linux/amd64/SHA256SUMS")
	intact := h.get(sumsPath)
	if intact.status != 200 {
		t.Fatalf("SHA256SUMS: %d %s", intact.status, intact.body)
	}
	for _, file := range []string{"SHA256SUMS", "SHA256SUMS.sig"} {
		t.Run(file, func(t *testing.T) {
			h.stop()
			store, err := cache.Open(cache.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			key := "package/" + originHost + "/" + ns + "/" + typ + "/1.0.0"
			var rec records.PackageRecord
			if _, err := store.GetMeta(key, &rec); err != nil {
				t.Fatal(err)
			}
			doc := &rec.Documents[0]
			target := &doc.Content
			if file == "SHA256SUMS.sig" {
				target = &doc.Signature
			}
			b := bytes.Clone(*target)
			b[len(b)/2] ^= 0x20
			*target = b
			if err := store.PutMeta(key, &rec); err != nil {
				t.Fatal(err)
			}
			store.Close()
			h.start(harnessOptions{cacheDir: dir})

			for _, f := range []string{"SHA256SUMS", "SHA256SUMS.sig", ""} {
				path := strings.TrimSuffix(registryPath("1.0.0/download/linux/amd64/"+f), "/")
				r := h.get(path)
				if r.status == 200 && (bytes.Equal(r.body, doc.Content) || bytes.Equal(r.body, doc.Signature)) {
					t.Fatalf("%s served the tampered bytes", path)
				}
				if f == "SHA256SUMS" && r.status != http.StatusBadGateway {
					t.Fatalf("%s of a tampered record: status %d, want 502", path, r.status)
				}
			}
			// Fetched anew: the origin's bytes again.
			if r := h.get(sumsPath); r.status != 200 || !bytes.Equal(r.body, intact.body) {
				t.Errorf("SHA256SUMS after the refusal: %d, not the origin's", r.status)
			}
		})
	}
}

// With client authentication the JSON answers need the bearer token, the
// SHA256SUMS, signature and archive URLs in the download answer are
// signed and work without it, and nothing else does.
func TestRegistryClientAuth(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	h := newAuthHarness(t, clock, bytes.Repeat([]byte{7}, 32))
	for _, path := range []string{registryPath("versions"), registryPath("1.0.0/download/linux/amd64")} {
		r := h.get(path)
		if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s without a token: status %d, want 401 with WWW-Authenticate", path, r.status)
		}
		var body errorBody
		r.json(t, &body)
		if len(body.Errors) != 1 || !strings.Contains(body.Errors[0], `credentials "`+originHost+`"`) {
			t.Errorf("%s: error %q does not name the credentials block", path, body.Errors)
		}
	}
	path := registryPath("1.0.0/download/linux/amd64")
	r := h.get(path, "Authorization", "Bearer "+testToken)
	if r.status != 200 || r.header.Get("Cache-Control") != "private, no-store" {
		t.Fatalf("download with the token: %d %v %s", r.status, r.header, r.body)
	}
	pkg := mustDecode(t, r.body)
	for _, ref := range []string{pkg.DownloadURL, pkg.SHASumsURL, pkg.SHASumsSignatureURL} {
		signed := resolve(t, path, ref)
		if r := h.get(signed); r.status != 200 {
			t.Errorf("signed %s: status %d, want 200", signed, r.status)
		}
		unsigned, _, _ := strings.Cut(signed, "?")
		if r := h.get(unsigned, "Authorization", "Bearer "+testToken); r.status != http.StatusForbidden {
			t.Errorf("unsigned %s: status %d, want 403", unsigned, r.status)
		}
	}
	// A signature for SHA256SUMS does not open the signature file.
	sums := resolve(t, path, pkg.SHASumsURL)
	_, query, _ := strings.Cut(sums, "?")
	if r := h.get(registryPath("1.0.0/download/linux/amd64/SHA256SUMS.sig?" + query)); r.status != http.StatusForbidden {
		t.Errorf("signature file with the SHA256SUMS signature: status %d, want 403", r.status)
	}
	h.waitIdle()
}

// Without a valid URL signature, the SHA256SUMS document and signature of
// a host this mirror serves and of one it does not get the same answer: a
// caller cannot learn which (in-house) hosts the mirror serves.
func TestRegistryFilesHideServedHosts(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	h := newAuthHarness(t, clock, bytes.Repeat([]byte{7}, 32))
	const unknown = "tf.corp.example"
	path := func(host, file string) string {
		return "/" + RegistryPath(host) + ns + "/" + typ + "/1.0.0/download/linux/amd64/" + file
	}
	// A signature made for the served host's file, to try on the other's.
	signed := h.server.auth.sign(addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ},
		registryFileName(versions.MustParseVersion("1.0.0"), addrs.Platform{OS: "linux", Arch: "amd64"}, sumsFile))
	for _, file := range []string{sumsFile, signatureFile} {
		for name, query := range map[string]string{
			"unsigned":          "",
			"bad signature":     "?exp=99999999999&sig=AAAA",
			"other's signature": "?" + signed,
		} {
			if name == "other's signature" && file == sumsFile {
				continue // valid for the served host
			}
			known := h.get(path(originHost, file) + query)
			other := h.get(path(unknown, file) + query)
			if known.status != http.StatusForbidden {
				t.Errorf("%s %s of a served host: status %d, want 403", name, file, known.status)
			}
			if other.status != known.status || !bytes.Equal(other.body, known.body) {
				t.Errorf("%s %s: a served host gets %d %q, another host %d %q: want the same answer",
					name, file, known.status, known.body, other.status, other.body)
			}
		}
	}
	h.waitIdle()
}

func TestRegistryRouteLabels(t *testing.T) {
	t.Parallel()
	base := "/registry/registry.terraform.io/v1/providers/hashicorp/random/"
	for path, want := range map[string]string{
		base + "versions":                                    "registry_versions",
		base + "1.0.0/download/linux/amd64":                  "registry_download",
		base + "1.0.0/download/linux/amd64/SHA256SUMS":       "registry_shasums",
		base + "1.0.0/download/linux/amd64/SHA256SUMS.sig":   "registry_signature",
		base + "1.0.0/download/linux/amd64/other":            "other",
		"/registry/registry.terraform.io/v2/x/y/versions":    "other",
		"/registry.terraform.io/hashicorp/random/index.json": "index",
	} {
		if got := Route(path); got != want {
			t.Errorf("Route(%s) = %s, want %s", path, got, want)
		}
	}
}

// The status page gives, for every allowed origin, the host block that
// points its providers.v1 and modules.v1 services at the mirror (not at
// the origin's modules.v1, which discovery may know), and says which
// token goes where when clients authenticate.
func TestStatusHostBlocks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{
		cfg:    Config{PublicURL: "https://mirror.example.com/tf"},
		engine: mirror.Config{AllowedOrigins: []string{"registry.terraform.io", "Registry.OpenTofu.org"}},
	})
	var st Status
	h.get("/?format=json").json(t, &st)
	want := map[string]string{
		"registry.terraform.io": `host "registry.terraform.io" {
  services = {
    "providers.v1" = "https://mirror.example.com/tf/registry/registry.terraform.io/v1/providers/"
    "modules.v1"   = "https://mirror.example.com/tf/registry/registry.terraform.io/v1/modules/"
  }
}
`,
		"registry.opentofu.org": `host "registry.opentofu.org" {
  services = {
    "providers.v1" = "https://mirror.example.com/tf/registry/registry.opentofu.org/v1/providers/"
    "modules.v1"   = "https://mirror.example.com/tf/registry/registry.opentofu.org/v1/modules/"
  }
}
`,
	}
	if !reflect.DeepEqual(st.HostBlocks, want) {
		t.Errorf("host_blocks %q\nwant %q", st.HostBlocks, want)
	}
	if st.HostBlockNote != "" {
		t.Errorf("host_block_note without client authentication: %q", st.HostBlockNote)
	}
	page := string(h.get("/").body)
	for _, s := range []string{"registry.opentofu.org/v1/providers/", "tf/registry/registry.terraform.io/v1/modules/", "points at this mirror too"} {
		if !strings.Contains(page, s) {
			t.Errorf("status page lacks %q", s)
		}
	}

	clock := &testClock{now: time.Now()}
	ah := newAuthHarness(t, clock, bytes.Repeat([]byte{7}, 32))
	var ast Status
	ah.get("/?format=json").json(t, &ast)
	if !strings.Contains(ast.HostBlockNote, "origin's host name") || !strings.Contains(ast.HostBlockNote, "modules.v1") {
		t.Errorf("host_block_note with client authentication: %q", ast.HostBlockNote)
	}
	if page := string(ah.get("/").body); !strings.Contains(page, "hands this mirror&#39;s token to it") && !strings.Contains(page, "hands this mirror's token to it") {
		t.Errorf("status page with client authentication does not warn about the token:\n%s", page)
	}
}

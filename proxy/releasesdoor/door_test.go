package releasesdoor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
	"github.com/tfmirror/tfmirror/v2/proxy/releasesdoor"
	"github.com/tfmirror/tfmirror/v2/releases"
	"github.com/tfmirror/tfmirror/v2/verify"
)

type rig struct {
	origin *fakeorigin.Releases
	srv    *httptest.Server
	side   *harness.ReleasesSide
}

func newRig(t *testing.T, auth *proxy.Auth) *rig {
	t.Helper()
	return newRigWith(t, auth, fakeorigin.ReleasesOptions{})
}

func newRigWith(t *testing.T, auth *proxy.Auth, opts fakeorigin.ReleasesOptions) *rig {
	t.Helper()
	return newRigConfig(t, auth, opts, func(*fakeorigin.Releases) releases.Config { return releases.Config{} })
}

// newRigConfig is newRigWith with the releases side configured by cfg,
// given the stand-in.
func newRigConfig(t *testing.T, auth *proxy.Auth, opts fakeorigin.ReleasesOptions, cfg func(*fakeorigin.Releases) releases.Config) *rig {
	t.Helper()
	o, err := fakeorigin.StartReleasesWith(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	o.Add("hashicorp", "terraform", "1.5.7", "linux_amd64")
	o.Add("hashicorp", "terraform", "1.6.0", "linux_amd64", "darwin_arm64")
	o.Add("opentofu", "tofu", "1.8.0", "linux_amd64")
	side := harness.StartReleasesSide(t, o, cfg(o))
	door, err := releasesdoor.New(releasesdoor.Config{Auth: auth, PlainHTTP: true, Logger: enginetest.Logger(t)}, side.Served)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(door)
	t.Cleanup(srv.Close)
	return &rig{origin: o, srv: srv, side: side}
}

func (r *rig) get(t *testing.T, path string) (int, []byte, http.Header) {
	t.Helper()
	return r.do(t, http.MethodGet, path)
}

// TestHashiCorpLayout: the documents and listings the installers read,
// every URL in them the mirror's, every build one the signed SHA256SUMS
// lists; the files byte for byte the origin's.
func TestHashiCorpLayout(t *testing.T) {
	r := newRig(t, nil)
	base := r.srv.URL + "/releases/hashicorp"

	status, body, hdr := r.get(t, "/releases/hashicorp/terraform/index.json")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("product index: %d %s", status, body)
	}
	var product struct {
		Versions map[string]struct {
			Builds []struct{ OS, Arch, Filename, URL string }
		}
	}
	if err := json.Unmarshal(body, &product); err != nil || len(product.Versions) != 2 {
		t.Fatalf("product index: %v %s", err, body)
	}
	if u := product.Versions["1.6.0"].Builds[0].URL; !strings.HasPrefix(u, base+"/terraform/1.6.0/terraform_1.6.0_") {
		t.Errorf("build URL %q is not the mirror's", u)
	}

	status, body, _ = r.get(t, "/releases/hashicorp/terraform/1.6.0/index.json")
	var version struct {
		Shasums           string   `json:"shasums"`
		ShasumsSignature  string   `json:"shasums_signature"`
		ShasumsSignatures []string `json:"shasums_signatures"`
		Builds            []struct {
			OS, Arch, Filename, URL string
		} `json:"builds"`
	}
	if err := json.Unmarshal(body, &version); status != 200 || err != nil || len(version.Builds) != 2 {
		t.Fatalf("version index: %d %v %s", status, err, body)
	}
	if version.Shasums != "terraform_1.6.0_SHA256SUMS" || version.ShasumsSignature != "terraform_1.6.0_SHA256SUMS.sig" ||
		len(version.ShasumsSignatures) != 2 || version.ShasumsSignatures[0] != "terraform_1.6.0_SHA256SUMS."+r.origin.HashiCorpKeyID+".sig" {
		t.Errorf("version index names: %s", body)
	}
	for _, b := range version.Builds {
		status, data, hdr := r.get(t, strings.TrimPrefix(b.URL, r.srv.URL))
		sum := sha256.Sum256(data)
		want := fakeorigin.ArchiveSHA256("terraform", "1.6.0", b.OS+"_"+b.Arch)
		if status != 200 || string(hexOf(sum[:])) != want || hdr.Get("ETag") != `"`+want+`"` {
			t.Errorf("archive %s: %d, sha256 %x, ETag %s", b.Filename, status, sum, hdr.Get("ETag"))
		}
	}
	_, sums, _ := r.get(t, "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS")
	if !bytes.Equal(sums, r.origin.Sums("hashicorp", "terraform", "1.6.0")) {
		t.Errorf("SHA256SUMS: %s", sums)
	}
	for _, name := range version.ShasumsSignatures {
		_, sig, _ := r.get(t, "/releases/hashicorp/terraform/1.6.0/"+name)
		if err := verify.CheckSignature(sums, sig, []string{r.origin.HashiCorpKey}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// The listings tfenv and tfswitch parse.
	_, html, _ := r.get(t, "/releases/hashicorp/terraform/")
	for _, want := range []string{`href="/releases/hashicorp/terraform/1.6.0/"`, ">terraform_1.6.0<", ">terraform_1.5.7<"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("product listing lacks %s:\n%s", want, html)
		}
	}
	_, html, _ = r.get(t, "/releases/hashicorp/terraform/1.6.0/")
	if !strings.Contains(string(html), `href="/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip"`) {
		t.Errorf("version listing:\n%s", html)
	}
	if status, _, _ := r.get(t, "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS.0000FFFF.sig"); status != 404 {
		t.Errorf("a signature under another key's ID: %d, want 404", status)
	}
}

func hexOf(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return out
}

// TestOpenTofuLayout: the version list and the release files OpenTofu's
// installers read.
func TestOpenTofuLayout(t *testing.T) {
	r := newRig(t, nil)
	for _, p := range []string{"/releases/opentofu/api.json", "/releases/opentofu/tofu/api.json"} {
		status, body, _ := r.get(t, p)
		var list struct {
			Versions []struct {
				ID    string   `json:"id"`
				Files []string `json:"files"`
			} `json:"versions"`
		}
		if err := json.Unmarshal(body, &list); status != 200 || err != nil || len(list.Versions) != 1 || list.Versions[0].ID != "1.8.0" {
			t.Fatalf("%s: %d %v %s", p, status, err, body)
		}
	}
	_, sums, _ := r.get(t, "/releases/opentofu/v1.8.0/tofu_1.8.0_SHA256SUMS")
	_, sig, _ := r.get(t, "/releases/opentofu/v1.8.0/tofu_1.8.0_SHA256SUMS.gpgsig")
	if err := verify.CheckSignature(sums, sig, []string{r.origin.OpenTofuKey}); err != nil {
		t.Fatalf("gpgsig: %v", err)
	}
	status, data, _ := r.get(t, "/releases/opentofu/v1.8.0/tofu_1.8.0_linux_amd64.zip")
	if status != 200 || !bytes.Equal(data, fakeorigin.ReleaseArchive("tofu", "1.8.0", "linux_amd64")) {
		t.Fatalf("archive: %d", status)
	}
	for _, f := range []string{"tofu_1.8.0_SHA256SUMS.sig", "tofu_1.8.0_SHA256SUMS.pem"} {
		if status, body, _ := r.get(t, "/releases/opentofu/v1.8.0/"+f); status != 200 || !bytes.Equal(body, r.origin.CosignFile("tofu", "1.8.0", f)) {
			t.Errorf("%s: %d %s", f, status, body)
		}
	}
}

// TestOpenTofuMissingCosignFile: a release the origin published without
// its cosign signature: the installer's every GET of it is answered 404
// (not an origin failure), and only the first asks the origin.
func TestOpenTofuMissingCosignFile(t *testing.T) {
	r := newRig(t, nil)
	const sig = "tofu_1.8.0_SHA256SUMS.sig"
	r.origin.Withhold(sig, true)
	for i := range 5 {
		if status, body, _ := r.get(t, "/releases/opentofu/v1.8.0/"+sig); status != 404 {
			t.Fatalf("GET %s #%d: %d %s, want 404", sig, i+1, status, body)
		}
	}
	if n := r.origin.Hits("/tofu/download/v1.8.0/" + sig); n != 1 {
		t.Errorf("5 GETs of %s made %d origin requests, want 1", sig, n)
	}
}

// TestOpenTofuCosignFileOfAnotherShape: a cosign certificate the origin
// answers with an HTML page (a proxy's in front of it) is answered 502
// naming the file, each GET asking the origin again; once the origin
// sends the real file, it is served byte for byte.
func TestOpenTofuCosignFileOfAnotherShape(t *testing.T) {
	r := newRig(t, nil)
	const pem = "tofu_1.8.0_SHA256SUMS.pem"
	r.origin.SetCosignFile(pem, []byte("<html><body><h1>502 Bad Gateway</h1></body></html>\n"))
	for i := 1; i <= 2; i++ {
		if status, body, _ := r.get(t, "/releases/opentofu/v1.8.0/"+pem); status != 502 || !strings.Contains(string(body), pem) {
			t.Fatalf("GET %s #%d: %d %s, want 502 naming the file", pem, i, status, body)
		}
	}
	if n := r.origin.Hits("/tofu/download/v1.8.0/" + pem); n != 2 {
		t.Errorf("2 GETs of %s made %d origin requests, want 2 (the page not kept)", pem, n)
	}
	r.origin.SetCosignFile(pem, nil)
	if status, body, _ := r.get(t, "/releases/opentofu/v1.8.0/"+pem); status != 200 || !bytes.Equal(body, r.origin.CosignFile("tofu", "1.8.0", pem)) {
		t.Errorf("GET %s once the origin sends it: %d %s", pem, status, body)
	}
}

// TestHostileRequests: paths outside the layouts are refused before any
// origin is asked.
func TestHostileRequests(t *testing.T) {
	r := newRig(t, nil)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/releases/hashicorp/terraform-provider-aws/index.json", 404},
		{"GET", "/releases/hashicorp/vault/index.json", 404},
		{"GET", "/releases/hashicorp/terraform/..%2F..%2Fetc/index.json", 404},
		{"GET", "/releases/hashicorp/terraform/v1.6.0/index.json", 404},
		{"GET", "/releases/hashicorp/terraform/1.6.0/../../x", 404},
		{"GET", "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_plan9_amd64.zip", 404},
		{"GET", "/releases/opentofu/v1.8.0/tofu_1.8.0_linux_amd64.tar.gz", 404},
		{"GET", "/releases/other/x", 404},
		{"GET", "/releases/hashicorp/" + strings.Repeat("a", 600), 404},
		{"POST", "/releases/opentofu/api.json", 405},
	} {
		req, _ := http.NewRequest(tc.method, r.srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
	}
	// Only the two files of 1.6.0 that a refusal needed to read its SHA256SUMS.
	for p, n := range map[string]int{"/hc/terraform/1.6.0/terraform_1.6.0_SHA256SUMS": 1, "/hc/terraform/1.6.0/terraform_1.6.0_plan9_amd64.zip": 0} {
		if got := r.origin.Hits(p); got != n {
			t.Errorf("origin %s: %d hits, want %d", p, got, n)
		}
	}
}

// TestAuth: with client authentication, a token is needed, as Bearer or
// as the Basic password the installers send. A Bearer token is read as
// the other doors read it: the scheme in any case, and the spaces RFC 9110
// allows around the token (the door refused a right token after two, and
// counted it as a failed attempt).
func TestAuth(t *testing.T) {
	tok := "s3cret-token-for-tests"
	auth, err := proxy.NewAuth(proxy.AuthConfig{TokenHashes: [][sha256.Size]byte{sha256.Sum256([]byte(tok))}, SigningKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, auth)
	for _, tc := range []struct {
		name   string
		set    func(*http.Request)
		status int
	}{
		{"none", func(*http.Request) {}, 401},
		{"wrong", func(q *http.Request) { q.Header.Set("Authorization", "Bearer nope") }, 401},
		{"bearer", func(q *http.Request) { q.Header.Set("Authorization", "Bearer "+tok) }, 200},
		{"basic", func(q *http.Request) { q.SetBasicAuth("anyone", tok) }, 200},
		{"bearer spaced", func(q *http.Request) { q.Header.Set("Authorization", "bearer   "+tok) }, 200},
	} {
		req, _ := http.NewRequest("GET", r.srv.URL+"/releases/opentofu/api.json", nil)
		tc.set(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
	}
	if n := r.origin.Hits("/tofu/api.json"); n != 1 {
		t.Errorf("origin list fetched %d times, want 1 (refusals ask nothing)", n)
	}
}

// TestTfenvAndTfswitchLayout: the listing and paths tfenv (a shell script
// not packaged for Debian, npm or Go, run only where TFMIRROR_TFENV names
// it: cmd/tfmirror.TestTfenvInstallsTerraformThroughTheMirror) and
// tfswitch read.
// The requests are tfenv's (libexec/tfenv-list-remote, tfenv-install,
// with TFENV_REMOTE at the door), and its answers are read as tfenv reads
// them: its grep over the HTML listing, newest first, the version it
// resolves, `grep -F ARCHIVE SHA256SUMS` for sha256sum -c, and the
// signature gpgv checks (with use-gpgv) under HashiCorp's key ID.
func TestTfenvAndTfswitchLayout(t *testing.T) {
	// Signed with a key whose short ID is HashiCorp's, as tfenv names
	// the signature file by it.
	r := newRigWith(t, nil, fakeorigin.ReleasesOptions{HashiCorpShortID: true})
	r.origin.Add("hashicorp", "terraform", "1.7.0-rc1", "linux_amd64")
	remote := "/releases/hashicorp" // TFENV_REMOTE, less the mirror's URL

	// tfenv list-remote: curl -sSf "${TFENV_REMOTE}/terraform/" | grep -o -E
	// "[0-9]+\.[0-9]+\.[0-9]+(-(rc|beta|alpha|oci)-?[0-9]*)?" | uniq
	status, page, _ := r.get(t, remote+"/terraform/")
	if status != 200 {
		t.Fatalf("listing: %d", status)
	}
	tfenv := regexp.MustCompile(`[0-9]+\.[0-9]+\.[0-9]+(-(rc|beta|alpha|oci)-?[0-9]*)?`)
	var listed []string
	for _, m := range tfenv.FindAllString(string(page), -1) {
		if len(listed) == 0 || listed[len(listed)-1] != m {
			listed = append(listed, m)
		}
	}
	if strings.Join(listed, " ") != "1.7.0-rc1 1.6.0 1.5.7" {
		t.Fatalf("tfenv would list %q", listed)
	}
	// tfenv-resolve-version: an explicit version is the regex ^VERSION$;
	// "latest" is ^[0-9]+.[0-9]+.[0-9]+$; install takes the first match.
	resolve := func(re string) string {
		for _, v := range listed {
			if regexp.MustCompile(re).MatchString(v) {
				return v
			}
		}
		return ""
	}
	if v := resolve(`^[0-9]+\.[0-9]+\.[0-9]+$`); v != "1.6.0" {
		t.Errorf("tfenv install latest would resolve %q, want 1.6.0", v)
	}
	if v := resolve(`^1\.5\.7$`); v != "1.5.7" {
		t.Errorf("tfenv install 1.5.7 would resolve %q", v)
	}

	// tfenv install 1.6.0: version_url="${TFENV_REMOTE}/terraform/${version}".
	versionURL := remote + "/terraform/1.6.0"
	tarball := "terraform_1.6.0_linux_amd64.zip"
	shasums := "terraform_1.6.0_SHA256SUMS"
	status, archive, _ := r.get(t, versionURL+"/"+tarball)
	if status != 200 {
		t.Fatalf("%s: %d", tarball, status)
	}
	status, sums, _ := r.get(t, versionURL+"/"+shasums)
	if status != 200 {
		t.Fatalf("%s: %d", shasums, status)
	}
	// sha256sum -c <(grep -F "${tarball_name}" "${shasums_name}")
	var lines []string
	for _, l := range strings.Split(string(sums), "\n") {
		if strings.Contains(l, tarball) {
			lines = append(lines, l)
		}
	}
	sum := sha256.Sum256(archive)
	if len(lines) != 1 || lines[0] != string(hexOf(sum[:]))+"  "+tarball {
		t.Errorf("sha256sum -c would check %q, want the archive's sha256 and name", lines)
	}
	// shasums_sig="${shasums_name}.72D7468F.sig": the door names it by the
	// ID of the key that verified it.
	status, sig, _ := r.get(t, versionURL+"/"+shasums+".72D7468F.sig")
	if status != 200 {
		t.Fatalf("signature: %d", status)
	}
	if err := verify.CheckSignature(sums, sig, []string{r.origin.HashiCorpKey}); err != nil {
		t.Errorf("gpgv would reject the signature: %v", err)
	}

	// tfswitch (lib/list_versions.go): \/?MAJOR.MINOR.PATCH\/?" over the
	// same listing, pre-releases left out; it downloads from
	// --mirror-download the same three files as tfenv.
	tfswitch := regexp.MustCompile(`\/?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)\/?"`)
	var found []string
	for _, m := range tfswitch.FindAllString(string(page), -1) {
		found = append(found, strings.Trim(m, `/"`))
	}
	if strings.Join(found, " ") != "1.6.0 1.5.7" {
		t.Errorf("tfswitch would list %q", found)
	}
}

// TestTwentyClientsOneFetch: 20 clients asking at once for an archive no
// one fetched cause one origin download, and each gets every byte; once
// cached, Range requests are answered.
func TestTwentyClientsOneFetch(t *testing.T) {
	r := newRig(t, nil)
	path := "/releases/opentofu/v1.8.0/tofu_1.8.0_linux_amd64.zip"
	want := fakeorigin.ReleaseArchive("tofu", "1.8.0", "linux_amd64")
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for range 20 {
		wg.Go(func() {
			resp, err := http.Get(r.srv.URL + path)
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, want) {
				errs <- fmt.Sprintf("status %d, %d bytes, %v", resp.StatusCode, len(body), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := r.origin.Hits("/tofu/download/v1.8.0/tofu_1.8.0_linux_amd64.zip"); n != 1 {
		t.Errorf("origin downloads %d, want 1", n)
	}
	enginetest.WaitIdle(t, func(ctx context.Context) error { return mirror.WaitIdle(ctx, r.side.Engine) })
	req, _ := http.NewRequest("GET", r.srv.URL+path, nil)
	req.Header.Set("Range", "bytes=0-3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, want[:4]) {
		t.Errorf("range once cached: %d %q", resp.StatusCode, body)
	}
}

// TestPolicyThroughTheDoor: the door reaches the releases through the
// package policy's layer: a denied version answers 451 with the
// operator's reason and its archive is not fetched; a denied product
// answers 404 at once, asking the origin nothing.
func TestPolicyThroughTheDoor(t *testing.T) {
	r := newRig(t, nil)
	r.side.Engine.SetPolicy(enginetest.DecodePolicy(t, `
deny_version "get.opentofu.org/opentofu/tofu" {
  versions = ["1.8.0"]
  reason   = "CVE-2026-0001: use 1.8.1"
}
`))
	status, body, _ := r.get(t, "/releases/opentofu/v1.8.0/tofu_1.8.0_linux_amd64.zip")
	if status != http.StatusUnavailableForLegalReasons || !strings.Contains(string(body), "CVE-2026-0001") {
		t.Errorf("a denied version: %d %s, want 451 with the reason", status, body)
	}
	if n := r.origin.Hits("/tofu/download/v1.8.0/tofu_1.8.0_linux_amd64.zip"); n != 0 {
		t.Errorf("a denied version's archive was fetched %d times", n)
	}
	r.side.Engine.SetPolicy(enginetest.DecodePolicy(t, `deny = ["releases.hashicorp.com/hashicorp/terraform"]`))
	before := r.origin.TotalHits()
	for _, path := range []string{"/releases/hashicorp/terraform/index.json", "/releases/hashicorp/terraform/", "/releases/hashicorp/terraform/1.6.0/index.json",
		"/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS", "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip"} {
		if status, body, _ := r.get(t, path); status != http.StatusNotFound {
			t.Errorf("%s of a denied product: %d %s, want 404", path, status, body)
		}
	}
	if n := r.origin.TotalHits() - before; n != 0 {
		t.Errorf("%d origin requests for a denied product, want none", n)
	}
}

// TestHashiCorpReleasesJSLayout: the releases index as
// @hashicorp/js-releases (which hashicorp/setup-terraform runs) reads it:
// PRODUCT/index.json's name and versions, each version's name, version,
// builds (os, arch, filename, name, version, url), shasums and the entry
// of shasums_signatures ending in _SHA256SUMS.72D7468F.sig; it then fetches
// BASE/NAME/VERSION/SHASUMS and the signature, and the build's url.
// Terrakube (terraformReleasesUrl) reads the same document, and
// shasums_signature too, which must name a signature the door serves.
func TestHashiCorpReleasesJSLayout(t *testing.T) {
	// Signed with a key whose short ID is HashiCorp's, the ID js-releases
	// looks for.
	r := newRigWith(t, nil, fakeorigin.ReleasesOptions{HashiCorpShortID: true})
	base := "/releases/hashicorp"
	_, body, _ := r.get(t, base+"/terraform/index.json")
	type build struct {
		Arch, Filename, Name, OS, URL, Version string
	}
	var index struct {
		Name     string `json:"name"`
		Versions map[string]struct {
			Builds            []build  `json:"builds"`
			Name              string   `json:"name"`
			Shasums           string   `json:"shasums"`
			ShasumsSignature  string   `json:"shasums_signature"`
			ShasumsSignatures []string `json:"shasums_signatures"`
			Version           string   `json:"version"`
		} `json:"versions"`
	}
	if err := json.Unmarshal(body, &index); err != nil || index.Name != "terraform" || len(index.Versions) != 2 {
		t.Fatalf("index: %v %s", err, body)
	}
	for v, rel := range index.Versions {
		if rel.Name != "terraform" || rel.Version != v || len(rel.Builds) == 0 {
			t.Errorf("%s: name %q, version %q, %d builds", v, rel.Name, rel.Version, len(rel.Builds))
		}
		sig := ""
		for _, s := range rel.ShasumsSignatures {
			if strings.HasSuffix(s, "_SHA256SUMS.72D7468F.sig") {
				sig = s
			}
		}
		if sig == "" {
			t.Errorf("%s: no signature named by the key's ID in %q", v, rel.ShasumsSignatures)
			continue
		}
		_, sums, _ := r.get(t, base+"/"+rel.Name+"/"+rel.Version+"/"+rel.Shasums)
		_, sigData, _ := r.get(t, base+"/"+rel.Name+"/"+rel.Version+"/"+sig)
		if err := verify.CheckSignature(sums, sigData, []string{r.origin.HashiCorpKey}); err != nil {
			t.Errorf("%s: %v", v, err)
		}
		if rel.ShasumsSignature != "terraform_"+v+"_SHA256SUMS.sig" || !slices.Contains(rel.ShasumsSignatures, rel.ShasumsSignature) {
			t.Errorf("%s: shasums_signature %q, want the unsuffixed signature, also in shasums_signatures %q", v, rel.ShasumsSignature, rel.ShasumsSignatures)
		} else if status, data, _ := r.get(t, base+"/"+rel.Name+"/"+rel.Version+"/"+rel.ShasumsSignature); status != 200 || verify.CheckSignature(sums, data, []string{r.origin.HashiCorpKey}) != nil {
			t.Errorf("%s: %s answers %d, or does not verify", v, rel.ShasumsSignature, status)
		}
		for _, b := range rel.Builds {
			if b.OS == "" || b.Arch == "" {
				t.Errorf("%s: build %+v without os or arch", v, b)
			}
			if b.Name != "terraform" || b.Version != v || b.Filename != "terraform_"+v+"_"+b.OS+"_"+b.Arch+".zip" {
				t.Errorf("%s: build %+v", v, b)
			}
			status, data, _ := r.get(t, strings.TrimPrefix(b.URL, r.srv.URL))
			// The line js-releases takes: the one naming the build, split on two spaces.
			var line string
			for _, l := range strings.Split(string(sums), "\n") {
				if strings.Contains(l, b.Filename) {
					line = l
				}
			}
			sum := sha256.Sum256(data)
			if status != 200 || !strings.HasPrefix(b.URL, r.srv.URL+base+"/") || strings.Split(line, "  ")[0] != string(hexOf(sum[:])) {
				t.Errorf("%s %s: %d from %s, SHA256SUMS line %q", v, b.Filename, status, b.URL, line)
			}
		}
	}
}

// TestOpenTofuSetupLayout: the version list and files as
// opentofu/setup-opentofu and OpenTofu's install script
// (install-opentofu.sh --install-method standalone) read them, from the
// door's base in place of get.opentofu.org/tofu/api.json and
// github.com/opentofu/opentofu/releases/download: versions[].id (a
// leading v dropped) and files[], whose tofu_VERSION_OS_ARCH.zip names
// the archive; vVERSION/ARCHIVE; vVERSION/tofu_VERSION_SHA256SUMS, read
// by setup-opentofu as "SUM whitespace [*]NAME" lines and by the script
// as `grep ZIP SUMS | cut -f 1 -d ' '`; the cosign .sig and .pem the
// script asks for unless --skip-verify; and, for the script given no
// version, the tag_name of the latest release as GitHub's API answers it
// (api.github.com/repos/opentofu/opentofu/releases/latest), at latest.
func TestOpenTofuSetupLayout(t *testing.T) {
	r := newRig(t, nil)
	r.origin.Add("opentofu", "tofu", "1.9.0-rc1", "linux_amd64")
	base := "/releases/opentofu"
	_, body, _ := r.get(t, base+"/tofu/api.json")
	var list struct {
		Versions []struct {
			ID    string   `json:"id"`
			Files []string `json:"files"`
		} `json:"versions"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Versions) != 2 {
		t.Fatalf("api.json: %v %s", err, body)
	}
	// setup-opentofu picks the newest version that is no pre-release.
	version := strings.TrimPrefix(list.Versions[1].ID, "v")
	zip := "tofu_" + version + "_linux_amd64.zip"
	if list.Versions[0].ID != "1.9.0-rc1" || version != "1.8.0" || !slices.Contains(list.Versions[1].Files, zip) {
		t.Fatalf("api.json: %s, want 1.8.0 listing %s", body, zip)
	}
	dir := base + "/v" + version + "/"
	status, archive, _ := r.get(t, dir+zip)
	_, sums, _ := r.get(t, dir+"tofu_"+version+"_SHA256SUMS")
	sum := string(hexOf(func() []byte { s := sha256.Sum256(archive); return s[:] }()))
	var byAction, byScript string
	for _, l := range strings.Split(string(sums), "\n") {
		l = strings.TrimSpace(l)
		if i := strings.IndexAny(l, " \t"); i > 0 && strings.TrimPrefix(strings.TrimSpace(l[i:]), "*") == zip {
			byAction = strings.ToLower(l[:i])
		}
		if strings.Contains(l, zip) {
			byScript = strings.Split(l, " ")[0]
		}
	}
	if status != 200 || byAction != sum || byScript != sum {
		t.Errorf("archive %d; setup-opentofu reads %q, the script %q, want %s", status, byAction, byScript, sum)
	}
	for _, f := range []string{"tofu_" + version + "_SHA256SUMS.sig", "tofu_" + version + "_SHA256SUMS.pem"} {
		if status, _, _ := r.get(t, dir+f); status != 200 {
			t.Errorf("%s: %d", f, status)
		}
	}

	// Without a version, the script reads GitHub's latest release:
	// grep "tag_name" | sed -e 's/.*tag_name": "v//' -e 's/".*//'. A
	// pre-release is never the latest.
	status, latest, _ := r.get(t, base+"/latest")
	var tag string
	for _, l := range strings.Split(string(latest), "\n") {
		if strings.Contains(l, "tag_name") {
			_, after, _ := strings.Cut(l, `tag_name": "v`)
			tag, _, _ = strings.Cut(after, `"`)
		}
	}
	if status != 200 || tag != "1.8.0" {
		t.Errorf("latest: %d %s, the script would read %q", status, latest, tag)
	}
}

// TestSnippetsTerrakube: the status page's Terrakube setting names the
// door's terraform index.json, in the layout TestHashiCorpReleasesJSLayout
// checks.
func TestSnippetsTerrakube(t *testing.T) {
	r := newRigWith(t, nil, fakeorigin.ReleasesOptions{HashiCorpShortID: true})
	snippets := releasesdoor.Snippets(r.srv.URL+"/", releases.HashiCorp)
	const key = "terraformReleasesUrl: "
	var url string
	for _, l := range strings.Split(snippets, "\n") {
		if strings.HasPrefix(l, key) {
			url = strings.Trim(strings.TrimPrefix(l, key), `"`)
		}
	}
	if url != r.srv.URL+"/releases/hashicorp/terraform/index.json" {
		t.Fatalf("Terrakube's setting names %q in\n%s", url, snippets)
	}
	status, body, _ := r.get(t, strings.TrimPrefix(url, r.srv.URL))
	var index struct {
		Name     string                     `json:"name"`
		Versions map[string]json.RawMessage `json:"versions"`
	}
	if status != 200 || json.Unmarshal(body, &index) != nil || index.Name != "terraform" || len(index.Versions) == 0 {
		t.Errorf("%s: %d %s", url, status, body)
	}
}

// TestArchiveFromAnOriginWithoutLengthAnsweredWithIt: hc-install refuses
// an archive answered without a Content-Length (it compares the bytes
// read with the length announced, -1 for none): an archive not cached
// whose origin sends none is answered, once verified and cached, with
// its length, fetched from the origin once.
func TestArchiveFromAnOriginWithoutLengthAnsweredWithIt(t *testing.T) {
	r := newRig(t, nil)
	r.origin.SetArchivesWithoutLength(true)
	const path = "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip"
	resp, err := http.Get(r.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := r.origin.Archive("terraform", "1.6.0", "linux_amd64")
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, want) {
		t.Fatalf("%s: %d, %d bytes, %v", path, resp.StatusCode, len(body), err)
	}
	if resp.ContentLength != int64(len(want)) || resp.Header.Get("Content-Type") != "application/zip" {
		t.Errorf("%s answered with length %d and type %q, want %d and application/zip",
			path, resp.ContentLength, resp.Header.Get("Content-Type"), len(want))
	}
	if got := resp.Header.Get("X-Tfmirror-Cache"); got != "miss" {
		t.Errorf("%s, fetched from the origin, answered with X-Tfmirror-Cache %q, want miss", path, got)
	}
	if n := r.origin.Hits("/hc/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip"); n != 1 {
		t.Errorf("the archive was fetched %d times from the origin, want 1", n)
	}
}

// TestSnippetsNameTenvsKeySettings: tenv reads the publisher's key from
// the publisher's site at every install (www.hashicorp.com,
// get.opentofu.org) unless TFENV_HASHICORP_PGP_KEY or
// TOFUENV_OPENTOFU_PGP_KEY names a copy: on a runner whose only way out
// is the mirror, the settings the status page gives install nothing
// without them, so they name them.
func TestSnippetsNameTenvsKeySettings(t *testing.T) {
	for _, tc := range []struct {
		pub       releases.Publisher
		want, not string
	}{
		{releases.HashiCorp, "TFENV_HASHICORP_PGP_KEY", "TOFUENV_OPENTOFU_PGP_KEY"},
		{releases.OpenTofu, "TOFUENV_OPENTOFU_PGP_KEY", "TFENV_HASHICORP_PGP_KEY"},
	} {
		snippets := releasesdoor.Snippets("https://mirror.example.com/", tc.pub)
		if !strings.Contains(snippets, tc.want) || strings.Contains(snippets, tc.not) {
			t.Errorf("%s: the snippets name %s? %v; %s? %v, want only the first:\n%s", tc.pub,
				tc.want, strings.Contains(snippets, tc.want), tc.not, strings.Contains(snippets, tc.not), snippets)
		}
	}
}

// TestReleaseFilesEndWithThePolicy: the archives and signed files of a
// CLI version are reusable by a cache in front for a minute at most,
// never immutable, so that a version denied on a reload stops being
// served through the cache within that time.
func TestReleaseFilesEndWithThePolicy(t *testing.T) {
	r := newRig(t, nil)
	paths := []string{
		"/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip",
		"/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS",
		"/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS.sig",
		"/releases/opentofu/v1.8.0/tofu_1.8.0_linux_amd64.zip",
	}
	for _, path := range paths {
		status, _, h := r.get(t, path)
		if status != http.StatusOK {
			t.Fatalf("%s: %d", path, status)
		}
		if cc := h.Get("Cache-Control"); cc != proxy.PackageCacheControl {
			t.Errorf("%s: Cache-Control %q, want %q: a deny on a reload must reach a cache in front", path, cc, proxy.PackageCacheControl)
		}
	}
	r.side.Engine.SetPolicy(enginetest.DecodePolicy(t, `
deny_version "releases.hashicorp.com/hashicorp/terraform" {
  versions = ["1.6.0"]
  reason   = "CVE-2026-0001"
}
deny_version "get.opentofu.org/opentofu/tofu" {
  versions = ["1.8.0"]
  reason   = "CVE-2026-0001"
}
`))
	for _, path := range paths {
		if status, body, _ := r.get(t, path); status != http.StatusUnavailableForLegalReasons {
			t.Errorf("%s after the deny: %d %s, want 451", path, status, body)
		}
	}
}

// TestOpenTofuListNamesOnlyFileNames: the origin's api.json is unsigned;
// the names it lists among a version's files that are not plain file
// names of the version (a query string, a fragment, an escaped path
// separator, "..", spaces, markup, control characters) are left out of
// the door's api.json, so that no installer building a URL from one asks
// for anything but a file of the version; so are the publisher's files
// that the door does not serve (.tar.gz archives, packages), which would
// be answered 404.
func TestOpenTofuListNamesOnlyFileNames(t *testing.T) {
	r := newRig(t, nil)
	hostile := []string{
		"tofu_1.8.0_linux_amd64.zip?x=https://elsewhere.invalid/",
		"tofu_1.8.0_linux_amd64.zip#frag",
		"tofu_1.8.0_..%2F..%2Fapi.json",
		"tofu_1.8.0_..",
		"tofu_1.8.0_a..b.zip",
		"tofu_1.8.0_linux amd64.zip",
		"tofu_1.8.0_<script>.zip",
		"tofu_1.8.0_\x00.zip",
		"tofu_1.8.0_%00.zip",
		"tofu_1.8.0_x\\y.zip",
	}
	r.origin.ListFiles("1.8.0", hostile...)
	r.origin.ListFiles("1.8.0", "tofu_1.8.0_linux_amd64.tar.gz", "tofu_1.8.0_amd64.deb")
	status, body, _ := r.get(t, "/releases/opentofu/api.json")
	var list struct {
		Versions []struct {
			ID    string   `json:"id"`
			Files []string `json:"files"`
		} `json:"versions"`
	}
	if err := json.Unmarshal(body, &list); status != 200 || err != nil || len(list.Versions) != 1 {
		t.Fatalf("api.json: %d %v %s", status, err, body)
	}
	files := list.Versions[0].Files
	for _, h := range hostile {
		if slices.Contains(files, h) {
			t.Errorf("api.json lists %q", h)
		}
	}
	for _, f := range []string{"tofu_1.8.0_linux_amd64.tar.gz", "tofu_1.8.0_amd64.deb"} {
		if slices.Contains(files, f) {
			t.Errorf("api.json lists %q, which the door does not serve", f)
		}
	}
	for _, f := range []string{"tofu_1.8.0_linux_amd64.zip", "tofu_1.8.0_SHA256SUMS", "tofu_1.8.0_SHA256SUMS.gpgsig"} {
		if !slices.Contains(files, f) {
			t.Errorf("api.json lacks %q: %q", f, files)
		}
	}
	for _, f := range files {
		if status, _, _ := r.get(t, "/releases/opentofu/v1.8.0/"+f); status != http.StatusOK {
			t.Errorf("api.json lists %q, answered %d", f, status)
		}
	}
}

// TestDocumentsNamingTheMirrorVary: HashiCorp's index.json documents name
// the mirror by an absolute URL (each build's url, which installers and
// Terrakube download from), taken, without a public URL, from the
// request's Host (and X-Forwarded-Proto); a cache in front may keep them a
// minute. They say so (Vary), or a shared cache keyed by path alone would
// hand every client, for that minute, the download URLs of a Host one
// client made up.
func TestDocumentsNamingTheMirrorVary(t *testing.T) {
	r := newRig(t, nil)
	for _, path := range []string{"/releases/hashicorp/terraform/index.json", "/releases/hashicorp/terraform/1.6.0/index.json"} {
		req, _ := http.NewRequest("GET", r.srv.URL+path, nil)
		req.Host = "attacker.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "http://attacker.example/releases/hashicorp/terraform/1.6.0/") {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		vary := strings.ToLower(strings.Join(resp.Header.Values("Vary"), ","))
		for _, h := range []string{"host", "x-forwarded-proto"} {
			if !strings.Contains(vary, h) {
				t.Errorf("%s: Cache-Control %q, Vary %q: lacks %s", path, resp.Header.Get("Cache-Control"), vary, h)
			}
		}
	}
}

// TestForwardedProtoFromAnyPeerIgnored: the scheme of the URLs in
// index.json, taken from the request without a public URL, changes with
// X-Forwarded-Proto only from a proxy the operator trusts
// (proxy.TrustProxies): from anyone else the header is not read.
func TestForwardedProtoFromAnyPeerIgnored(t *testing.T) {
	r := newRig(t, nil)
	get := func(url string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", url+"/releases/hashicorp/terraform/1.6.0/index.json", nil)
		req.Host = "mirror.example"
		req.Header.Set("X-Forwarded-Proto", "https")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		return string(body)
	}
	if body := get(r.srv.URL); !strings.Contains(body, `"url": "http://mirror.example/releases/hashicorp/terraform/1.6.0/`) {
		t.Errorf("X-Forwarded-Proto from a peer not trusted changed the scheme:\n%s", body)
	}
	trusted := httptest.NewServer(proxy.TrustProxies(r.srv.Config.Handler, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}))
	t.Cleanup(trusted.Close)
	if body := get(trusted.URL); !strings.Contains(body, `"url": "https://mirror.example/releases/hashicorp/terraform/1.6.0/`) {
		t.Errorf("X-Forwarded-Proto from a trusted proxy did not:\n%s", body)
	}
}

// A client that goes away before the door answers is counted and logged
// with its own code, 499, as on the other doors: not as a 200 that
// delivered nothing (nor as the origin's failure, which it did not wait
// for).
func TestClientGoneCountedAsSuch(t *testing.T) {
	r := newRig(t, nil)
	r.origin.SetDown(true) // nothing is answered before the client goes
	logs := &observed.Logs{}
	door, err := releasesdoor.New(releasesdoor.Config{PlainHTTP: true, Logger: slog.New(logs)}, r.side.Served)
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed.Requests{}
	h := proxy.Instrument(door, slog.New(slog.DiscardHandler), obs)
	paths := []string{
		"/releases/hashicorp/terraform/index.json",
		"/releases/hashicorp/terraform/1.6.0/index.json",
		"/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS",
		"/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip",
		"/releases/opentofu/v1.8.0/tofu_1.8.0_linux_amd64.zip",
	}
	observed.AskGone(h, paths)
	obs.Expect(t, paths, httperr.StatusClientClosedRequest)
	if l := logs.Max(); l > slog.LevelDebug {
		t.Errorf("logged at %v, want nothing above debug", l)
	}
}

// TestTenvHTMLListingWithoutSlash: tenv's default list mode for a remote
// other than HashiCorp's is the HTML listing, which it asks for at
// url.JoinPath(TFENV_REMOTE, "terraform"), without a final slash (as
// releases.hashicorp.com/terraform answers), ignoring the status, and
// takes the versions from the links' href: the door answers that path
// with the product's listing, not a 404 that lists nothing.
func TestTenvHTMLListingWithoutSlash(t *testing.T) {
	r := newRig(t, nil)
	status, page, hdr := r.get(t, "/releases/hashicorp/terraform")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("listing without a slash: %d %s", status, page)
	}
	for _, want := range []string{`href="/releases/hashicorp/terraform/1.6.0/"`, `href="/releases/hashicorp/terraform/1.5.7/"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("listing lacks %s:\n%s", want, page)
		}
	}
	if status, body, _ := r.get(t, "/releases/hashicorp/packer"); status != 404 {
		t.Errorf("a product not served: %d %s", status, body)
	}
}

// TestListingsUnderThePublicURLPath: behind a proxy that serves the
// mirror under a path (a public URL such as https://mirror.example.com/tf/,
// the proxy taking /tf off before the mirror sees the request), the links
// of every HTML listing the installers scrape carry that path, as the URLs
// of index.json do: each, followed through the proxy, reaches the door.
func TestListingsUnderThePublicURLPath(t *testing.T) {
	r := newRig(t, nil)
	const public = "https://mirror.example.com/tf/"
	door, err := releasesdoor.New(releasesdoor.Config{MirrorURL: func(*http.Request) string { return public },
		Logger: enginetest.Logger(t)}, r.side.Served)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(door)
	t.Cleanup(srv.Close)
	// get asks for path as the proxy in front forwards it: without /tf.
	get := func(path string) (int, []byte) {
		t.Helper()
		rest, ok := strings.CutPrefix(path, "/tf/")
		if !ok {
			t.Fatalf("%s is not under the public URL's path /tf/", path)
		}
		resp, err := http.Get(srv.URL + "/" + rest)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	href := regexp.MustCompile(`href="([^"]*)"`)
	for _, listing := range []string{
		"/tf/releases/hashicorp/",
		"/tf/releases/hashicorp/terraform/",
		"/tf/releases/hashicorp/terraform",
		"/tf/releases/hashicorp/terraform/1.6.0/",
		"/tf/releases/opentofu/",
		"/tf/releases/opentofu/v1.8.0/",
	} {
		status, page := get(listing)
		links := href.FindAllStringSubmatch(string(page), -1)
		if status != 200 || len(links) == 0 {
			t.Fatalf("%s: %d %s", listing, status, page)
		}
		for _, l := range links {
			if !strings.HasPrefix(l[1], "/tf/releases/") {
				t.Errorf("%s links %q, not under the public URL's path", listing, l[1])
				continue
			}
			if status, body := get(l[1]); status != 200 {
				t.Errorf("%s links %s, which answers %d %s", listing, l[1], status, body)
			}
		}
	}
	for _, doc := range []string{"/tf/releases/hashicorp/terraform/index.json", "/tf/releases/hashicorp/terraform/1.6.0/index.json"} {
		status, body := get(doc)
		urls := regexp.MustCompile(`"url": "([^"]*)"`).FindAllStringSubmatch(string(body), -1)
		if status != 200 || len(urls) == 0 {
			t.Fatalf("%s: %d %s", doc, status, body)
		}
		for _, u := range urls {
			if !strings.HasPrefix(u[1], public+"releases/hashicorp/terraform/") {
				t.Errorf("%s names %q, not under the public URL", doc, u[1])
			}
		}
	}
}

// TestProductNotServedSaysWhichSetting: a HashiCorp product the mirror is
// not configured for answers 404 with the setting that names the products
// served, so that whoever asks for one learns what to change.
func TestProductNotServedSaysWhichSetting(t *testing.T) {
	r := newRig(t, nil)
	for _, path := range []string{"/releases/hashicorp/packer/", "/releases/hashicorp/packer/index.json", "/releases/hashicorp/packer/1.7.0/packer_1.7.0_SHA256SUMS"} {
		status, body, _ := r.get(t, path)
		if status != 404 || !strings.Contains(string(body), "--releases-hashicorp-products") {
			t.Errorf("%s: %d %s, want 404 naming --releases-hashicorp-products", path, status, body)
		}
	}
}

// TestOpenTofuLatestNotHeldUnderMinimumReleaseAge: the latest release the
// door names for OpenTofu's install script is not one the policy holds:
// a patch signed yesterday (1.8.1) below a beta of the next line old
// enough (1.9.0-beta1) is neither the latest nor listed, as its download
// is refused; the latest is the release old enough below it.
func TestOpenTofuLatestNotHeldUnderMinimumReleaseAge(t *testing.T) {
	r := newRig(t, nil)
	now := time.Now()
	r.origin.Add("opentofu", "tofu", "1.9.0-beta1", "linux_amd64")
	r.origin.SetVersionSignedAt("tofu", "1.9.0-beta1", now.Add(-10*24*time.Hour))
	r.origin.Add("opentofu", "tofu", "1.8.1", "linux_amd64")
	r.origin.SetVersionSignedAt("tofu", "1.8.1", now.Add(-24*time.Hour))
	r.side.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	status, body, _ := r.get(t, "/releases/opentofu/latest")
	if status != http.StatusOK || !strings.Contains(string(body), `"tag_name": "v1.8.0"`) {
		t.Errorf("latest: %d %s, want v1.8.0", status, body)
	}
	if _, body, _ := r.get(t, "/releases/opentofu/api.json"); strings.Contains(string(body), `"1.8.1"`) {
		t.Errorf("api.json lists 1.8.1, signed yesterday: %s", body)
	}
	if status, _, _ := r.get(t, "/releases/opentofu/v1.8.1/tofu_1.8.1_linux_amd64.zip"); status != http.StatusUnavailableForLegalReasons {
		t.Errorf("1.8.1's archive: %d, want 451", status)
	}
}

// TestSignaturesListedAreServedDuringKeyRotation: with two HashiCorp keys
// in force (a rotation: the file holds the old key and the new), a
// version's signature is served under the ID of the key that made it
// alone, so the product's index.json names no other: every signature it
// lists is served (hc-install takes the first that its key's ID or the
// plain .sig names, and a 404 fails the install). Before a version's
// SHA256SUMS is fetched the mirror cannot tell which key signed it, and
// lists the .sig alone; once held, the key's own file as well.
func TestSignaturesListedAreServedDuringKeyRotation(t *testing.T) {
	r := newRigConfig(t, nil, fakeorigin.ReleasesOptions{}, func(o *fakeorigin.Releases) releases.Config {
		// The stand-in's OpenTofu key stands for the publisher's other
		// key: in force, and the signer of none of its releases.
		return releases.Config{HashiCorpKeys: []string{o.HashiCorpKey, o.OpenTofuKey}}
	})
	type index struct {
		Versions map[string]struct {
			ShasumsSignature  string   `json:"shasums_signature"`
			ShasumsSignatures []string `json:"shasums_signatures"`
		} `json:"versions"`
	}
	read := func() index {
		t.Helper()
		status, body, _ := r.get(t, "/releases/hashicorp/terraform/index.json")
		var idx index
		if err := json.Unmarshal(body, &idx); status != 200 || err != nil || len(idx.Versions) != 2 {
			t.Fatalf("product index: %d %v %s", status, err, body)
		}
		return idx
	}
	keyed := "terraform_1.6.0_SHA256SUMS." + r.origin.HashiCorpKeyID + ".sig"
	for round := range 2 {
		// The first round lists what no fetch has told yet, and fetches
		// every file it lists; the second lists 1.6.0's and 1.5.7's
		// signatures as held.
		idx := read()
		for v, doc := range idx.Versions {
			if !slices.Contains(doc.ShasumsSignatures, doc.ShasumsSignature) {
				t.Errorf("round %d, %s: shasums_signature %q not in shasums_signatures %q", round, v, doc.ShasumsSignature, doc.ShasumsSignatures)
			}
			for _, name := range doc.ShasumsSignatures {
				status, sig, _ := r.get(t, "/releases/hashicorp/terraform/"+v+"/"+name)
				_, sums, _ := r.get(t, "/releases/hashicorp/terraform/"+v+"/terraform_"+v+"_SHA256SUMS")
				if status != 200 {
					t.Errorf("round %d, %s: %s, listed in index.json, answers %d", round, v, name, status)
				} else if err := verify.CheckSignature(sums, sig, []string{r.origin.HashiCorpKey}); err != nil {
					t.Errorf("round %d, %s: %s: %v", round, v, name, err)
				}
			}
		}
		if round == 1 && !slices.Contains(idx.Versions["1.6.0"].ShasumsSignatures, keyed) {
			t.Errorf("once 1.6.0 is held, its index lists %q, want %s too", idx.Versions["1.6.0"].ShasumsSignatures, keyed)
		}
	}
	status, body, _ := r.get(t, "/releases/hashicorp/terraform/1.6.0/index.json")
	var version struct {
		ShasumsSignatures []string `json:"shasums_signatures"`
	}
	if err := json.Unmarshal(body, &version); status != 200 || err != nil || !slices.Equal(version.ShasumsSignatures, []string{keyed, "terraform_1.6.0_SHA256SUMS.sig"}) {
		t.Errorf("version index: %d %v %s, want %s and the .sig", status, err, body, keyed)
	}
}

// TestOpenTofuLatestTakesABuildOfARelease: a release with build metadata
// holding a hyphen ("1.9.1+ci-2") is a release, not a pre-release, and is
// the latest when it is the newest.
func TestOpenTofuLatestTakesABuildOfARelease(t *testing.T) {
	r := newRig(t, nil)
	r.origin.Add("opentofu", "tofu", "1.9.1+ci-2", "linux_amd64")
	r.origin.Add("opentofu", "tofu", "1.10.0-rc1", "linux_amd64")
	status, latest, _ := r.get(t, "/releases/opentofu/latest")
	var doc struct {
		TagName string `json:"tag_name"`
	}
	if err := json.Unmarshal(latest, &doc); err != nil || status != 200 || doc.TagName != "v1.9.1+ci-2" {
		t.Errorf("latest: %d %s (%v), want v1.9.1+ci-2", status, latest, err)
	}
}

// Paths that name nothing, asked in a loop, get an access-log line each
// and, at info, only the first of their "request failed" lines: the rest
// are at debug, so that a client cannot grow the log by two lines a
// request.
func TestClientFaultsBoundedInTheLog(t *testing.T) {
	r := newRig(t, nil)
	logs := &observed.Logs{}
	door, err := releasesdoor.New(releasesdoor.Config{PlainHTTP: true, Logger: slog.New(logs)}, r.side.Served)
	if err != nil {
		t.Fatal(err)
	}
	h := proxy.Instrument(door, slog.New(logs), nil)
	paths := []string{
		"/releases/nothing/here",
		"/releases/hashicorp/terraform/9.9.9/index.json",
		"/releases/hashicorp//terraform",
	}
	const n = 200
	observed.AskClientFaults(t, h, paths, n)
	if failed := logs.Besides("request", slog.LevelInfo); failed == 0 || failed > 40 {
		t.Errorf("%d lines at info besides the access log for %d requests, want at least one and at most 40", failed, n)
	}
}

// TestMalformedVersionListIsTheOrigins: a version list the origin answers
// with something that is not one (a maintenance page where api.json was,
// an index.json nested past the bounds it is read within) is the
// origin's fault: answered 502 saying what was wrong with it, as a
// registry's malformed versions answer is, not 500 "internal error", a
// fault of the mirror's that tells the user nothing.
func TestMalformedVersionListIsTheOrigins(t *testing.T) {
	r := newRig(t, nil)
	r.origin.SetListBody("opentofu", "tofu", []byte("<html>down for maintenance</html>\n"))
	r.origin.SetListBody("hashicorp", "terraform", []byte(strings.Repeat("[", 100)+strings.Repeat("]", 100)))
	for _, p := range []string{
		"/releases/opentofu/api.json", "/releases/opentofu/latest", "/releases/opentofu/",
		"/releases/hashicorp/terraform/index.json", "/releases/hashicorp/terraform/", "/releases/hashicorp/terraform",
	} {
		status, body, h := r.get(t, p)
		if status != http.StatusBadGateway || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") || !strings.Contains(string(body), "version list") {
			t.Errorf("GET %s: %d %s %q, want 502 naming the origin's version list", p, status, h.Get("Content-Type"), body)
		}
	}
	// The releases the lists would have named are still served.
	if status, body, _ := r.get(t, "/releases/opentofu/v1.8.0/tofu_1.8.0_SHA256SUMS"); status != http.StatusOK {
		t.Errorf("a SHA256SUMS while the list is malformed: %d %s", status, body)
	}
}

// A version list served stale (its origin down once it expired) is
// marked as the provider doors mark theirs: X-Tfmirror-Stale, a Warning
// (110), and Cache-Control: no-cache, so that a cache in front
// revalidates it.
func TestStaleListMarked(t *testing.T) {
	clock := enginetest.NewFakeClock()
	r := newRigConfig(t, nil, fakeorigin.ReleasesOptions{}, func(*fakeorigin.Releases) releases.Config {
		return releases.Config{Now: clock.Now}
	})
	paths := []string{"/releases/hashicorp/terraform/index.json", "/releases/hashicorp/terraform/", "/releases/opentofu/api.json"}
	for _, p := range paths {
		if status, body, h := r.get(t, p); status != http.StatusOK || h.Get("X-Tfmirror-Stale") != "" || h.Get("Warning") != "" {
			t.Fatalf("GET %s, origin up: %d %q, X-Tfmirror-Stale %q, Warning %q", p, status, body, h.Get("X-Tfmirror-Stale"), h.Get("Warning"))
		}
	}
	r.origin.SetDown(true)
	clock.Add(time.Hour)
	for _, p := range paths {
		status, _, h := r.get(t, p)
		if status != http.StatusOK || h.Get("X-Tfmirror-Stale") != "1" || !strings.HasPrefix(h.Get("Warning"), "110 ") || h.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s, origin down: %d, X-Tfmirror-Stale %q, Warning %q, Cache-Control %q; want 200 marked stale",
				p, status, h.Get("X-Tfmirror-Stale"), h.Get("Warning"), h.Get("Cache-Control"))
		}
	}
}

// TestEscapedPathsReadDecoded: a version with build metadata asked for
// with its "+" escaped (%2B, as some URL encoders write it) is answered
// as when asked for plainly, as the registry doors answer escapes a
// client did not need; an escaped separator is refused, never read as
// one.
func TestEscapedPathsReadDecoded(t *testing.T) {
	r := newRig(t, nil)
	r.origin.Add("hashicorp", "terraform", "1.6.1+ent", "linux_amd64")
	plainStatus, plain, _ := r.get(t, "/releases/hashicorp/terraform/1.6.1+ent/index.json")
	if plainStatus != http.StatusOK {
		t.Fatalf("1.6.1+ent asked for plainly: %d %s", plainStatus, plain)
	}
	for _, p := range []string{"/releases/hashicorp/terraform/1.6.1%2Bent/index.json", "/releases/hashicorp/terraform/1.6.1%2bent/index.json", "/releases/hashicorp/terr%61form/1.6.1+ent/index.json"} {
		if status, body, _ := r.get(t, p); status != plainStatus || !bytes.Equal(body, plain) {
			t.Errorf("GET %s: %d %s, want the answer to the plain path", p, status, body)
		}
	}
	for _, p := range []string{"/releases/hashicorp/terraform%2F1.6.0/index.json", "/releases/hashicorp%2fterraform/1.6.0/index.json", "/releases/hashicorp/terraform/1.6.0%5Cindex.json"} {
		if status, body, _ := r.get(t, p); status != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", p, status, body)
		}
	}
}

// TestListingsLockedDown: the door's HTML listings, pages on the mirror's
// own origin (the status page's) that name what an origin lists, say what
// the status page says: no script, style or frame of any source
// (Content-Security-Policy), none framing them, and nosniff; and its
// other documents (index.json, SHA256SUMS, a text an origin signed) say
// nosniff, so that a browser takes none for a page of its own. It sent
// them with none of these.
func TestListingsLockedDown(t *testing.T) {
	r := newRig(t, nil)
	for _, path := range []string{"/releases/hashicorp/terraform/", "/releases/hashicorp/terraform/1.6.0/"} {
		status, _, hdr := r.get(t, path)
		if status != 200 {
			t.Fatalf("%s: %d", path, status)
		}
		csp := hdr.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: Content-Security-Policy %q lacks %s", path, csp, want)
			}
		}
		if xfo := hdr.Get("X-Frame-Options"); xfo != "DENY" {
			t.Errorf("%s: X-Frame-Options %q, want DENY", path, xfo)
		}
	}
	for _, path := range []string{"/releases/hashicorp/terraform/", "/releases/hashicorp/terraform/index.json",
		"/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS"} {
		status, _, hdr := r.get(t, path)
		if status != 200 || hdr.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d, X-Content-Type-Options %q, want nosniff", path, status, hdr.Get("X-Content-Type-Options"))
		}
	}
}

package proxy

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
)

const modBase = "/registry/" + originHost + "/v1/modules/"

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// tarFiles returns the regular files of a tar.gz.
func tarFiles(t *testing.T, data []byte) map[string]string {
	t.Helper()
	if bytes.HasPrefix(data, []byte("PK")) {
		return zipFiles(t, data)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("package is not gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}

// zipFiles is tarFiles for the package's zip (the file the download
// answer names): its files by name, directories left out.
func zipFiles(t *testing.T, data []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("package is not a zip: %v", err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		out[f.Name] = string(b)
	}
	return out
}

// download asks for the download answer of a module version and returns
// the package path it names (relative to the mirror's root) and the
// //SUBDIR.
func download(t *testing.T, h *harness, module, version string) (pkgPath, subdir string) {
	t.Helper()
	r := h.get(modBase + module + "/" + version + "/download")
	if r.status != http.StatusOK {
		t.Fatalf("download answer: %d %s", r.status, r.body)
	}
	var body struct{ Location string }
	r.json(t, &body)
	loc := r.header.Get("X-Terraform-Get")
	if loc == "" || body.Location != loc {
		t.Fatalf("X-Terraform-Get %q and JSON location %q differ", loc, body.Location)
	}
	rel, query, _ := strings.Cut(strings.TrimPrefix(loc, "./"), "?")
	rel, subdir, _ = strings.Cut(rel, "//")
	pkgPath = modBase + module + "/" + version + "/" + rel
	if query != "" {
		pkgPath += "?" + query
	}
	return pkgPath, subdir
}

func TestModulePullThrough(t *testing.T) {
	t.Parallel()
	needGit(t)
	h := newHarness(t, harnessOptions{})
	o := h.origin
	commit, err := o.AddGitRepo("mono", map[string][]byte{
		"modules/vpc/main.tf":    []byte("module \"shared\" {\n  source = \"../shared\"\n}\n"),
		"modules/shared/main.tf": []byte("# shared\n"),
	}, "v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("mono")+"//modules/vpc?ref=v1.0.0")
	o.AddModule("acme", "vpc", "aws", "1.1.0", "git::"+o.GitURL("mono")+"//modules/vpc?ref="+commit)

	var list struct {
		Modules []struct {
			Versions []struct{ Version string }
		}
	}
	h.get(modBase+"acme/vpc/aws/versions").json(t, &list)
	if len(list.Modules) != 1 || len(list.Modules[0].Versions) != 2 || list.Modules[0].Versions[0].Version != "1.0.0" {
		t.Fatalf("versions answer: %+v", list)
	}

	pkgPath, subdir := download(t, h, "acme/vpc/aws", "1.0.0")
	if subdir != "modules/vpc" || o.Hits(fakeorigin.Git) != 0 {
		t.Errorf("download answer: subdir %q, %d Git requests (want modules/vpc, none before the package is asked for)", subdir, o.Hits(fakeorigin.Git))
	}

	// 20 clients at once ask for the uncached package: one Git fetch.
	var wg sync.WaitGroup
	bodies := make([]response, 20)
	for i := range bodies {
		wg.Add(1)
		go func() { defer wg.Done(); bodies[i] = h.get(pkgPath) }()
	}
	wg.Wait()
	for i, r := range bodies {
		if r.status != http.StatusOK || !bytes.Equal(r.body, bodies[0].body) {
			t.Fatalf("client %d: %d %s", i, r.status, r.body)
		}
	}
	if n := o.Hits(fakeorigin.Git); n != 2 { // ref advertisement + upload-pack
		t.Errorf("20 clients caused %d Git requests, want the 2 of one fetch", n)
	}
	files := tarFiles(t, bodies[0].body)
	if files["modules/shared/main.tf"] != "# shared\n" || !strings.Contains(files["modules/vpc/main.tf"], "../shared") {
		t.Errorf("package files: %v", files)
	}
	if ct := bodies[0].header.Get("Content-Type"); ct != "application/zip" {
		t.Errorf("Content-Type %q", ct)
	}

	// Cached: Range and ETag, no origin request.
	o.ResetHits()
	r := h.get(pkgPath, "Range", "bytes=0-9")
	if r.status != http.StatusPartialContent || len(r.body) != 10 || r.header.Get("X-Tfmirror-Cache") != "hit" {
		t.Errorf("range request: %d, %d bytes, cache %q", r.status, len(r.body), r.header.Get("X-Tfmirror-Cache"))
	}
	if r := h.get(pkgPath, "If-None-Match", r.header.Get("ETag")); r.status != http.StatusNotModified {
		t.Errorf("conditional request: %d", r.status)
	}
	// The same tree at the commit id is the same package.
	pkg2, _ := download(t, h, "acme/vpc/aws", "1.1.0")
	if r := h.get(pkg2); r.status != http.StatusOK || !bytes.Equal(r.body, bodies[0].body) {
		t.Errorf("the package at the tag's commit id differs from the tag's: %d", r.status)
	}

	// The origin down: the stale list and the cached package are served.
	o.SetDown(http.StatusBadGateway)
	mirror.WaitIdle(t.Context(), h.engine)
	var cached []modules.Cached
	h.engine.Modules().ListCachedModules(func(cm modules.Cached) error { cached = append(cached, cm); return nil })
	if len(cached) != 2 || !cached[0].Cached || cached[0].Record.Commit != commit || cached[0].Record.SHA256 == "" {
		t.Errorf("cached modules: %+v", cached)
	}
	if r := h.get(pkgPath); r.status != http.StatusOK || !bytes.Equal(r.body, bodies[0].body) {
		t.Errorf("package with the origin down: %d", r.status)
	}
	if _, sub := download(t, h, "acme/vpc/aws", "1.0.0"); sub != "modules/vpc" {
		t.Errorf("download answer with the origin down: subdir %q", sub)
	}

	// The status page lists them, newest first.
	var st Status
	h.get("/?format=json").json(t, &st)
	if len(st.Modules) != 1 || st.Modules[0].Address != originHost+"/acme/vpc/aws" || len(st.Modules[0].Versions) != 2 {
		t.Fatalf("status modules: %+v", st.Modules)
	}
	if v := st.Modules[0].Versions[0]; v.Version != "1.1.0" || !v.Cached || v.Commit != commit || v.Subdir != "modules/vpc" ||
		v.Source != "git::"+o.GitURL("mono")+"?ref="+commit {
		t.Errorf("status module version: %+v", v)
	}
	if page := string(h.get("/").body); !strings.Contains(page, "Cached registry modules") || !strings.Contains(page, "acme/<wbr>vpc") {
		t.Errorf("status page lacks the modules")
	}
}

func TestModuleSourceFailures(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{engine: mirror.Config{ModuleLimits: modsource.Limits{MaxTreeBytes: 1 << 20, MaxDownloadBytes: 1 << 20, MaxEntries: 100}}})
	o := h.origin
	o.AddModule("acme", "s3", "aws", "1.0.0", "s3::https://s3.amazonaws.com/bucket/vpc.zip")
	o.AddModule("acme", "ssh", "aws", "1.0.0", "git::ssh://git@example.test/org/repo.git?ref=v1")
	o.AddModule("acme", "bomb", "aws", "1.0.0", o.TarballURL("bomb.tar.gz"))
	o.AddTarball("bomb.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": nil, "zeros": make([]byte, 8<<20)}))
	o.AddModule("acme", "gone", "aws", "1.0.0", o.TarballURL("missing.tar.gz"))

	for module, scheme := range map[string]string{"acme/s3/aws": `\"s3\"`, "acme/ssh/aws": `\"ssh\"`} {
		r := h.get(modBase + module + "/1.0.0/download")
		if r.status != http.StatusBadGateway || !strings.Contains(string(r.body), scheme) {
			t.Errorf("%s: %d %s, want 502 naming %s", module, r.status, r.body, scheme)
		}
	}
	if r := h.get(modBase + "acme/nope/aws/versions"); r.status != http.StatusNotFound {
		t.Errorf("unknown module: %d", r.status)
	}

	pkg, _ := download(t, h, "acme/bomb/aws", "1.0.0")
	r := h.get(pkg)
	// The client reads which limit, and the setting that sets it, as the
	// log does.
	if r.status != http.StatusBadGateway || !strings.Contains(string(r.body), "larger than") || !strings.Contains(string(r.body), "(--module-max-tree-bytes)") {
		t.Errorf("tarball bomb: %d %s, want 502 saying it is too large, naming --module-max-tree-bytes", r.status, r.body)
	}
	// Zeros in an entry the package does not keep still inflate.
	o.AddModule("acme", "hidden", "aws", "1.0.0", o.TarballURL("hidden.tar.gz"))
	o.AddTarball("hidden.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": nil, ".git/zeros": make([]byte, 16<<20)}))
	pkg, _ = download(t, h, "acme/hidden/aws", "1.0.0")
	if r := h.get(pkg); r.status != http.StatusBadGateway || !strings.Contains(string(r.body), "unpacks to more than") {
		t.Errorf("tarball bomb in a skipped entry: %d %s, want 502 saying what it unpacks to", r.status, r.body)
	}
	if _, err := exec.LookPath("git"); err == nil {
		// A repository larger than the limit: incompressible bytes.
		big := make([]byte, 0, 3<<20)
		for sum := sha256.Sum256([]byte("huge")); len(big) < 3<<20; sum = sha256.Sum256(sum[:]) {
			big = append(big, sum[:]...)
		}
		if _, err := o.AddGitRepo("huge", map[string][]byte{"main.tf": nil, "blob.bin": big}, "v1"); err != nil {
			t.Fatal(err)
		}
		o.AddModule("acme", "huge", "aws", "1.0.0", "git::"+o.GitURL("huge")+"?ref=v1")
		pkg, _ := download(t, h, "acme/huge/aws", "1.0.0")
		if r := h.get(pkg); r.status != http.StatusBadGateway || !strings.Contains(string(r.body), "bytes to download") {
			t.Errorf("huge Git repository: %d %s, want 502 saying it is too large", r.status, r.body)
		}
		// A small pack holding a large blob of zeros.
		if _, err := o.AddGitRepo("zeros", map[string][]byte{"main.tf": nil, "zeros.bin": make([]byte, 16<<20)}, "v1"); err != nil {
			t.Fatal(err)
		}
		o.AddModule("acme", "zeros", "aws", "1.0.0", "git::"+o.GitURL("zeros")+"?ref=v1")
		pkg, _ = download(t, h, "acme/zeros/aws", "1.0.0")
		if r := h.get(pkg); r.status != http.StatusBadGateway || !strings.Contains(string(r.body), "Git pack holds a blob of") {
			t.Errorf("Git repository of zeros: %d %s, want 502 saying its objects are too large", r.status, r.body)
		}
	}
	pkg, _ = download(t, h, "acme/gone/aws", "1.0.0")
	if r := h.get(pkg); r.status != http.StatusBadGateway {
		t.Errorf("missing tarball: %d %s, want 502", r.status, r.body)
	}
	if n, _ := h.engine.Stats(); n != 0 {
		t.Errorf("%d blobs cached after failed fetches, want 0", n)
	}
}

func TestModuleRoutes(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		modBase + "acme/vpc/aws/versions":             "module_versions",
		modBase + "acme/vpc/aws/1.0.0/download":       "module_download",
		modBase + "acme/vpc/aws/1.0.0/package.tar.gz": "module_package",
		modBase + "acme/vpc/aws/1.0.0/package.zip":    "module_package",
		modBase + "acme/vpc/aws/1.0.0/other":          "other",
		modBase + "acme/vpc/versions":                 "other",
	} {
		if got := Route(path); got != want {
			t.Errorf("Route(%s) = %s, want %s", path, got, want)
		}
	}
}

// With client authentication on, the versions and download answers need
// the token and the package a valid, unexpired URL signature for that
// module version.
func TestModulesClientAuth(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	h := newAuthHarness(t, clock, bytes.Repeat([]byte{7}, 32))
	o := h.origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("#\n")}))
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("m.tar.gz"))
	o.AddModule("acme", "vpc", "aws", "2.0.0", o.TarballURL("m.tar.gz"))
	bearer := "Bearer " + testToken

	for _, path := range []string{modBase + "acme/vpc/aws/versions", modBase + "acme/vpc/aws/1.0.0/download"} {
		if r := h.get(path); r.status != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d", path, r.status)
		}
		if r := h.get(path, "Authorization", bearer); r.status != http.StatusOK {
			t.Errorf("%s with the token: %d %s", path, r.status, r.body)
		}
	}
	r := h.get(modBase+"acme/vpc/aws/1.0.0/download", "Authorization", bearer)
	loc := r.header.Get("X-Terraform-Get")
	rel, query, ok := strings.Cut(strings.TrimPrefix(loc, "./"), "?")
	if !ok || rel != "package.zip" {
		t.Fatalf("location %q has no signature", loc)
	}
	pkg := modBase + "acme/vpc/aws/1.0.0/" + rel
	if r := h.get(pkg + "?" + query); r.status != http.StatusOK || r.header.Get("Cache-Control") == "" || !strings.Contains(r.header.Get("Cache-Control"), "private") {
		t.Errorf("signed package: %d, Cache-Control %q", r.status, r.header.Get("Cache-Control"))
	}
	// The signature is the version's, not the spelling's.
	if r := h.get(modBase + "acme/vpc/aws/v1.0.0/" + rel + "?" + query); r.status != http.StatusOK {
		t.Errorf("package of 1.0.0 asked as v1.0.0 with its signature: %d %s", r.status, r.body)
	}
	// The signature is checked before anything is asked of the engine:
	// a package of a host this mirror does not serve, unsigned, is
	// refused as any unsigned package is (as the provider registry's).
	for name, path := range map[string]string{
		"unsigned":             pkg,
		"signed for 1.0.0":     modBase + "acme/vpc/aws/2.0.0/" + rel + "?" + query,
		"token, no signature":  pkg,
		"host not served":      "/" + ModulesPath("registry.example.org") + "acme/vpc/aws/1.0.0/" + rel,
		"signed for elsewhere": "/" + ModulesPath("registry.example.org") + "acme/vpc/aws/1.0.0/" + rel + "?" + query,
	} {
		hdr := []string{}
		if name == "token, no signature" {
			hdr = []string{"Authorization", bearer}
		}
		if r := h.get(path, hdr...); r.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, r.status)
		}
	}
	clock.Add(2 * time.Hour)
	if r := h.get(pkg + "?" + query); r.status != http.StatusForbidden {
		t.Errorf("expired signature: %d, want 403", r.status)
	}
}

// The front door takes a module address's parts by the Terraform
// client's rule, the one addrs.ParseModule applies (ASCII only): what
// either refuses is a 400 that never reaches the origin.
func TestModuleAddressPartsFrontDoor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddModule("acme", "vpc", "aws", "1.0.0", h.origin.TarballURL("none.tar.gz"))
	h.origin.AddModule("acme_co", "vpc-x", "aws", "1.0.0", h.origin.TarballURL("none.tar.gz"))
	for _, tc := range []struct {
		name, ns, mod, system string
		status                int
	}{
		{"plain", "acme", "vpc", "aws", 200},
		{"dash and underscore inside", "acme_co", "vpc-x", "aws", 200},
		{"system in capitals, compared in lowercase", "acme", "vpc", "AWS", 200},
		{"unicode letter in namespace", "caf%C3%A9", "vpc", "aws", 400},
		{"unicode letter in name", "acme", "v%C3%A9c", "aws", 400},
		{"unicode digit in system", "acme", "vpc", "aws%D9%A3", 400},
		{"fullwidth letters", "%EF%BD%81cme", "vpc", "aws", 400},
		{"leading dash", "-acme", "vpc", "aws", 400},
		{"trailing underscore", "acme", "vpc_", "aws", 400},
		{"dash in system", "acme", "vpc", "a-ws", 400},
		{"65 characters", strings.Repeat("a", 65), "vpc", "aws", 400},
		{"64 characters", strings.Repeat("a", 64), "vpc", "aws", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := originHost + "/" + tc.ns + "/" + tc.mod + "/" + tc.system
			if unescaped, err := url.PathUnescape(addr); err == nil {
				_, perr := addrs.ParseModule(unescaped)
				if (perr == nil) != (tc.status != 400) {
					t.Errorf("ParseModule(%q): %v, but the front door is to answer %d", unescaped, perr, tc.status)
				}
			}
			before := h.origin.Hits(fakeorigin.ModuleVersions)
			r := h.get(modBase + tc.ns + "/" + tc.mod + "/" + tc.system + "/versions")
			if r.status != tc.status {
				t.Errorf("versions: %d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.status == 400 && h.origin.Hits(fakeorigin.ModuleVersions) != before {
				t.Error("a refused address reached the origin")
			}
		})
	}
}

// A module version is one version in either spelling at the module
// registry door: the origin lists "v1.1.0", and the download answer and
// the package asked for as "1.1.0" or "v1.1.0" are one record (the origin
// asked once, in its own spelling) and one package (fetched once). A
// version that does not parse is a 400 at the door, before the origin.
func TestModuleVersionEverySpelling(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	o := h.origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one version\n")}))
	o.AddModule("acme", "vpc", "aws", "v1.1.0", o.TarballURL("m.tar.gz"))
	if r := h.get(modBase + "acme/vpc/aws/versions"); r.status != http.StatusOK || !strings.Contains(string(r.body), `"v1.1.0"`) {
		t.Fatalf("versions answer: %d %s", r.status, r.body)
	}
	var bodies [][]byte
	for _, spelled := range []string{"1.1.0", "v1.1.0", "1.1.0", "v1.1"} {
		pkg, _ := download(t, h, "acme/vpc/aws", spelled)
		r := h.get(pkg)
		if r.status != http.StatusOK {
			t.Fatalf("package asked as %s: %d %s", spelled, r.status, r.body)
		}
		bodies = append(bodies, r.body)
	}
	for i, b := range bodies {
		if !bytes.Equal(b, bodies[0]) {
			t.Errorf("package %d differs from the first", i)
		}
	}
	if n := o.Hits(fakeorigin.ModuleDownload); n != 1 {
		t.Errorf("%d download answers asked of the origin, want 1 (one version, one record)", n)
	}
	if n := o.Hits(fakeorigin.Tarball); n != 1 {
		t.Errorf("%d tarball fetches, want 1 (one version, one package)", n)
	}
	before := o.TotalHits()
	for _, bad := range []string{"latest", "vv1.1.0", "V1.1.0", "1.1.0.0", "v", "1.1.0-", "1.1.0+", "99999999999999999999.0.0", "%2E%2E", "1.1.0%2Fx"} {
		for _, file := range []string{"download", modulePackageFile} {
			if r := h.get(modBase + "acme/vpc/aws/" + bad + "/" + file); r.status != http.StatusBadRequest {
				t.Errorf("%s of version %q: %d %s, want 400", file, bad, r.status, r.body)
			}
		}
	}
	if n := o.TotalHits() - before; n != 0 {
		t.Errorf("malformed versions made %d origin requests", n)
	}
}

// A //SUBDIR the clients would not read back from a relative location
// (Terraform and OpenTofu resolve "./..." as a URL, which escapes a
// space or a letter outside ASCII, and take the //SUBDIR as written) is
// answered in an absolute location, the mirror's URL (the public one
// when in force); one they read back stays relative.
func TestModuleDownloadSubdirClientsReadBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	o := h.origin
	o.AddModule("acme", "plain", "aws", "1.0.0", "git::https://git.example.test/mono.git//modules/vpc?ref=v1")
	o.AddModule("acme", "space", "aws", "1.0.0", "git::https://git.example.test/mono.git//modules/my app?ref=v1")
	o.AddModule("acme", "accent", "aws", "1.0.0", "git::https://git.example.test/mono.git//modules/módulo?ref=v1")

	loc := func(module string) (string, http.Header) {
		t.Helper()
		r := h.get(modBase + module + "/1.0.0/download")
		if r.status != http.StatusOK {
			t.Fatalf("%s: download answer %d %s", module, r.status, r.body)
		}
		return r.header.Get("X-Terraform-Get"), r.header
	}
	if l, _ := loc("acme/plain/aws"); l != "./package.zip//modules/vpc" {
		t.Errorf("plain subdir: X-Terraform-Get %q", l)
	}
	for module, subdir := range map[string]string{"acme/space/aws": "modules/my app", "acme/accent/aws": "modules/módulo"} {
		// The harness serves plain HTTP without --insecure-http: the
		// mirror names itself https, as it does the host block's URL.
		want := "https://" + strings.TrimPrefix(h.http.URL, "http://") + modBase + module + "/1.0.0/package.zip//" + subdir
		if l, hdr := loc(module); l != want || !strings.Contains(strings.Join(hdr.Values("Vary"), ","), "Host") {
			t.Errorf("%s: X-Terraform-Get %q (Vary %q), want %q varying by Host", module, l, hdr.Values("Vary"), want)
		}
	}
	h.server.SetPublicURL("https://tfmirror.example.test/")
	if l, _ := loc("acme/space/aws"); l != "https://tfmirror.example.test"+modBase+"acme/space/aws/1.0.0/package.zip//modules/my app" {
		t.Errorf("with a public URL: X-Terraform-Get %q", l)
	}
}

// A public URL is the mirror's base URL however it ends: one set without
// its trailing slash (--public-url https://mirror.example.com, as it is
// often written) names the mirror in an absolute download location as one
// with it does, never as the host "mirror.example.comregistry".
func TestModuleDownloadLocationPublicURLWithoutSlash(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: Config{PublicURL: "https://tfmirror.example.test"}})
	h.origin.AddModule("acme", "space", "aws", "1.0.0", "git::https://git.example.test/mono.git//modules/my app?ref=v1")
	want := "https://tfmirror.example.test" + modBase + "acme/space/aws/1.0.0/package.zip//modules/my app"
	for _, public := range []string{"", "https://tfmirror.example.test"} {
		if public != "" {
			h.server.SetPublicURL(public) // a reload's
		}
		r := h.get(modBase + "acme/space/aws/1.0.0/download")
		if l := r.header.Get("X-Terraform-Get"); r.status != http.StatusOK || l != want {
			t.Errorf("public URL without its slash: %d, X-Terraform-Get %q, want %q", r.status, l, want)
		}
	}
	if u := h.server.MirrorURL(httptest.NewRequest("GET", "/", nil)); u != "https://tfmirror.example.test/" {
		t.Errorf("MirrorURL %q, want the public URL ending in /", u)
	}
	// The status page's network_mirror url, below a path prefix: the
	// clients resolve index.json against it, and drop a last segment
	// without its slash.
	h.server.SetPublicURL("https://tfmirror.example.test/tf")
	var st Status
	h.get("/?format=json").json(t, &st)
	if st.MirrorURL != "https://tfmirror.example.test/tf/" {
		t.Errorf("status page mirror_url %q, want https://tfmirror.example.test/tf/", st.MirrorURL)
	}
}

// A package the zip cannot hold (a link to a directory that holds it,
// modsource.ErrLinkLoop) is a fault of the module's source, as a package
// over the limits is: its zip, the file the download answer names, is
// answered 502 naming the link, not a 500 "internal error" that tells
// the user nothing and the operator that the mirror failed. Its tar.gz
// is still served.
func TestModuleZipLinkLoopNamed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	o := h.origin
	var tgz bytes.Buffer
	gz := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(gz)
	for _, hdr := range []*tar.Header{
		{Name: "main.tf", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
		{Name: "sub/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "sub/up", Typeflag: tar.TypeSymlink, Linkname: ".."},
	} {
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			tw.Write([]byte("#\n"))
		}
	}
	tw.Close()
	gz.Close()
	o.AddTarball("loop.tar.gz", tgz.Bytes())
	o.AddModule("acme", "loop", "aws", "1.0.0", o.TarballURL("loop.tar.gz"))

	pkg, _ := download(t, h, "acme/loop/aws", "1.0.0")
	if r := h.get(pkg); r.status != http.StatusBadGateway || !strings.Contains(string(r.body), "sub/up") {
		t.Errorf("zip of a package with a link loop: %d %s, want 502 naming the link", r.status, r.body)
	}
	if r := h.get(modBase + "acme/loop/aws/1.0.0/package.tar.gz"); r.status != http.StatusOK {
		t.Errorf("its tar.gz: %d %s", r.status, r.body)
	}
}

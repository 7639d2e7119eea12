package main

// The CLI releases door end to end: the mirror as `tfmirror serve` wires
// it, before the stand-in HashiCorp and OpenTofu origins (each signing
// with a key of its own, configured as trusted), and the real installers
// (tenv; .ci/run installs it, pinned) installing through it.

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hcversion "github.com/hashicorp/go-version"
	hcproduct "github.com/hashicorp/hc-install/product"
	hcreleases "github.com/hashicorp/hc-install/releases"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/ocitest"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/proxy/releasesdoor"
)

// tenvTool is tenv, pinned as .ci/run installs it.
var tenvTool = ocitest.Tool{Name: "tenv", Env: "TFMIRROR_TENV", Package: "github.com/tofuutils/tenv/v4/cmd/tenv", Version: "v4.7.21"}

// cliMirror is a mirror before a stand-in release origin.
type cliMirror struct {
	origin  *fakeorigin.Releases
	mirror  *server
	url     string // https://127.0.0.1:PORT
	caFile  string
	hcKey   string // files holding the stand-in's public keys
	tofuKey string
	stop    func() // stops the mirror (start); called at the test's end too
}

// platform is this machine's, which the installers ask for.
var platform = runtime.GOOS + "_" + runtime.GOARCH

func startCLIMirror(t *testing.T, extraFlags ...string) *cliMirror {
	t.Helper()
	c := newCLIOrigin(t)
	c.start(t, filepath.Join(t.TempDir(), "data"), extraFlags...)
	return c
}

// newCLIOrigin starts the stand-in origins, with terraform 1.5.7 and
// 1.6.0 and tofu 1.8.0 for this platform and windows_amd64, and writes
// their keys to files.
func newCLIOrigin(t *testing.T) *cliMirror {
	t.Helper()
	return newCLIOriginWith(t, fakeorigin.ReleasesOptions{})
}

func newCLIOriginWith(t *testing.T, opts fakeorigin.ReleasesOptions) *cliMirror {
	t.Helper()
	o, err := fakeorigin.StartReleasesWith(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	o.Add("hashicorp", "terraform", "1.5.7", platform, "windows_amd64")
	o.Add("hashicorp", "terraform", "1.6.0", platform, "windows_amd64")
	o.Add("opentofu", "tofu", "1.8.0", platform, "windows_amd64")
	c := &cliMirror{origin: o}
	dir := t.TempDir()
	c.hcKey, c.tofuKey = filepath.Join(dir, "hc.asc"), filepath.Join(dir, "tofu.asc")
	if err := os.WriteFile(c.hcKey, []byte(o.HashiCorpKey), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.tofuKey, []byte(o.OpenTofuKey), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

// flags are the origin flags of a serve or a sync before c's origin.
func (c *cliMirror) flags(dataDir string) []string {
	u, _ := url.Parse(c.origin.URL)
	return []string{
		"--data-dir", dataDir,
		"--allowed-origins", u.Host,
		"--allow-private-origins",
		"--releases-hashicorp-url", c.origin.HashiCorpURL,
		"--releases-hashicorp-keys", c.hcKey,
		"--releases-opentofu-url", c.origin.OpenTofuDownloadURL,
		"--releases-opentofu-api-url", c.origin.OpenTofuAPIURL,
		"--releases-opentofu-keys", c.tofuKey,
	}
}

func (c *cliMirror) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.origin.CACertPEM)
	return pool
}

// start serves dataDir before c's origin, as `tfmirror serve` does.
func (c *cliMirror) start(t *testing.T, dataDir string, extraFlags ...string) {
	t.Helper()
	args := append(c.flags(dataDir), extraFlags...)
	noEnv := func(string) (string, bool) { return "", false }
	eff, err := parseServeConfig(args, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := newServer(eff.Config, logger, overrides{rootCAs: c.pool()})
	if err != nil {
		t.Fatal(err)
	}
	c.mirror = m
	if eff.File != nil {
		if err := m.useConfig(eff, func() (*settings.Effective, error) { return parseServeConfig(args, noEnv, io.Discard) }, new(slog.LevelVar)); err != nil {
			m.shutdown(context.Background())
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.serve(ctx, ln) }()
	c.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mirror stopped with: %v", err)
		}
	})
	t.Cleanup(c.stop)
	c.url, c.caFile = "https://"+ln.Addr().String(), m.caFile
}

// tenvTerraformEnv is tenv's environment for Terraform through the door,
// rooted in home, trusting the stand-in's HashiCorp key.
func (c *cliMirror) tenvTerraformEnv(home string) []string {
	return []string{
		"TENV_ROOT=" + filepath.Join(home, ".tenv"),
		"TFENV_REMOTE=" + c.url + "/releases/hashicorp",
		"TFENV_LIST_MODE=api",
		"TFENV_HASHICORP_PGP_KEY=" + c.hcKey,
	}
}

// tenvOpenTofuEnv is tenv's artifact mirror mode for OpenTofu through the
// door, rooted in home, trusting the stand-in's OpenTofu key. No cosign is
// on PATH, wherever the tests run: tenv then checks the .gpgsig with that
// key (the stand-in's cosign files are placeholders).
func (c *cliMirror) tenvOpenTofuEnv(t *testing.T, home string) []string {
	return []string{
		"TENV_ROOT=" + filepath.Join(home, ".tenv"),
		"TOFUENV_INSTALL_MODE=mirror",
		"TOFUENV_LIST_MODE=mirror",
		"TOFUENV_LIST_URL=" + c.url + "/releases/opentofu/api.json",
		"TOFUENV_URL_TEMPLATE=" + c.url + "/releases/opentofu/v{{ .Version }}/{{ .Artifact }}",
		"TOFUENV_OPENTOFU_PGP_KEY=" + c.tofuKey,
		"PATH=" + t.TempDir(),
	}
}

// run runs an installer with only env (and PATH, HOME, the mirror's CA).
func (c *cliMirror) run(t *testing.T, home, bin string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = home
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "SSL_CERT_FILE=" + c.caFile}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkInstalled: the installed program is the one in the origin's
// archive whose sha256 its signed SHA256SUMS lists, and it runs.
func (c *cliMirror) checkInstalled(t *testing.T, path, pub, product, version, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("not installed: %v", err)
	}
	if !bytes.Equal(got, fakeorigin.Program(product, version, platform)) {
		t.Fatalf("%s is not the program of the origin's archive", path)
	}
	line := fakeorigin.ArchiveSHA256(product, version, platform) + "  " + fakeorigin.ArchiveName(product, version, platform)
	if !bytes.Contains(c.origin.Sums(pub, product, version), []byte(line)) {
		t.Fatalf("the origin's SHA256SUMS lacks %q", line)
	}
	out, err := exec.Command(path, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("%s version: %v\n%s", path, err, out)
	}
}

// TestTenvInstallsTerraformThroughTheMirror: tenv lists and installs
// Terraform from the door, checking the signature with the publisher's
// key as it does against releases.hashicorp.com; a second install (in a
// fresh tenv) with the origin down comes from the cache.
func TestTenvInstallsTerraformThroughTheMirror(t *testing.T) {
	tenv := tenvTool.Binary(t)
	c := startCLIMirror(t)
	for i, what := range []string{"cold", "origin down"} {
		if i == 1 {
			c.origin.SetDown(true)
		}
		home := t.TempDir()
		env := c.tenvTerraformEnv(home)
		out := c.run(t, home, tenv, env, "tf", "list-remote")
		if !strings.Contains(out, "1.6.0") || !strings.Contains(out, "1.5.7") {
			t.Fatalf("%s: list-remote:\n%s", what, out)
		}
		c.run(t, home, tenv, env, "tf", "install", "1.6.0")
		c.checkInstalled(t, filepath.Join(home, ".tenv", "Terraform", "1.6.0", "terraform"), "hashicorp", "terraform", "1.6.0", "Terraform v1.6.0")
		if n := c.origin.Hits("/hc/terraform/1.6.0/" + fakeorigin.ArchiveName("terraform", "1.6.0", platform)); n != 1 {
			t.Errorf("%s: the archive was fetched %d times from the origin, want 1", what, n)
		}
		waitIdle(c.mirror.engine)
	}
}

// TestTenvListsFromTheHTMLListing: with TFENV_REMOTE on the mirror and no
// list mode set, tenv reads the HTML listing (its default for a remote
// other than HashiCorp's), at TFENV_REMOTE/terraform without a final
// slash, and installs the latest version it lists.
func TestTenvListsFromTheHTMLListing(t *testing.T) {
	tenv := tenvTool.Binary(t)
	c := startCLIMirror(t)
	home := t.TempDir()
	var env []string
	for _, e := range c.tenvTerraformEnv(home) {
		if !strings.HasPrefix(e, "TFENV_LIST_MODE=") {
			env = append(env, e)
		}
	}
	if out := c.run(t, home, tenv, env, "tf", "list-remote"); !strings.Contains(out, "1.6.0") || !strings.Contains(out, "1.5.7") {
		t.Fatalf("list-remote from the HTML listing:\n%s", out)
	}
	c.run(t, home, tenv, env, "tf", "install", "latest")
	c.checkInstalled(t, filepath.Join(home, ".tenv", "Terraform", "1.6.0", "terraform"), "hashicorp", "terraform", "1.6.0", "Terraform v1.6.0")
}

// TestTenvRemoteFileThroughTheMirror: tenv's remote configuration file,
// as the status page gives it to paste (releasesdoor.Snippets), points
// tenv at the door for Terraform and OpenTofu with no other setting but
// the publishers' keys and OpenTofu's URL template (an environment
// variable only); tenv installs both.
func TestTenvRemoteFileThroughTheMirror(t *testing.T) {
	tenv := tenvTool.Binary(t)
	c := startCLIMirror(t)
	snippets := c.status(t).CLIReleases
	_, file, ok := strings.Cut(snippets, releasesdoor.TenvRemoteFileHeader+"\n")
	if !ok {
		t.Fatalf("the status page gives no remote file for tenv:\n%s", snippets)
	}
	var yaml strings.Builder
	for line := range strings.Lines(file) {
		rest, ok := strings.CutPrefix(line, "#   ")
		if !ok {
			break
		}
		yaml.WriteString(rest)
	}
	home := t.TempDir()
	root := filepath.Join(home, ".tenv")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "remote.yaml"), []byte(yaml.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"TENV_ROOT=" + root,
		"TFENV_HASHICORP_PGP_KEY=" + c.hcKey,
		"TOFUENV_URL_TEMPLATE=" + c.url + "/releases/opentofu/v{{ .Version }}/{{ .Artifact }}",
		"TOFUENV_OPENTOFU_PGP_KEY=" + c.tofuKey,
		"PATH=" + t.TempDir(), // no cosign: tenv checks the .gpgsig
	}
	if out := c.run(t, home, tenv, env, "tf", "list-remote"); !strings.Contains(out, "1.6.0") {
		t.Fatalf("tf list-remote with the remote file:\n%s\n%s", out, yaml.String())
	}
	c.run(t, home, tenv, env, "tf", "install", "1.6.0")
	c.checkInstalled(t, filepath.Join(root, "Terraform", "1.6.0", "terraform"), "hashicorp", "terraform", "1.6.0", "Terraform v1.6.0")
	if out := c.run(t, home, tenv, env, "tofu", "list-remote"); !strings.Contains(out, "1.8.0") {
		t.Fatalf("tofu list-remote with the remote file:\n%s\n%s", out, yaml.String())
	}
	c.run(t, home, tenv, env, "tofu", "install", "1.8.0")
	c.checkInstalled(t, filepath.Join(root, "OpenTofu", "1.8.0", "tofu"), "opentofu", "tofu", "1.8.0", "OpenTofu v1.8.0")
}

// TestTenvInstallsOpenTofuThroughTheMirror: tenv's artifact mirror mode
// reads the version list and the release files from the door, checking
// the .gpgsig with the publisher's key.
func TestTenvInstallsOpenTofuThroughTheMirror(t *testing.T) {
	tenv := tenvTool.Binary(t)
	c := startCLIMirror(t)
	home := t.TempDir()
	env := c.tenvOpenTofuEnv(t, home)
	if out := c.run(t, home, tenv, env, "tofu", "list-remote"); !strings.Contains(out, "1.8.0") {
		t.Fatalf("list-remote:\n%s", out)
	}
	c.run(t, home, tenv, env, "tofu", "install", "1.8.0")
	c.checkInstalled(t, filepath.Join(home, ".tenv", "OpenTofu", "1.8.0", "tofu"), "opentofu", "tofu", "1.8.0", "OpenTofu v1.8.0")
}

// TestTenvRefusedUnderThePolicy: a version the policy holds is neither
// listed nor installable through the door.
func TestTenvRefusedUnderThePolicy(t *testing.T) {
	tenv := tenvTool.Binary(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "mirror.hcl")
	policy := "policy {\n  deny_version \"releases.hashicorp.com/hashicorp/terraform\" {\n    versions = [\"1.6.0\"]\n    reason   = \"use 1.5.7\"\n  }\n}\n"
	if err := os.WriteFile(conf, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCLIMirror(t, "--config", conf)
	home := t.TempDir()
	env := c.tenvTerraformEnv(home)
	if out := c.run(t, home, tenv, env, "tf", "list-remote"); strings.Contains(out, "1.6.0") || !strings.Contains(out, "1.5.7") {
		t.Fatalf("list-remote shows the denied version or lacks the allowed one:\n%s", out)
	}
	cmd := exec.Command(tenv, "tf", "install", "1.6.0")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "SSL_CERT_FILE=" + c.caFile}, env...)
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a denied version installed:\n%s", out)
	}
	if n := c.origin.Hits("/hc/terraform/1.6.0/" + fakeorigin.ArchiveName("terraform", "1.6.0", platform)); n != 0 {
		t.Errorf("the denied version's archive was fetched")
	}
}

// tfswitchTool is tfswitch, pinned as .ci/run installs it.
var tfswitchTool = ocitest.Tool{Name: "tfswitch", Env: "TFMIRROR_TFSWITCH", Package: "github.com/warrensbox/terraform-switcher", Version: "v1.19.0"}

// TestTfswitchListsThroughTheMirror: tfswitch --mirror reads the door's
// listing and finds the versions the origin has, the newest and the
// newest of a line.
func TestTfswitchListsThroughTheMirror(t *testing.T) {
	tfswitch := tfswitchTool.Binary(t)
	c := startCLIMirror(t)
	home := t.TempDir()
	mirror := c.url + "/releases/hashicorp/terraform"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mirror", mirror, "--show-latest"}, "1.6.0"},
		{[]string{"--mirror", mirror, "--show-latest-stable", "1.5.0"}, "1.5.7"},
		{[]string{"--mirror", mirror + "/index.json", "--show-latest"}, "1.6.0"},
	} {
		out := strings.TrimSpace(c.run(t, home, tfswitch, nil, tc.args...))
		if i := strings.LastIndexByte(out, '\n'); i >= 0 {
			out = out[i+1:] // after its log lines
		}
		if out != tc.want {
			t.Errorf("tfswitch %s: %q, want %q", strings.Join(tc.args, " "), out, tc.want)
		}
	}
}

// TestHCInstallThroughTheMirror: HashiCorp's hc-install, as the Go library
// whose ApiBaseURL points it at a mirror (its command line has no such
// setting), installs Terraform through the door, checking the signature
// with the key it is given.
func TestHCInstallThroughTheMirror(t *testing.T) {
	c := startCLIMirror(t)
	dir := t.TempDir()
	ev := &hcreleases.ExactVersion{
		Product:          hcproduct.Terraform,
		Version:          hcversion.Must(hcversion.NewVersion("1.6.0")),
		InstallDir:       dir,
		ApiBaseURL:       c.url + "/releases/hashicorp",
		ArmoredPublicKey: c.origin.HashiCorpKey,
		HTTPClient:       c.client(t),
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path, err := ev.Install(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.checkInstalled(t, path, "hashicorp", "terraform", "1.6.0", "Terraform v1.6.0")

	// A key the mirror's SHA256SUMS is not signed by: hc-install refuses.
	ev.InstallDir, ev.ArmoredPublicKey = t.TempDir(), c.origin.OpenTofuKey
	if _, err := ev.Install(ctx); err == nil {
		t.Fatal("hc-install accepted checksums signed by another key")
	}
}

// TestHCInstallBehindAPathPrefix: behind a reverse proxy that serves the
// mirror under a path (--public-url https://proxy/tfmirror/, the proxy
// stripping /tfmirror), hc-install, pointed at the door through the
// proxy, installs Terraform: the path it joins of its base URL and each
// build's url (the public URL's path and the door's prefix, twice) is
// the door's own.
func TestHCInstallBehindAPathPrefix(t *testing.T) {
	c := newCLIOrigin(t)
	var mirrorURL atomic.Pointer[url.URL]
	var mirrorTransport atomic.Pointer[http.Transport]
	front := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(mirrorURL.Load())
			r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, "/tfmirror")
			r.Out.URL.RawPath = ""
		},
		Transport: roundTripperFunc(func(r *http.Request) (*http.Response, error) { return mirrorTransport.Load().RoundTrip(r) }),
	})
	t.Cleanup(front.Close)
	c.start(t, filepath.Join(t.TempDir(), "data"), "--public-url", front.URL+"/tfmirror/")
	u, err := url.Parse(c.url)
	if err != nil {
		t.Fatal(err)
	}
	mirrorURL.Store(u)
	tr := c.client(t).Transport.(*http.Transport)
	t.Cleanup(tr.CloseIdleConnections)
	mirrorTransport.Store(tr)

	ev := &hcreleases.ExactVersion{
		Product:          hcproduct.Terraform,
		Version:          hcversion.Must(hcversion.NewVersion("1.6.0")),
		InstallDir:       t.TempDir(),
		ApiBaseURL:       front.URL + "/tfmirror/releases/hashicorp",
		ArmoredPublicKey: c.origin.HashiCorpKey,
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path, err := ev.Install(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.checkInstalled(t, path, "hashicorp", "terraform", "1.6.0", "Terraform v1.6.0")
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestSyncCLIThenSealed: sync takes CLI versions from a manifest's cli
// blocks (verified as the door verifies them); a sealed mirror on that
// data directory then lists and serves them, and only them, to tenv
// without any origin request.
func TestSyncCLIThenSealed(t *testing.T) {
	tenv := tenvTool.Binary(t)
	c := newCLIOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	m := filepath.Join(t.TempDir(), "sync.hcl")
	src := "platforms = [\"" + platform + "\"]\ncli \"terraform\" {\n  versions = [\"~> 1.6.0\"]\n}\ncli \"tofu\" {\n  versions = [\">= 1.8.0\"]\n}\n"
	if err := os.WriteFile(m, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := append(c.flags(dataDir), m)
	if code := runSync(context.Background(), args, func(string) (string, bool) { return "", false }, &stdout, &stderr,
		overrides{rootCAs: c.pool(), keepStdLog: true}); code != 0 {
		t.Fatalf("sync: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "cli summary: 2 archives fetched") {
		t.Fatalf("sync output:\n%s", stdout.String())
	}
	before := c.origin.TotalHits()

	c.start(t, dataDir, "--offline")
	home := t.TempDir()
	env := c.tenvTerraformEnv(home)
	if out := c.run(t, home, tenv, env, "tf", "list-remote"); !strings.Contains(out, "1.6.0") || strings.Contains(out, "1.5.7") {
		t.Fatalf("the sealed mirror lists:\n%s", out)
	}
	c.run(t, home, tenv, env, "tf", "install", "1.6.0")
	c.checkInstalled(t, filepath.Join(home, ".tenv", "Terraform", "1.6.0", "terraform"), "hashicorp", "terraform", "1.6.0", "Terraform v1.6.0")
	if n := c.origin.TotalHits() - before; n != 0 {
		t.Errorf("the sealed mirror made %d origin requests", n)
	}
}

// TestSyncCLIThroughRunningServe: with a tfmirror serve running on the
// data directory, sync takes a manifest's cli blocks through its admin
// socket (admin /v1/cli/*), printing what a sync that opens the data
// directory itself prints, with the same exit status, for a dry run, a
// manifest that succeeds and one that names a product the mirror does
// not serve. A
// second sync finds the archives cached; then, the origin stopped, tenv
// installs the synced version from the serve's cache.
func TestSyncCLIThroughRunningServe(t *testing.T) {
	tenv := tenvTool.Binary(t)
	c := newCLIOrigin(t)
	dir := t.TempDir()
	manifests := map[string]string{
		"good.hcl": "platforms = [\"" + platform + "\"]\ncli \"terraform\" {\n  versions = [\"~> 1.6.0\"]\n}\ncli \"tofu\" {\n  versions = [\">= 1.8.0\"]\n  platforms = [\"windows_amd64\", \"freebsd_arm\"]\n}\n",
		"bad.hcl":  "platforms = [\"" + platform + "\"]\ncli \"vault\" {\n  versions = [\">= 1.0.0\"]\n}\n",
	}
	for name, src := range manifests {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sync := func(dataDir, manifest string, flags ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args := append(append(c.flags(dataDir), flags...), filepath.Join(dir, manifest))
		code := runSync(context.Background(), args,
			func(string) (string, bool) { return "", false }, &stdout, &stderr, overrides{rootCAs: c.pool(), keepStdLog: true})
		return code, stdout.String(), stderr.String()
	}

	// The direct path, on a data directory of its own: what to expect.
	direct := filepath.Join(t.TempDir(), "direct")
	wantGood, wantGoodOut, errOut := sync(direct, "good.hcl")
	if wantGood != 0 || !strings.Contains(wantGoodOut, "cli summary: 3 archives fetched") {
		t.Fatalf("direct sync: exit %d\n%s\n%s", wantGood, wantGoodOut, errOut)
	}
	wantBad, wantBadOut, _ := sync(direct, "bad.hcl")
	if wantBad != 1 || !strings.Contains(wantBadOut, "cli vault") {
		t.Fatalf("direct sync of an unserved product: exit %d\n%s", wantBad, wantBadOut)
	}

	dataDir := filepath.Join(t.TempDir(), "data")
	wantDry, wantDryOut, errOut := sync(dataDir, "good.hcl", "--dry-run") // opens the new data directory
	if wantDry != 0 || !strings.Contains(wantDryOut, "would fetch cli terraform 1.6.0 "+platform) {
		t.Fatalf("direct dry run: exit %d\n%s\n%s", wantDry, wantDryOut, errOut)
	}
	c.start(t, dataDir)
	code, out, errOut := sync(dataDir, "good.hcl", "--dry-run")
	if code != wantDry || out != wantDryOut || !strings.Contains(errOut, "admin socket") {
		t.Fatalf("dry run through the serve: exit %d\n%s\n%s\nwant exit %d\n%s", code, out, errOut, wantDry, wantDryOut)
	}
	if n := c.origin.Hits("/hc/terraform/1.6.0/" + fakeorigin.ArchiveName("terraform", "1.6.0", platform)); n != 1 {
		t.Fatalf("a dry run fetched the archive (%d fetches)", n)
	}
	code, out, errOut = sync(dataDir, "good.hcl")
	if !strings.Contains(errOut, "working through the running tfmirror's admin socket") {
		t.Fatalf("sync did not go through the running serve:\n%s", errOut)
	}
	if code != wantGood || out != wantGoodOut {
		t.Fatalf("through the serve: exit %d\n%s\n%s\nwant exit %d\n%s", code, out, errOut, wantGood, wantGoodOut)
	}
	if !strings.Contains(errOut, "not published by the origin: cli tofu 1.8.0 freebsd_arm") {
		t.Errorf("an unpublished platform is not reported:\n%s", errOut)
	}
	code, out, errOut = sync(dataDir, "bad.hcl")
	if code != wantBad || out != wantBadOut {
		t.Fatalf("through the serve, an unserved product: exit %d\n%s\n%s\nwant exit %d\n%s", code, out, errOut, wantBad, wantBadOut)
	}
	code, out, errOut = sync(dataDir, "good.hcl")
	if code != 0 || !strings.Contains(out, "cli summary: 0 archives fetched (0 B), 3 already cached, 0 failed") {
		t.Fatalf("second sync through the serve: exit %d\n%s\n%s", code, out, errOut)
	}
	// A dry run once all is cached would fetch nothing.
	code, out, errOut = sync(dataDir, "good.hcl", "--dry-run")
	if code != 0 || strings.Contains(out, "would fetch") || !strings.Contains(out, "cli dry run: 0 archives to fetch, 3 already cached, 0 failed") {
		t.Fatalf("dry run once cached: exit %d\n%s\n%s", code, out, errOut)
	}
	archive := "/hc/terraform/1.6.0/" + fakeorigin.ArchiveName("terraform", "1.6.0", platform)
	if n := c.origin.Hits(archive); n != 2 { // once for each data directory
		t.Errorf("the archive was fetched %d times, want 2", n)
	}
	waitIdle(c.mirror.engine)

	c.origin.SetDown(true)
	home := t.TempDir()
	env := c.tenvTerraformEnv(home)
	c.run(t, home, tenv, env, "tf", "install", "1.6.0")
	c.checkInstalled(t, filepath.Join(home, ".tenv", "Terraform", "1.6.0", "terraform"), "hashicorp", "terraform", "1.6.0", "Terraform v1.6.0")
	if n := c.origin.Hits(archive); n != 2 {
		t.Errorf("the install fetched the archive from the origin (%d fetches)", n)
	}
}

// TestSyncCLIExportImportSealed: CLI versions synced into one mirror
// cross an air gap in its signed bundle. A fresh mirror that trusts the
// exporting mirror's key imports them only with the publishers' keys it
// is configured with: on its own, with the shipped keys (which did not
// sign the stand-ins' SHA256SUMS), it refuses them and keeps nothing;
// through its sealed serve, configured with the stand-ins' keys and with
// no origin reachable, it takes them and serves them at once to tenv,
// which installs the origin's program.
func TestSyncCLIExportImportSealed(t *testing.T) {
	tenv := tenvTool.Binary(t)
	c := newCLIOrigin(t)
	dataA := filepath.Join(t.TempDir(), "a")
	m := filepath.Join(t.TempDir(), "sync.hcl")
	src := "platforms = [\"" + platform + "\"]\ncli \"terraform\" {\n  versions = [\"~> 1.6.0\"]\n}\ncli \"tofu\" {\n  versions = [\">= 1.8.0\"]\n}\n"
	if err := os.WriteFile(m, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := runSync(context.Background(), append(c.flags(dataA), m), func(string) (string, bool) { return "", false }, &stdout, &stderr,
		overrides{rootCAs: c.pool(), keepStdLog: true}); code != 0 {
		t.Fatalf("sync: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	bundle := filepath.Join(t.TempDir(), "bundle.tar.gz")
	// With the shipped keys, what the stand-ins signed is not exported.
	code, out, errOut := runCommand("export", "--data-dir", dataA, bundle)
	if code != 1 || !strings.Contains(errOut, "terraform 1.6.0: its stored SHA256SUMS does not verify with the hashicorp keys in force (--releases-hashicorp-keys)") {
		t.Fatalf("export with the shipped keys: exit %d, want 1\n%s%s", code, out, errOut)
	}
	keys := []string{"--releases-hashicorp-keys", c.hcKey, "--releases-opentofu-keys", c.tofuKey}
	code, out, errOut = runCommand(append(append([]string{"export", "--data-dir", dataA}, keys...), bundle)...)
	if code != 0 || !strings.Contains(out, "cli releases: 2 archives exported") {
		t.Fatalf("export: exit %d\n%s%s", code, out, errOut)
	}
	exporter := exporterKey(t, dataA)
	c.origin.Close() // from here on, no origin answers
	hits := c.origin.TotalHits()

	dataB := filepath.Join(t.TempDir(), "b")
	code, out, errOut = runCommand("import", "--data-dir", dataB, "--trusted-export-keys", exporter, bundle)
	if code != 1 || !strings.Contains(errOut, "cli releases.hashicorp.com/hashicorp/terraform 1.6.0 refused") ||
		!strings.Contains(errOut, "does not verify with the hashicorp keys this mirror trusts (--releases-hashicorp-keys)") || strings.Contains(out, "cli releases:") {
		t.Fatalf("import with the shipped publisher keys: exit %d, want 1 and the CLI versions refused\n%s%s", code, out, errOut)
	}
	// Then through the sealed serve on dataB, configured with the
	// stand-ins' keys: what it imports it serves at once. Sealed, it
	// asks no origin, and serves both publishers with their hosts no
	// allowed origins (the defaults), as docs/cli-releases.md's sealed
	// side runs it; its status page gives the installers' settings.
	c.start(t, dataB, "--offline", "--trusted-export-keys", exporter, "--allowed-origins", "registry.terraform.io,registry.opentofu.org")
	if st := c.status(t); st.CLIReleasesOff != "" || !strings.Contains(st.CLIReleases, "TFENV_REMOTE") || !strings.Contains(st.CLIReleases, "TOFUENV_LIST_URL") {
		t.Errorf("the sealed mirror's status page: off %q, settings\n%s", st.CLIReleasesOff, st.CLIReleases)
	}
	// The serve's keys decide: keys given to the command are refused.
	code, out, errOut = runCommand(append(append([]string{"import", "--data-dir", dataB}, keys...), bundle)...)
	if code != 2 || !strings.Contains(errOut, "--releases-hashicorp-keys and --releases-opentofu-keys given, but the tfmirror serving this data directory does the import") {
		t.Fatalf("import through the serve with keys: exit %d, want 2\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCommand(append(append([]string{"export", "--data-dir", dataB}, keys...), filepath.Join(t.TempDir(), "out"))...)
	if code != 2 || !strings.Contains(errOut, "given, but the tfmirror serving this data directory does the export") {
		t.Fatalf("export through the serve with keys: exit %d, want 2\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCommand("import", "--data-dir", dataB, bundle)
	if code != 0 || !strings.Contains(out, "cli releases: 2 archives imported") || !strings.Contains(errOut, "admin socket") {
		t.Fatalf("import through the serve: exit %d\n%s%s", code, out, errOut)
	}
	// The serve counts them in its import metrics.
	if m := c.get(t, "/metrics"); !strings.Contains(m, "\n"+`tfmirror_import_packages_total{outcome="imported"} 2`+"\n") ||
		!regexp.MustCompile(`(?m)^tfmirror_import_bytes_total [1-9]`).MatchString(m) {
		t.Errorf("/metrics does not count the 2 CLI archives imported:\n%s", m)
	}
	home := t.TempDir()
	env := c.tenvTerraformEnv(home)
	if out := c.run(t, home, tenv, env, "tf", "list-remote"); !strings.Contains(out, "1.6.0") || strings.Contains(out, "1.5.7") {
		t.Fatalf("the sealed mirror lists:\n%s", out)
	}
	c.run(t, home, tenv, env, "tf", "install", "1.6.0")
	c.checkInstalled(t, filepath.Join(home, ".tenv", "Terraform", "1.6.0", "terraform"), "hashicorp", "terraform", "1.6.0", "Terraform v1.6.0")

	tofuEnv := c.tenvOpenTofuEnv(t, home)
	c.run(t, home, tenv, tofuEnv, "tofu", "install", "1.8.0")
	c.checkInstalled(t, filepath.Join(home, ".tenv", "OpenTofu", "1.8.0", "tofu"), "opentofu", "tofu", "1.8.0", "OpenTofu v1.8.0")
	if n := c.origin.TotalHits() - hits; n != 0 {
		t.Errorf("the origin was asked %d times after the export", n)
	}
	// The sealed mirror carries them on, through its serve.
	code, out, errOut = runCommand("export", "--data-dir", dataB, filepath.Join(t.TempDir(), "again"))
	if code != 0 || !strings.Contains(out, "cli releases: 2 archives exported") {
		t.Fatalf("export through the sealed serve: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCLIsUnderMinimumReleaseAge: with minimum_release_age, a version the
// stand-in released yesterday (its SHA256SUMS signed then) is neither
// listed to tenv and tfswitch nor installable by them, with the origin's
// archive never fetched; the older version installs with each; the
// status page lists the held version with its rule and the time it
// becomes available.
func TestCLIsUnderMinimumReleaseAge(t *testing.T) {
	tenv, tfswitch := tenvTool.Binary(t), tfswitchTool.Binary(t)
	c := newCLIOriginWith(t, fakeorigin.ReleasesOptions{HashiCorpShortID: true})
	signed := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	c.origin.SetVersionSignedAt("terraform", "1.6.0", signed)
	conf := filepath.Join(t.TempDir(), "mirror.hcl")
	if err := os.WriteFile(conf, []byte("policy {\n  minimum_release_age = \"72h\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.start(t, filepath.Join(t.TempDir(), "data"), "--config", conf)
	home := t.TempDir()
	env := c.tenvTerraformEnv(home)
	if out := c.run(t, home, tenv, env, "tf", "list-remote"); strings.Contains(out, "1.6.0") || !strings.Contains(out, "1.5.7") {
		t.Fatalf("list-remote under the age gate:\n%s", out)
	}
	cmd := exec.Command(tenv, "tf", "install", "1.6.0")
	cmd.Dir = home
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "SSL_CERT_FILE=" + c.caFile}, env...)
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a version released yesterday installed:\n%s", out)
	}
	c.run(t, home, tenv, env, "tf", "install", "1.5.7")
	c.checkInstalled(t, filepath.Join(home, ".tenv", "Terraform", "1.5.7", "terraform"), "hashicorp", "terraform", "1.5.7", "Terraform v1.5.7")

	p := startKeyProxy(t, map[string][]byte{"www.hashicorp.com/.well-known/pgp-key.txt": []byte(c.origin.HashiCorpKey)})
	args := c.tfswitchArgs(t, "tfswitch --mirror ", "VERSION")
	latest := append(args[:len(args)-1:len(args)-1], "--show-latest")
	if out := strings.TrimSpace(c.run(t, t.TempDir(), tfswitch, nil, latest...)); !strings.HasSuffix(out, "\n1.5.7") && out != "1.5.7" {
		t.Errorf("tfswitch --show-latest: %q, want 1.5.7", out)
	}
	swHome := t.TempDir()
	cmd = exec.Command(tfswitch, append([]string{"--bin", filepath.Join(swHome, "terraform"), "--install", swHome}, c.tfswitchArgs(t, "tfswitch --mirror ", "1.6.0")...)...)
	cmd.Dir = swHome
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + swHome, "SSL_CERT_FILE=" + caBundle(t, c.caFile, p.CAFile), "HTTPS_PROXY=" + p.URL}
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("tfswitch installed a version released yesterday:\n%s", out)
	}
	bin := c.tfswitchInstall(t, tfswitch, p, t.TempDir(), "terraform", c.tfswitchArgs(t, "tfswitch --mirror ", "1.5.7")...)
	c.checkInstalled(t, bin, "hashicorp", "terraform", "1.5.7", "Terraform v1.5.7")

	if n := c.origin.Hits("/hc/terraform/1.6.0/" + fakeorigin.ArchiveName("terraform", "1.6.0", platform)); n != 0 {
		t.Errorf("the held version's archive was fetched %d times", n)
	}
	st := c.status(t)
	var held *unsigned.Version
	for i, w := range st.Withheld {
		if w.Provider == "releases.hashicorp.com/hashicorp/terraform" && w.Version == "1.6.0" {
			held = &st.Withheld[i]
		}
	}
	if held == nil || held.Kind != "cli" || held.Rule != policy.RuleMinReleaseAge || !held.AvailableAt.Equal(signed.Add(72*time.Hour)) {
		t.Fatalf("status page: %+v, want terraform 1.6.0 held until %s (all: %+v)", held, signed.Add(72*time.Hour), st.Withheld)
	}
	if st.HeldBack == nil || st.HeldBack.Versions != 1 {
		t.Errorf("status page summary: %+v", st.HeldBack)
	}
}

// status reads the mirror's status page as JSON.
func (c *cliMirror) status(t *testing.T) proxy.Status {
	t.Helper()
	var st proxy.Status
	if err := json.Unmarshal([]byte(c.get(t, "/?format=json")), &st); err != nil {
		t.Fatalf("status page: %v", err)
	}
	return st
}

// get returns the body of the mirror's answer to path, failing the test
// unless it is 200.
func (c *cliMirror) get(t *testing.T, path string) string {
	t.Helper()
	ca, err := os.ReadFile(c.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(c.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
	}
	return string(body)
}

// tfswitchArgs are the arguments of the status page's tfswitch line that
// starts with prefix, for version.
func (c *cliMirror) tfswitchArgs(t *testing.T, prefix, version string) []string {
	t.Helper()
	for _, line := range strings.Split(c.status(t).CLIReleases, "\n") {
		if strings.HasPrefix(line, prefix) {
			args := strings.Fields(line)[1:]
			for i, a := range args {
				if a == "VERSION" {
					args[i] = version
				}
			}
			return args
		}
	}
	t.Fatalf("the status page has no line %q", prefix)
	return nil
}

// tfswitchInstall runs tfswitch with args in home, the proxy p standing
// in for the internet, and returns where it put the program exe.
func (c *cliMirror) tfswitchInstall(t *testing.T, tfswitch string, p *keyProxy, home, exe string, args ...string) string {
	t.Helper()
	bin := filepath.Join(home, "bin", exe)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"HTTPS_PROXY=" + p.URL, "SSL_CERT_FILE=" + caBundle(t, c.caFile, p.CAFile)}
	c.run(t, home, tfswitch, env, append([]string{"--bin", bin, "--install", home}, args...)...)
	return bin
}

// TestTfswitchInstallsOpenTofuThroughTheMirror: tfswitch, as the status
// page says to run it for OpenTofu, reads the door's version list and
// downloads the archive, tofu_VERSION_SHA256SUMS and its .gpgsig from it,
// checking them with the key it fetches from
// https://get.opentofu.org/opentofu.asc (here the stand-in's, through a
// proxy on loopback): the program it installs is the origin's and runs.
// With the key already in its install directory, as on a runner with no
// way out but the mirror, it asks nothing else.
func TestTfswitchInstallsOpenTofuThroughTheMirror(t *testing.T) {
	tfswitch := tfswitchTool.Binary(t)
	c := startCLIMirror(t)
	p := startKeyProxy(t, map[string][]byte{"get.opentofu.org/opentofu.asc": []byte(c.origin.OpenTofuKey)})
	args := c.tfswitchArgs(t, "tfswitch --product opentofu ", "1.8.0")
	bin := c.tfswitchInstall(t, tfswitch, p, t.TempDir(), "tofu", args...)
	c.checkInstalled(t, bin, "opentofu", "tofu", "1.8.0", "OpenTofu v1.8.0")
	if n := p.Hits("get.opentofu.org/opentofu.asc"); n != 1 {
		t.Errorf("the key was fetched %d times, want 1", n)
	}
	if n := c.origin.Hits("/tofu/download/v1.8.0/" + fakeorigin.ArchiveName("tofu", "1.8.0", platform)); n != 1 {
		t.Errorf("the archive was fetched %d times from the origin, want 1", n)
	}

	home := t.TempDir()
	keyFile := filepath.Join(home, ".terraform.versions", "opentofu_0C0AF313E5FD9F80.asc")
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(c.origin.OpenTofuKey), 0o644); err != nil {
		t.Fatal(err)
	}
	bin = c.tfswitchInstall(t, tfswitch, p, home, "tofu", args...)
	c.checkInstalled(t, bin, "opentofu", "tofu", "1.8.0", "OpenTofu v1.8.0")
	if n := p.Hits("CONNECT get.opentofu.org:443"); n != 1 {
		t.Errorf("with the key in place tfswitch went out: %d tunnels in all, want the first run's 1", n)
	}
}

// TestTfswitchInstallsTerraformThroughTheMirror: tfswitch, as the status
// page says to run it, lists Terraform from the door and downloads the
// archive, SHA256SUMS and SHA256SUMS.72D7468F.sig from it, checking the
// signature with the key it fetches from
// https://www.hashicorp.com/.well-known/pgp-key.txt (here the stand-in's,
// through a proxy on loopback). tfswitch names the signature file by
// HashiCorp's key ID whatever key it checks it with, so the stand-in
// signs with a test key whose short ID is 72D7468F
// (fakeorigin.ReleasesOptions.HashiCorpShortID).
func TestTfswitchInstallsTerraformThroughTheMirror(t *testing.T) {
	tfswitch := tfswitchTool.Binary(t)
	c := newCLIOriginWith(t, fakeorigin.ReleasesOptions{HashiCorpShortID: true})
	c.start(t, filepath.Join(t.TempDir(), "data"))
	p := startKeyProxy(t, map[string][]byte{"www.hashicorp.com/.well-known/pgp-key.txt": []byte(c.origin.HashiCorpKey)})
	bin := c.tfswitchInstall(t, tfswitch, p, t.TempDir(), "terraform", c.tfswitchArgs(t, "tfswitch --mirror ", "1.6.0")...)
	c.checkInstalled(t, bin, "hashicorp", "terraform", "1.6.0", "Terraform v1.6.0")
	if n := p.Hits("www.hashicorp.com/.well-known/pgp-key.txt"); n != 1 {
		t.Errorf("the key was fetched %d times, want 1", n)
	}
	if n := c.origin.Hits("/hc/terraform/1.6.0/" + fakeorigin.ArchiveName("terraform", "1.6.0", platform)); n != 1 {
		t.Errorf("the archive was fetched %d times from the origin, want 1", n)
	}
}

// TestCLIAgeNotDatedByAReplayedSums: an origin that lists a made-up
// newest version 9.0.0 and answers it with 1.5.7's SHA256SUMS and
// signature (the publisher's, made long ago) dates nothing by them: under
// minimum_release_age, tenv lists neither 9.0.0 nor the fresh 1.6.0, and
// installs 1.5.7 as the latest; tfswitch sees 1.5.7 as the latest.
func TestCLIAgeNotDatedByAReplayedSums(t *testing.T) {
	tenv, tfswitch := tenvTool.Binary(t), tfswitchTool.Binary(t)
	c := newCLIOrigin(t)
	now := time.Now()
	c.origin.SetSignedAt(now.Add(-24 * time.Hour))
	c.origin.SetVersionSignedAt("terraform", "1.5.7", now.Add(-90*24*time.Hour))
	c.origin.Add("hashicorp", "terraform", "9.0.0", platform)
	c.origin.ReplaySums("hashicorp", "terraform", "9.0.0", "terraform", "1.5.7")
	conf := filepath.Join(t.TempDir(), "mirror.hcl")
	if err := os.WriteFile(conf, []byte("policy {\n  minimum_release_age = \"72h\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.start(t, filepath.Join(t.TempDir(), "data"), "--config", conf)
	home := t.TempDir()
	env := c.tenvTerraformEnv(home)
	if out := c.run(t, home, tenv, env, "tf", "list-remote"); strings.Contains(out, "9.0.0") || strings.Contains(out, "1.6.0") || !strings.Contains(out, "1.5.7") {
		t.Fatalf("list-remote under the age gate, 9.0.0 answered with 1.5.7's SHA256SUMS:\n%s", out)
	}
	c.run(t, home, tenv, env, "tf", "install", "latest")
	c.checkInstalled(t, filepath.Join(home, ".tenv", "Terraform", "1.5.7", "terraform"), "hashicorp", "terraform", "1.5.7", "Terraform v1.5.7")
	args := c.tfswitchArgs(t, "tfswitch --mirror ", "VERSION")
	latest := append(args[:len(args)-1:len(args)-1], "--show-latest")
	if out := strings.TrimSpace(c.run(t, t.TempDir(), tfswitch, nil, latest...)); !strings.HasSuffix(out, "\n1.5.7") && out != "1.5.7" {
		t.Errorf("tfswitch --show-latest: %q, want 1.5.7", out)
	}
	if n := c.origin.Hits("/hc/terraform/9.0.0/" + fakeorigin.ArchiveName("terraform", "9.0.0", platform)); n != 0 {
		t.Errorf("the made-up version's archive was fetched %d times", n)
	}
}

// TestTenvGetsNoArchiveEscapingItsDirectory: a release archive its
// publisher signed holding, beside the program, entries that would
// unpack outside the installer's directory ("../", an absolute name, a
// backslash) is refused by the mirror, to tenv and to a plain GET: tenv
// installs nothing and no file lands outside its directory.
func TestTenvGetsNoArchiveEscapingItsDirectory(t *testing.T) {
	tenv := tenvTool.Binary(t)
	c := newCLIOrigin(t)
	for i, escaping := range []string{"../../../../escaped-by-dots", "/tmp/escaped-absolute-" + filepath.Base(t.TempDir()), `..\..\escaped-by-backslash`} {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		h := &zip.FileHeader{Name: "terraform", Method: zip.Deflate}
		h.SetMode(0o755)
		f, _ := zw.CreateHeader(h)
		f.Write(fakeorigin.Program("terraform", "1.6.0", platform)) //nolint:errcheck
		e, _ := zw.Create(escaping)
		e.Write([]byte("escaped\n")) //nolint:errcheck
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		version := fmt.Sprintf("1.6.%d", i+1)
		c.origin.Add("hashicorp", "terraform", version, platform)
		c.origin.SetArchiveBytes("terraform", version, platform, b.Bytes())
	}
	c.start(t, filepath.Join(t.TempDir(), "data"))
	root := t.TempDir()
	home := filepath.Join(root, "a", "b", "c", "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	env := c.tenvTerraformEnv(home)
	for i := range 3 {
		version := fmt.Sprintf("1.6.%d", i+1)
		cmd := exec.Command(tenv, "tf", "install", version)
		cmd.Dir = home
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "SSL_CERT_FILE=" + c.caFile}, env...)
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("tenv installed %s, whose archive has an entry outside its directory:\n%s", version, out)
		}
		name := fakeorigin.ArchiveName("terraform", version, platform)
		resp, err := c.client(t).Get(c.url + "/releases/hashicorp/terraform/" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && err == nil {
			// Streamed as it arrives, a refused archive ends in an
			// aborted answer: its last bytes are never sent.
			t.Errorf("%s served whole", name)
		}
	}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error { //nolint:errcheck
		if err == nil && strings.Contains(d.Name(), "escaped") {
			t.Errorf("an entry landed at %s", p)
		}
		return nil
	})
}

// client is an HTTP client trusting the mirror's certificate.
func (c *cliMirror) client(t *testing.T) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(c.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// TestReleasesDoorFollowsPublicURLReload: the URLs the releases door
// writes into HashiCorp's index.json (each build's url, which installers
// and Terrakube download from) are those of the public URL in force: a
// reload that changes public_url changes them from the next request on,
// as it changes the status page's. The door kept the URL it started with.
func TestReleasesDoorFollowsPublicURLReload(t *testing.T) {
	c := newCLIOrigin(t)
	conf := filepath.Join(t.TempDir(), "tfmirror.hcl")
	write := func(u string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte("public_url = \""+u+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("https://one.example.test/")
	c.start(t, filepath.Join(t.TempDir(), "data"), "--config", conf)
	buildURL := func() string {
		t.Helper()
		var doc struct {
			Builds []struct{ URL string } `json:"builds"`
		}
		if err := json.Unmarshal([]byte(c.get(t, "/releases/hashicorp/terraform/1.6.0/index.json")), &doc); err != nil || len(doc.Builds) == 0 {
			t.Fatalf("version index: %v %+v", err, doc)
		}
		return doc.Builds[0].URL
	}
	if u := buildURL(); !strings.HasPrefix(u, "https://one.example.test/releases/hashicorp/terraform/1.6.0/") {
		t.Fatalf("before the reload: %s", u)
	}
	write("https://two.example.test/mirror/")
	if _, err := c.mirror.reload(); err != nil {
		t.Fatal(err)
	}
	if st := c.status(t); st.MirrorURL != "https://two.example.test/mirror/" {
		t.Errorf("status page after the reload: %s", st.MirrorURL)
	}
	if u := buildURL(); !strings.HasPrefix(u, "https://two.example.test/mirror/releases/hashicorp/terraform/1.6.0/") {
		t.Errorf("after the reload: %s", u)
	}
}

// TestPolicyExplainCLIRelease: policy explain of a CLI release under a
// minimum release age dates the version as the releases door does, by
// its stored SHA256SUMS signature: a version released a year ago is
// allowed (exit 0), one released an hour ago held until its signature
// time plus the minimum age (exit 1), with the configuration file on the
// data directory and through the serve running on it; neither is "held
// until its release time is learned" while the door serves it.
func TestPolicyExplainCLIRelease(t *testing.T) {
	c := newCLIOrigin(t)
	old := time.Now().Add(-365 * 24 * time.Hour).Truncate(time.Second)
	young := time.Now().Add(-time.Hour).Truncate(time.Second)
	c.origin.SetVersionSignedAt("terraform", "1.5.7", old)
	c.origin.SetVersionSignedAt("terraform", "1.6.0", young)
	dataDir := filepath.Join(t.TempDir(), "data")
	m := filepath.Join(t.TempDir(), "sync.hcl")
	if err := os.WriteFile(m, []byte("platforms = [\""+platform+"\"]\ncli \"terraform\" {\n  versions = [\">= 1.5.0\"]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := runSync(context.Background(), append(c.flags(dataDir), m), func(string) (string, bool) { return "", false }, &stdout, &stderr,
		overrides{rootCAs: c.pool(), keepStdLog: true}); code != 0 || !strings.Contains(stdout.String(), "cli summary: 2 archives fetched") {
		t.Fatalf("sync: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	// The file serve reads, with the keys its SHA256SUMS are verified by.
	conf := filepath.Join(t.TempDir(), "mirror.hcl")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("releases_hashicorp_keys = %q\npolicy {\n  minimum_release_age = \"72h\"\n}\n", c.hcKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	const addr = "releases.hashicorp.com/hashicorp/terraform"
	check := func(how string, args ...string) {
		t.Helper()
		code, out, _ := runPolicyExplain(t, append(args, "--data-dir", dataDir, addr, "1.5.7")...)
		if code != 0 || !strings.Contains(out, "provider "+addr+" 1.5.7: allowed\n") || !strings.Contains(out, "released:   "+old.UTC().Format(time.RFC3339)) {
			t.Errorf("%s: 1.5.7 released a year ago: exit %d, want 0, allowed, with its release time\n%s", how, code, out)
		}
		code, out, _ = runPolicyExplain(t, append(args, "--data-dir", dataDir, addr, "1.6.0")...)
		if code != 1 || !strings.Contains(out, "1.6.0: held back (min_release_age) until "+young.Add(72*time.Hour).UTC().Format(time.RFC3339)) {
			t.Errorf("%s: 1.6.0 released an hour ago: exit %d, want 1, held until %s\n%s", how, code, young.Add(72*time.Hour).UTC().Format(time.RFC3339), out)
		}
	}
	check("--config on the data directory", "--config", conf)
	c.start(t, dataDir, "--config", conf)
	waitAdminSocket(t, dataDir)
	check("through the serve")
	check("--config through the serve", "--config", conf)
	// The door agrees: the old version's SHA256SUMS is served, the young one's held.
	client := c.client(t)
	for version, want := range map[string]int{"1.5.7": http.StatusOK, "1.6.0": http.StatusUnavailableForLegalReasons} {
		resp, err := client.Get(c.url + "/releases/hashicorp/terraform/" + version + "/terraform_" + version + "_SHA256SUMS")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("the door's answer for terraform %s: %d, want %d", version, resp.StatusCode, want)
		}
	}
}

package main

// End-to-end tests: the real terraform binary installs providers through a
// tfmirror wired exactly as `tfmirror serve` wires it, in front of a fake
// origin registry on loopback.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/leakcheck"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// waitIdle returns when no origin fetch or archive download of engine runs.
func waitIdle(engine *mirror.Engine) { mirror.WaitIdle(context.Background(), engine) }

// terraformBinary finds terraform; in CI its absence fails the test.
func terraformBinary(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("terraform")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("terraform is required in CI: %v", err)
		}
		t.Skipf("terraform not installed: %v", err)
	}
	return path
}

type e2e struct {
	t       *testing.T
	tf      string // the client binary: terraform, or OpenTofu's tofu
	origin  *fakeorigin.Origin
	mirror  *server
	url     string // https://127.0.0.1:PORT/
	caFile  string
	dataDir string
	cliConf string
	stop    func()
	// logTo, when set, receives the mirror's log as JSON at debug level
	// (set before startMirror), instead of the test's log at info level.
	logTo io.Writer
	// config, when set (before startMirror), is the configuration file
	// the mirror reads as `tfmirror serve --config` does, again on SIGHUP.
	config string
	// configOnly: the mirror is started with --config alone, every
	// setting (the data directory too) from the file.
	configOnly bool
	// originRoots, when set (before startMirror), are the CAs the mirror
	// trusts for TLS to origins instead of the fake origin's: an empty
	// pool makes every origin's certificate one it cannot check.
	originRoots *x509.CertPool
}

// origins the tests serve: the public registries' names and a private one.
const (
	privateRegistry = "registry.example.test"
	tofuRegistry    = "registry.opentofu.org"
)

// e2eOrigins are the host names the fake origin answers as, for the mirror.
var e2eOrigins = []string{tfRegistry, tofuRegistry, privateRegistry}

func newE2E(t *testing.T, originOpts fakeorigin.Options, extraFlags ...string) *e2e {
	t.Helper()
	return newClientE2E(t, terraformBinary(t), originOpts, extraFlags...)
}

// newClientE2E is newE2E with the client binary client (terraform or tofu).
func newClientE2E(t *testing.T, client string, originOpts fakeorigin.Options, extraFlags ...string) *e2e {
	t.Helper()
	e := &e2e{t: t, tf: client}
	originOpts.Hostnames = e2eOrigins
	origin, err := fakeorigin.Start(originOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	e.origin = origin
	e.startMirror(filepath.Join(t.TempDir(), "data"), extraFlags...)
	e.cliConf = filepath.Join(t.TempDir(), "cli.tfrc")
	conf := fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", e.url)
	if err := os.WriteFile(e.cliConf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// startMirror starts a mirror on dataDir in front of e's origin, as
// `tfmirror serve` wires it, and sets e.mirror, e.url, e.caFile and
// e.stop (called at the end of the test too).
func (e *e2e) startMirror(dataDir string, extraFlags ...string) {
	t, origin := e.t, e.origin
	t.Helper()
	e.dataDir = dataDir
	args := append([]string{
		"--data-dir", dataDir,
		"--allowed-origins", strings.Join(e2eOrigins, ","),
		"--allow-private-origins",
	}, extraFlags...)
	if e.config != "" {
		args = append(args, "--config", e.config)
	}
	if e.configOnly {
		args = []string{"--config", e.config}
	}
	noEnv := func(string) (string, bool) { return "", false }
	eff, err := parseServeConfig(args, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg := eff.Config
	var d net.Dialer
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if e.logTo != nil {
		logger = slog.New(slog.NewJSONHandler(e.logTo, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	roots := origin.CertPool()
	if e.originRoots != nil {
		roots = e.originRoots
	}
	m, err := newServer(cfg, logger, overrides{
		rootCAs: roots,
		// Provider host names resolve to the fake origin, for the mirror only.
		dialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, _, _ := net.SplitHostPort(addr); slices.Contains(e2eOrigins, host) {
				addr = origin.Addr
			}
			return d.DialContext(ctx, network, addr)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.mirror = m
	ctx, cancel := context.WithCancel(context.Background())
	stopHangup := func() {}
	if e.config != "" {
		reload := func() (*settings.Effective, error) { return parseServeConfig(args, noEnv, io.Discard) }
		if err := m.useConfig(eff, reload, new(slog.LevelVar)); err != nil {
			m.shutdown(context.Background())
			t.Fatal(err)
		}
		stopHangup = m.reloadOnHangup(ctx)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.serve(ctx, ln) }()
	e.stop = sync.OnceFunc(func() {
		stopHangup()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mirror stopped with: %v", err)
		}
	})
	t.Cleanup(e.stop)

	e.url = "https://" + ln.Addr().String() + "/"
	e.caFile = m.caFile
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// terraform runs terraform in dir with only the mirror configured.
func (e *e2e) terraform(dir string, args ...string) (string, error) {
	e.t.Helper()
	return e.terraformWith(dir, e.cliConf, e.caFile, args...)
}

// terraformWith runs terraform in dir with the CLI configuration file
// cliConf, trusting the CA certificates in caFile.
func (e *e2e) terraformWith(dir, cliConf, caFile string, args ...string) (string, error) {
	e.t.Helper()
	return runCLI(e.tf, dir, cliConf, caFile, args...)
}

// runCLI runs the client binary bin (terraform or tofu) in dir, with HOME
// there, the CLI configuration file cliConf, the CA certificates in
// caFile trusted and nothing else of the environment but PATH.
func runCLI(bin, dir, cliConf, caFile string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"TF_CLI_CONFIG_FILE=" + cliConf,
		"SSL_CERT_FILE=" + caFile,
		"CHECKPOINT_DISABLE=1",
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func writeConfig(t *testing.T, providers map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("terraform {\n  required_providers {\n")
	for name, src := range providers {
		source, version, _ := strings.Cut(src, "@")
		fmt.Fprintf(&b, "    %s = {\n      source  = %q\n      version = %q\n    }\n", name, source, version)
	}
	b.WriteString("  }\n}\n")
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestTerraformInitThroughMirror(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true})
	e.origin.AddProvider("hashicorp", "random", []string{"3.5.0", "3.6.0"}, []string{"linux_amd64", "darwin_arm64", "windows_amd64"})
	e.origin.AddProvider("acme", "widget", []string{"0.1.0"}, []string{"linux_amd64", "darwin_arm64"})
	providers := map[string]string{
		"random": "hashicorp/random@3.6.0",
		"widget": privateRegistry + "/acme/widget@0.1.0",
	}

	dir := writeConfig(t, providers)
	out, err := e.terraform(dir, "init", "-no-color")
	if err != nil {
		t.Fatalf("terraform init through the mirror failed: %v\n%s", err, out)
	}
	t.Logf("terraform init:\n%s", out)
	for _, plugin := range []string{
		"registry.terraform.io/hashicorp/random/3.6.0/linux_amd64/terraform-provider-random_v3.6.0",
		privateRegistry + "/acme/widget/0.1.0/linux_amd64/terraform-provider-widget_v0.1.0",
	} {
		if _, err := os.Stat(filepath.Join(dir, ".terraform", "providers", plugin)); err != nil {
			t.Errorf("provider not installed: %v", err)
		}
	}
	fetched := e.origin.Hits(fakeorigin.Archive)
	if fetched != 2 {
		t.Errorf("origin archive fetches after the first init = %d, want 2", fetched)
	}

	// A second init in a fresh directory is served from the cache.
	waitIdle(e.mirror.engine)
	dir2 := writeConfig(t, providers)
	if out, err := e.terraform(dir2, "init", "-no-color"); err != nil {
		t.Fatalf("second terraform init failed: %v\n%s", err, out)
	}
	if n := e.origin.Hits(fakeorigin.Archive); n != fetched {
		t.Errorf("second init fetched %d more archives from the origin, want 0", n-fetched)
	}

	// terraform providers lock fetches every named platform from the
	// mirror and records their hashes.
	out, err = e.terraform(dir2, "providers", "lock", "-no-color", "-net-mirror="+e.url,
		"-platform=linux_amd64", "-platform=darwin_arm64")
	if err != nil {
		t.Fatalf("terraform providers lock failed: %v\n%s", err, out)
	}
	lock, err := os.ReadFile(filepath.Join(dir2, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	// Terraform records the h1: hash of every platform it fetched.
	for _, pl := range []string{"linux_amd64", "darwin_arm64"} {
		data := e.origin.Archive("hashicorp", "random", "3.6.0", pl)
		h1, err := verify.H1(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(lock, []byte(h1)) {
			t.Errorf("lock file lacks %s's hash %s:\n%s", pl, h1, lock)
		}
	}
}

func TestTerraformInitRefusesTamperedArchive(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	e.origin.AddProvider("hashicorp", "null", []string{"3.2.0"}, []string{"linux_amd64"})
	e.origin.TamperArchive("hashicorp", "null", "3.2.0", "linux_amd64", true)
	sha := e.origin.SHA256("hashicorp", "null", "3.2.0", "linux_amd64")

	dir := writeConfig(t, map[string]string{"null": "hashicorp/null@3.2.0"})
	out, err := e.terraform(dir, "init", "-no-color")
	if err == nil {
		t.Fatalf("terraform init succeeded with a tampered archive:\n%s", out)
	}
	waitIdle(e.mirror.engine)
	if _, err := e.mirror.store.StatBlob(sha); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("the tampered archive is cached: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".terraform", "providers", "registry.terraform.io", "hashicorp", "null")); err == nil {
		t.Error("terraform installed the tampered provider")
	}
}

func TestConcurrentColdDownloadsOverTLS(t *testing.T) {
	t.Parallel()
	const clients = 20
	e := newE2E(t, fakeorigin.Options{ArchiveSize: 4 << 20})
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	want := e.origin.Archive("hashicorp", "random", "3.6.0", "linux_amd64")

	client := trustingClient(t, e.caFile)
	url := e.url + "registry.terraform.io/hashicorp/random/terraform-provider-random_3.6.0_linux_amd64.zip"

	var wg sync.WaitGroup
	bodies := make([][]byte, clients)
	errs := make([]error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(url)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				errs[i] = fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			bodies[i], errs[i] = io.ReadAll(resp.Body)
		}()
	}
	wg.Wait()
	for i := range clients {
		if errs[i] != nil || !bytes.Equal(bodies[i], want) {
			t.Fatalf("client %d: %v, %d bytes (want %d)", i, errs[i], len(bodies[i]), len(want))
		}
	}
	if n := e.origin.ArchiveHits("hashicorp", "random", "3.6.0", "linux_amd64"); n != 1 {
		t.Errorf("origin archive fetches = %d, want 1", n)
	}
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(signalsChildEnv); mode != "" {
		os.Exit(signalsChild(mode))
	}
	// Service discovery logs through the standard logger.
	log.SetOutput(io.Discard)
	code := m.Run()
	removeBinary()
	if code == 0 {
		// Every goroutine a serve, sync or command started has ended
		// with it.
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestProvidersBypassingTheMirror: the README's way to let some providers
// bypass the mirror, tried with terraform: the mirror's block excludes
// them and a direct block includes them (terraform asks the first block
// that matches a provider for its package, and a mirror that does not
// serve it cannot hand it on). The bypassing provider is installed from
// its own registry, the others through the mirror, which is not asked
// for the bypassing one.
func TestProvidersBypassingTheMirror(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	e.origin.AddProvider("acme", "widget", []string{"0.1.0"}, registryPlatforms())
	originCA, err := e.origin.CAFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mirrorCA, err := os.ReadFile(e.caFile)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.ReadFile(originCA)
	if err != nil {
		t.Fatal(err)
	}
	both := filepath.Join(t.TempDir(), "both.pem")
	if err := os.WriteFile(both, append(append(mirrorCA, '\n'), theirs...), 0o644); err != nil {
		t.Fatal(err)
	}
	// "localhost" is the registry terraform reaches directly: the fake
	// origin, by a host block (the mirror does not serve that host).
	conf := fmt.Sprintf(`provider_installation {
  network_mirror {
    url     = %q
    exclude = ["localhost/*/*"]
  }
  direct {
    include = ["localhost/*/*"]
  }
}
host "localhost" {
  services = {
    "providers.v1" = %q
  }
}
`, e.url, e.origin.URL+"/v1/providers/")
	cliConf := filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(cliConf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := writeConfig(t, map[string]string{"random": "hashicorp/random@3.6.0", "widget": "localhost/acme/widget@0.1.0"})
	out, err := e.terraformWith(dir, cliConf, both, "init", "-no-color")
	if err != nil {
		t.Fatalf("terraform init with a provider bypassing the mirror: %v\n%s", err, out)
	}
	for _, plugin := range []string{
		"registry.terraform.io/hashicorp/random/3.6.0/linux_amd64/terraform-provider-random_v3.6.0",
		"localhost/acme/widget/0.1.0/linux_amd64/terraform-provider-widget_v0.1.0",
	} {
		if _, err := os.Stat(filepath.Join(dir, ".terraform", "providers", plugin)); err != nil {
			t.Errorf("provider not installed: %v\n%s", err, out)
		}
	}
	// Installed from its registry, the publisher's signature checked
	// (through the mirror it would say "verified checksum").
	if !strings.Contains(out, "Installed localhost/acme/widget v0.1.0 (self-signed") {
		t.Errorf("the bypassing provider was not installed from its registry:\n%s", out)
	}
	code, body := e.get(t, "?format=json")
	var st proxy.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
		t.Fatalf("status: %d %v", code, err)
	}
	through := false
	for _, p := range st.Providers {
		through = through || p.Address == "registry.terraform.io/hashicorp/random"
	}
	if !through {
		t.Errorf("hashicorp/random was not installed through the mirror: %+v", st.Providers)
	}
}

// TestTerraformInitWhileOriginStalls: an origin that stalls (slow, not
// down) on the refresh of a version list the mirror holds, past its time
// to live, does not fail terraform init, which gives up on a JSON answer
// after 10 seconds: the mirror answers with the cached list after a few
// seconds, and the archive from its cache.
func TestTerraformInitWhileOriginStalls(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{}, "--versions-ttl", "1s")
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	providers := map[string]string{"random": "hashicorp/random@3.6.0"}
	if out, err := e.terraform(writeConfig(t, providers), "init", "-no-color"); err != nil {
		t.Fatalf("first init: %v\n%s", err, out)
	}
	waitIdle(e.mirror.engine)
	time.Sleep(1100 * time.Millisecond) // the list's time to live runs out (a real clock's)

	e.origin.SetLatency(12 * time.Second) // longer than terraform waits (10 s)
	t.Cleanup(func() { e.origin.SetLatency(0) })
	out, err := e.terraform(writeConfig(t, providers), "init", "-no-color")
	if err != nil {
		t.Fatalf("terraform init with the origin stalling and the list cached: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Installed hashicorp/random v3.6.0") {
		t.Errorf("hashicorp/random not installed:\n%s", out)
	}
}

// TestHostBlockOfAnIDNOrigin: the host block the status page gives for an
// origin whose name is not ASCII is one terraform takes: labelled with
// the name in Unicode (terraform refuses a block labelled in punycode,
// and skips it: installs would then bypass the mirror), its services
// this mirror's URLs.
func TestHostBlockOfAnIDNOrigin(t *testing.T) {
	t.Parallel()
	const idn = "registry.bücher.example"
	e := newE2E(t, fakeorigin.Options{}, "--allowed-origins", strings.Join(append(slices.Clone(e2eOrigins), idn), ","))
	code, body := e.get(t, "?format=json")
	var st proxy.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
		t.Fatalf("status: %d %v", code, err)
	}
	block := st.HostBlocks["registry.xn--bcher-kva.example"] // keyed by the name in comparison form
	if !strings.HasPrefix(block, `host "`+idn+`" {`) {
		t.Fatalf("the host block of %s:\n%s", idn, block)
	}
	conf := filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(conf, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := e.terraformWith(t.TempDir(), conf, e.caFile, "version")
	if err != nil || strings.Contains(out, "Error") {
		t.Errorf("terraform with the status page's host block: %v\n%s", err, out)
	}
}

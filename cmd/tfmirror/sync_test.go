package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// syncPlatforms are the three platforms the sync tests ask for.
var syncPlatforms = []string{"linux_amd64", "darwin_arm64", "windows_amd64"}

// syncOrigin starts a fake origin with two providers, each with versions
// inside and outside the constraints of syncManifest.
func syncOrigin(t *testing.T) *fakeorigin.Origin {
	t.Helper()
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: []string{tfRegistry}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	all := append([]string{"linux_arm64"}, syncPlatforms...)
	origin.AddProvider("hashicorp", "random", []string{"3.4.0", "3.5.0", "3.6.0", "4.0.0"}, all)
	origin.AddProvider("acme", "widget", []string{"0.1.0", "0.2.0", "1.0.0"}, all)
	return origin
}

// syncManifest writes a manifest naming the two providers of syncOrigin,
// at host, with constraints and the three platforms: random 3.5.0 and
// 3.6.0, widget 0.2.0, each for three platforms: 9 packages.
func syncManifest(t *testing.T, host, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mirror.hcl")
	body := fmt.Sprintf(`platforms = ["linux_amd64", "darwin_arm64", "windows_amd64"]

provider "%[1]s/hashicorp/random" {
  versions = ["~> 3.5"]
}

provider "%[1]s/acme/widget" {
  versions = [">= 0.1, < 1.0"]
  latest   = 1
}
%[2]s`, host, extra)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// syncProcess runs `tfmirror sync` as a subprocess against dataDir, and
// returns its stdout, stderr and exit status.
func syncProcess(t *testing.T, bin, dataDir string, origin *fakeorigin.Origin, caFile string, args ...string) (string, string, int) {
	t.Helper()
	return runProcessEnv(t, bin, "", append(os.Environ(), "SSL_CERT_FILE="+caFile), append([]string{"sync",
		"--data-dir", dataDir,
		"--allowed-origins", origin.Addr,
		"--allow-private-origins",
	}, args...)...)
}

// terraformInitOffline runs terraform init through p for random ~> 3.5
// and widget 0.2.0 of registry.terraform.io, and checks what it installed.
// (Terraform cannot use a network mirror for a provider host with a port.)
func terraformInitOffline(t *testing.T, tf string, p *proc, dataDir string) {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`terraform {
  required_providers {
    random = {
      source  = "%[1]s/hashicorp/random"
      version = "~> 3.5"
    }
    widget = {
      source  = "%[1]s/acme/widget"
      version = "0.2.0"
    }
  }
}
`, tfRegistry)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cliConf := filepath.Join(dir, "cli.tfrc")
	conf := fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", p.url)
	if err := os.WriteFile(cliConf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(tf, dir, cliConf, filepath.Join(dataDir, "tls", "ca.pem"), "init", "-no-color")
	if err != nil {
		t.Fatalf("terraform init through serve --offline failed: %v\n%s", err, out)
	}
	for _, plugin := range []string{
		tfRegistry + "/hashicorp/random/3.6.0/linux_amd64/terraform-provider-random_v3.6.0",
		tfRegistry + "/acme/widget/0.2.0/linux_amd64/terraform-provider-widget_v0.2.0",
	} {
		if _, err := os.Stat(filepath.Join(dir, ".terraform", "providers", plugin)); err != nil {
			t.Errorf("provider not installed: %v", err)
		}
	}
}

// syncInProcess runs `tfmirror sync` in this process, with
// registry.terraform.io routed to origin, and returns its stdout, stderr
// and exit status.
func syncInProcess(t *testing.T, origin *fakeorigin.Origin, dataDir string, args ...string) (string, string, int) {
	t.Helper()
	var stdout bytes.Buffer
	stderr := &oneWriteAtATime{t: t}
	code := runSync(context.Background(), append([]string{
		"--data-dir", dataDir,
		"--allowed-origins", tfRegistry,
		"--allow-private-origins",
	}, args...), func(string) (string, bool) { return "", false }, &stdout, stderr, overrides{
		rootCAs:     origin.CertPool(),
		dialContext: routeRegistryTo(origin),
		keepStdLog:  true,
	})
	t.Logf("tfmirror sync %v: exit %d\nstdout:\n%sstderr:\n%s", args, code, stdout.String(), stderr.b.String())
	return stdout.String(), stderr.b.String(), code
}

// oneWriteAtATime is a buffer that fails the test when two Writes
// overlap: sync's progress and log lines, written from the fetches'
// goroutines, must reach stderr one at a time, whatever writer it is.
type oneWriteAtATime struct {
	t       *testing.T
	writing atomic.Bool
	b       bytes.Buffer
}

func (w *oneWriteAtATime) Write(p []byte) (int, error) {
	if !w.writing.CompareAndSwap(false, true) {
		w.t.Errorf("two writes to stderr at once; the second: %q", p)
		return len(p), nil
	}
	defer w.writing.Store(false)
	time.Sleep(100 * time.Microsecond) // long enough for another to overlap
	return w.b.Write(p)
}

// TestSyncAloneThenServeOffline: sync with no mirror running opens the
// data directory itself (a stale admin socket left by a killed process
// does not stop it), fills it with exactly the packages the manifest
// selects, does nothing on a second run, and a sealed serve --offline on
// the directory lets terraform init install them with the origin down.
func TestSyncAloneThenServeOffline(t *testing.T) {
	t.Parallel()
	tf := terraformBinary(t)
	bin := buildBinary(t)
	origin := syncOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A socket file nobody listens on, as a killed serve leaves it.
	ln, err := net.Listen("unix", admin.SocketPath(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	// A child that another test forks at this moment holds the listener
	// until it execs: wait until nobody does.
	for deadline := time.Now().Add(time.Minute); ; {
		c, err := net.Dial("unix", admin.SocketPath(dataDir))
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the closed admin socket still accepts connections")
		}
		time.Sleep(10 * time.Millisecond)
	}
	manifestPath := syncManifest(t, tfRegistry, "")

	stdout, stderr, code := syncInProcess(t, origin, dataDir, manifestPath)
	if code != 0 {
		t.Fatalf("first sync exited %d", code)
	}
	if !strings.Contains(stderr, "opened the data directory") {
		t.Error("sync did not open the data directory itself")
	}
	for _, want := range []string{"0 of 9 packages already cached; 9 to fetch", "sync summary: 9 provider packages fetched"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("first sync output lacks %q", want)
		}
	}
	if n := origin.Hits(fakeorigin.Archive); n != 9 {
		t.Errorf("origin archive requests = %d, want 9", n)
	}
	for _, v := range []string{"3.5.0", "3.6.0"} {
		for _, pl := range syncPlatforms {
			if n := origin.ArchiveHits("hashicorp", "random", v, pl); n != 1 {
				t.Errorf("random %s %s fetched %d times, want 1", v, pl, n)
			}
		}
	}
	for _, pl := range syncPlatforms {
		if n := origin.ArchiveHits("acme", "widget", "0.2.0", pl); n != 1 {
			t.Errorf("widget 0.2.0 %s fetched %d times, want 1", pl, n)
		}
	}

	stdout, _, code = syncInProcess(t, origin, dataDir, manifestPath)
	if code != 0 || !strings.Contains(stdout, "nothing to do: all 9 packages are cached") {
		t.Errorf("second sync: exit %d, want 0 and \"nothing to do\"", code)
	}
	if n := origin.Hits(fakeorigin.Archive); n != 9 {
		t.Errorf("the second sync made %d origin archive requests, want 0", n-9)
	}

	origin.SetDown(503)
	p := startProcess(t, bin, dataDir, origin, originCAFile(t, origin), "--offline", "--allowed-origins", tfRegistry)
	// The stale socket file was replaced.
	p.waitLog("admin API listening", 10*time.Second)
	terraformInitOffline(t, tf, p, dataDir)
	if n := origin.TotalHits(); n == 0 {
		t.Fatal("origin hit counters are not counting")
	}
	if n := origin.Hits(fakeorigin.Archive); n != 9 {
		t.Errorf("serve --offline made %d origin archive requests", n-9)
	}
}

// TestSyncThroughRunningServe: with tfmirror serve running on the data
// directory (holding its cache), sync works through the admin socket: the
// running engine fetches, its metrics count the packages, a second sync
// has nothing to do, and the socket is gone once serve stops.
func TestSyncThroughRunningServe(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	origin := syncOrigin(t)
	caFile := originCAFile(t, origin)
	dataDir := filepath.Join(t.TempDir(), "data")
	p := startProcess(t, bin, dataDir, origin, caFile)
	p.waitLog("admin API listening", 10*time.Second)
	if fi, err := os.Stat(admin.SocketPath(dataDir)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket: %v, mode %v, want 0600", err, fi.Mode().Perm())
	}
	manifestPath := syncManifest(t, origin.Addr, "")

	stdout, stderr, code := syncProcess(t, bin, dataDir, origin, caFile, manifestPath)
	if code != 0 {
		t.Fatalf("sync exited %d", code)
	}
	if !strings.Contains(stderr, "working through the running tfmirror's admin socket") {
		t.Error("sync did not say it worked through the running tfmirror")
	}
	if !strings.Contains(stdout, "sync summary: 9 provider packages fetched") {
		t.Error("sync did not fetch 9 packages")
	}
	if n := origin.Hits(fakeorigin.Archive); n != 9 {
		t.Errorf("origin archive requests = %d, want 9", n)
	}
	body, _, err := p.get(context.Background(), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`tfmirror_sync_packages_total{outcome="fetched"} 9`, `tfmirror_sync_packages_total{outcome="failed"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if got := len(p.status(t).cachedPlatforms()); got != 9 {
		t.Errorf("status page lists %d cached archives, want 9", got)
	}

	stdout, _, code = syncProcess(t, bin, dataDir, origin, caFile, manifestPath)
	if code != 0 || !strings.Contains(stdout, "nothing to do: all 9 packages are cached") {
		t.Errorf("second sync: exit %d, want 0 and \"nothing to do\"", code)
	}
	if n := origin.Hits(fakeorigin.Archive); n != 9 {
		t.Errorf("the second sync made %d origin archive requests, want 0", n-9)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(time.Minute); err != nil {
		t.Fatalf("serve exited with %v", err)
	}
	if _, err := os.Stat(admin.SocketPath(dataDir)); !os.IsNotExist(err) {
		t.Errorf("admin socket left behind after shutdown: %v", err)
	}
}

// TestSyncExitStatus: a sync exits non-zero when anything asked for
// failed, and still syncs the rest.
func TestSyncExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		extra       string // added to the manifest
		setup       func(*fakeorigin.Origin)
		wantCode    int
		wantFetched int // origin archive requests that succeeded
		wantOut     []string
	}{
		{
			name:        "all there",
			wantCode:    0,
			wantFetched: 9,
			wantOut:     []string{"sync summary: 9 provider packages fetched", "0 failed"},
		},
		{
			name:        "origin 404 for one provider",
			extra:       "provider \"registry.terraform.io/acme/missing\" {\n  versions = [\">= 1.0\"]\n}\n",
			wantCode:    1,
			wantFetched: 9,
			wantOut:     []string{"sync summary: 9 provider packages fetched", "1 failed", "failed: registry.terraform.io/acme/missing: version list:"},
		},
		{
			name:        "no version matches",
			extra:       "provider \"registry.terraform.io/hashicorp/null\" {\n  versions = [\"~> 9.0\"]\n}\n",
			setup:       func(o *fakeorigin.Origin) { o.AddProvider("hashicorp", "null", []string{"3.2.0"}, syncPlatforms) },
			wantCode:    1,
			wantFetched: 9,
			wantOut:     []string{`failed: registry.terraform.io/hashicorp/null: no version matches "~> 9.0" (`},
		},
		{
			name:        "one archive fails verification",
			setup:       func(o *fakeorigin.Origin) { o.TamperArchive("acme", "widget", "0.2.0", "darwin_arm64", true) },
			wantCode:    1,
			wantFetched: 8,
			wantOut:     []string{"sync summary: 8 provider packages fetched", "1 failed", "failed: registry.terraform.io/acme/widget 0.2.0 darwin_arm64:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			origin := syncOrigin(t)
			if tt.setup != nil {
				tt.setup(origin)
			}
			dataDir := filepath.Join(t.TempDir(), "data")
			stdout, _, code := syncInProcess(t, origin, dataDir, "--parallel", "2", syncManifest(t, tfRegistry, tt.extra))
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d", code, tt.wantCode)
			}
			for _, want := range tt.wantOut {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q", want)
				}
			}
			// What was fetched is cached: a second run fetches only what failed.
			before := origin.Hits(fakeorigin.Archive)
			stdout, _, _ = syncInProcess(t, origin, dataDir, syncManifest(t, tfRegistry, tt.extra))
			if again := origin.Hits(fakeorigin.Archive) - before; again != 9-tt.wantFetched {
				t.Errorf("second run fetched %d archives, want %d", again, 9-tt.wantFetched)
			}
			if want := fmt.Sprintf("%d of 9 packages already cached", tt.wantFetched); tt.wantFetched < 9 && !strings.Contains(stdout, want) {
				t.Errorf("second run output lacks %q", want)
			}
		})
	}
}

// TestSyncDryRun: --dry-run lists what a sync would fetch and downloads
// no archive.
func TestSyncDryRun(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	manifestPath := syncManifest(t, tfRegistry, "")
	stdout, _, code := syncInProcess(t, origin, dataDir, "--dry-run", manifestPath)
	if code != 0 {
		t.Errorf("dry run exited %d", code)
	}
	if n := strings.Count(stdout, "would fetch "); n != 9 {
		t.Errorf("dry run lists %d packages, want 9", n)
	}
	if !strings.Contains(stdout, "would fetch registry.terraform.io/hashicorp/random 3.5.0 darwin_arm64 (terraform-provider-random_3.5.0_darwin_arm64.zip, size unknown)") {
		t.Error("dry run does not name random 3.5.0 darwin_arm64 with its file")
	}
	if n := origin.Hits(fakeorigin.Archive); n != 0 {
		t.Errorf("dry run made %d origin archive requests", n)
	}
	if _, _, code := syncInProcess(t, origin, dataDir, manifestPath); code != 0 {
		t.Fatalf("sync exited %d", code)
	}
	stdout, _, _ = syncInProcess(t, origin, dataDir, "--dry-run", manifestPath)
	if !strings.Contains(stdout, "nothing to do") || strings.Contains(stdout, "would fetch") {
		t.Error("dry run after a sync does not say nothing to do")
	}
}

// TestSyncFromDirectory: from a directory, sync takes the lock file's
// versions and, for providers it does not lock, the newest version that
// meets the configuration's constraints, for the --platforms given.
func TestSyncFromDirectory(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dir := t.TempDir()
	files := map[string]string{
		"main.tf": `terraform {
  required_providers {
    random = {
      source  = "hashicorp/random"
      version = "~> 3.5"
    }
    widget = {
      source = "acme/widget"
    }
  }
}
`,
		".terraform.lock.hcl": `provider "registry.terraform.io/acme/widget" {
  version = "0.1.0"
  hashes  = ["h1:unchecked="]
}
`,
	}
	writeTree(t, dir, files)
	dataDir := filepath.Join(t.TempDir(), "data")
	if _, _, code := syncInProcess(t, origin, dataDir, "--platforms", "linux_amd64,windows_amd64", dir); code != 0 {
		t.Fatalf("sync exited %d", code)
	}
	for _, want := range [][4]string{
		{"hashicorp", "random", "3.6.0", "linux_amd64"}, {"hashicorp", "random", "3.6.0", "windows_amd64"},
		{"acme", "widget", "0.1.0", "linux_amd64"}, {"acme", "widget", "0.1.0", "windows_amd64"},
	} {
		if n := origin.ArchiveHits(want[0], want[1], want[2], want[3]); n != 1 {
			t.Errorf("%v fetched %d times, want 1", want, n)
		}
	}
	if n := origin.Hits(fakeorigin.Archive); n != 4 {
		t.Errorf("origin archive requests = %d, want 4", n)
	}
}

// TestSyncFromModulesThenInitOffline: sync of a configuration directory
// reads what terraform init will need from it: the providers its local
// child modules require (here in JSON syntax) and those its resources imply,
// so that terraform init of that configuration works through a sealed
// serve --offline with the origin down.
func TestSyncFromModulesThenInitOffline(t *testing.T) {
	t.Parallel()
	tf := terraformBinary(t)
	bin := buildBinary(t)
	origin := syncOrigin(t)
	config := t.TempDir()
	files := map[string]string{
		"main.tf": `module "app" {
  source = "./modules/app"
}
resource "random_id" "suffix" {}
`,
		"modules/app/versions.tf.json": `{"terraform": {"required_providers": {
  "widget": {"source": "acme/widget", "version": "0.2.0"},
  "random": {"source": "hashicorp/random", "version": "~> 3.5"}
}}}
`,
	}
	writeTree(t, config, files)
	dataDir := filepath.Join(t.TempDir(), "data")
	platform := runtime.GOOS + "_" + runtime.GOARCH
	if _, _, code := syncInProcess(t, origin, dataDir, "--platforms", platform, config); code != 0 {
		t.Fatalf("sync exited %d", code)
	}
	for _, want := range [][3]string{{"hashicorp", "random", "3.6.0"}, {"acme", "widget", "0.2.0"}} {
		if n := origin.ArchiveHits(want[0], want[1], want[2], platform); n != 1 {
			t.Errorf("%v fetched %d times, want 1", want, n)
		}
	}

	origin.SetDown(503)
	p := startProcess(t, bin, dataDir, origin, originCAFile(t, origin), "--offline", "--allowed-origins", tfRegistry)
	cliConf := filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(cliConf, []byte(fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", p.url)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(tf, config, cliConf, filepath.Join(dataDir, "tls", "ca.pem"), "init", "-no-color")
	if err != nil {
		t.Fatalf("terraform init through serve --offline failed: %v\n%s", err, out)
	}
	for _, plugin := range []string{
		tfRegistry + "/hashicorp/random/3.6.0/" + platform + "/terraform-provider-random_v3.6.0",
		tfRegistry + "/acme/widget/0.2.0/" + platform + "/terraform-provider-widget_v0.2.0",
	} {
		if _, err := os.Stat(filepath.Join(config, ".terraform", "providers", plugin)); err != nil {
			t.Errorf("provider not installed: %v", err)
		}
	}
}

// TestSyncUsageErrors: bad input is exit status 2 with a message saying
// what is wrong, before any data directory is touched.
func TestSyncUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lock := filepath.Join(dir, ".terraform.lock.hcl")
	bad := filepath.Join(dir, "bad.hcl")
	for path, body := range map[string]string{
		lock: "provider \"registry.terraform.io/hashicorp/random\" {\n  version = \"3.6.0\"\n}\n",
		bad:  "platforms = [\"linux_amd64\"]\nprovider \"hashicorp/random\" {\n  versions = [\"~> 3.5\"]\n  latset = 1\n}\n",
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no path", nil, "no PATH given"},
		{"lock file without platforms", []string{lock}, "no platforms to sync for registry.terraform.io/hashicorp/random"},
		{"bad platform", []string{"--platforms", "linux", lock}, `--platforms: invalid platform "linux"`},
		{"bad manifest", []string{bad}, "bad.hcl:4: Unsupported argument"},
		{"missing path", []string{filepath.Join(dir, "nope.hcl")}, "nope.hcl: no such file"},
		{"parallel 0", []string{"--parallel", "0", lock}, "--parallel must be between 1 and 64"},
		{"unknown flag", []string{"--listen", ":1", lock}, "flag provided but not defined: -listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			var stdout, stderr bytes.Buffer
			code := runSync(context.Background(), append([]string{"--data-dir", dataDir}, tt.args...),
				func(string) (string, bool) { return "", false }, &stdout, &stderr, overrides{keepStdLog: true})
			if code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.wantErr)
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Errorf("the data directory was created: %v", err)
			}
		})
	}
}

// writeTree writes files (slash-separated paths relative to dir, and their
// contents) below dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSyncInterrupted: a sync interrupted (Ctrl-C) while an archive is
// downloaded says so, counts the packages it did not fetch as not
// fetched, not failed, blames no origin, exits 1, and says to run it
// again; the next run fetches the rest.
func TestSyncInterrupted(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	manifest := syncManifest(t, tfRegistry, "")
	release := origin.GateArchives()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		origin.WaitArchiveStarted()
		cancel() // as the first SIGINT does
	}()
	var stdout, stderr bytes.Buffer
	code := runSync(ctx, []string{
		"--data-dir", dataDir,
		"--allowed-origins", tfRegistry,
		"--allow-private-origins",
		"--parallel", "2",
		manifest,
	}, func(string) (string, bool) { return "", false }, &stdout, &stderr, overrides{
		rootCAs:     origin.CertPool(),
		dialContext: routeRegistryTo(origin),
		keepStdLog:  true,
	})
	t.Logf("stdout:\n%sstderr:\n%s", stdout.String(), stderr.String())
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	out := stdout.String() + stderr.String()
	for _, want := range []string{
		"sync summary: 0 provider packages fetched (0 B) and 0 already cached; 0 failed, 9 not fetched (interrupted)",
		"sync interrupted: what was fetched is cached; run tfmirror sync again to fetch the rest",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, unwanted := range []string{"failed:", "waiting for the origin", "interrupted: context canceled"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("output has %q", unwanted)
		}
	}
	release()
	stdout2, _, code := syncInProcess(t, origin, dataDir, manifest)
	if code != 0 || !strings.Contains(stdout2, "sync summary: 9 provider packages fetched") {
		t.Errorf("the next run: exit %d, want 0 with the 9 packages fetched", code)
	}
}

// TestSyncNamesTheFileLineOfARefusedSetting: a value of serve's
// configuration file that sync refuses (sync --config FILE) is named with
// its line in the file, as serve and the commands on a data directory
// name it, so that the operator finds it without reading the file
// through.
func TestSyncNamesTheFileLineOfARefusedSetting(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	if err := os.WriteFile(conf, []byte("listen = \":8443\"\nlog_level = \"loud\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "mirror.hcl")
	if err := os.WriteFile(manifest, []byte("provider \"registry.terraform.io/hashicorp/aws\" {\n  versions = [\"5.0.0\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runSync(context.Background(), []string{"--config", conf, "--data-dir", filepath.Join(dir, "data"), "--platforms", "linux_amd64", manifest},
		func(string) (string, bool) { return "", false }, &stdout, &stderr, overrides{})
	if code != 2 || !strings.Contains(stderr.String(), `--log-level "loud"`) || !strings.Contains(stderr.String(), "log_level at "+conf+":2,") {
		t.Errorf("sync --config with a log_level it refuses: exit %d, stderr:\n%s\nwant 2, the value named with its line in the file", code, stderr.String())
	}
}

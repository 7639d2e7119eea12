package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/certs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// Providers the origins serve.
const (
	bigNS, bigType   = "bench", "big"  // one platform, large archives (figures 1, 3, 4, 5, 7)
	jsonNS, jsonType = "bench", "json" // many versions and platforms, small archives (figure 2)
	tfNS             = "hashicorp"     // figure 6: tfp0, tfp1, ...
	tfHost           = "registry.terraform.io"
	platform         = "linux_amd64"
	warmVersion      = "1.0.0"
)

// env is everything the figures share.
type env struct {
	cfg    config
	dir    string
	pool   *x509.CertPool // trusts the mirror and nginx
	caFile string
	tls    certs.Files
	// staticRoot is nginx's document root: the static mirror of figures
	// 1 and 2 and the `terraform providers mirror` output of figure 6.
	staticRoot string
	mirror     *mirrorProc
	nginx      *nginxProc
	big        *fakeorigin.Origin
	json       *fakeorigin.Origin
	tf         *fakeorigin.Origin
	// releases is the stand-in CLI release origin of figure 11;
	// releasesHost its host:port.
	releases     *fakeorigin.Releases
	releasesHost string
	report       *report

	bin        string   // the tfmirror binary
	mirrorArgs []string // its flags
	mirrorEnv  []string // and environment
	starts     int      // how many times it was started
}

// startMirror starts (or restarts) the tfmirror subprocess.
func (e *env) startMirror(ctx context.Context) error {
	if e.mirror != nil {
		e.mirror.stop(syscall.SIGTERM, 30*time.Second)
	}
	e.starts++
	m, err := startMirror(ctx, e.bin, e.dir, fmt.Sprintf("mirror-%d.log", e.starts), e.mirrorArgs, e.mirrorEnv)
	if err != nil {
		return err
	}
	e.mirror = m
	return nil
}

func (e *env) want(fig int) bool { return e.cfg.want(fig) }

// want reports whether -only selects figure fig.
func (c config) want(fig int) bool {
	if c.Only == "" {
		return true
	}
	for _, f := range strings.Split(c.Only, ",") {
		if strings.TrimSpace(f) == fmt.Sprint(fig) {
			return true
		}
	}
	return false
}

// path of a file of a provider in the mirror's (and nginx's) URL space.
func zipPath(host, ns, typ, version string) string {
	return fmt.Sprintf("%s/%s/%s/terraform-provider-%s_%s_%s.zip", host, ns, typ, typ, version, platform)
}

func run(ctx context.Context, cfg config) (err error) {
	if runtime.GOOS != "linux" {
		return errors.New("the harness reads /proc and needs Linux")
	}
	// Fail before minutes of measuring, not after.
	if cfg.want(1) || cfg.want(2) || cfg.want(3) || cfg.want(6) {
		if _, err := exec.LookPath(cfg.Nginx); err != nil {
			return fmt.Errorf("nginx not found (%v); install it with bench/setup.sh (apt-get install nginx-light), pass -nginx, or run other figures with -only", err)
		}
	}
	if cfg.want(6) {
		if _, err := exec.LookPath(cfg.Terraform); err != nil {
			return fmt.Errorf("terraform not found (%v); pass -terraform or skip figure 6 with -only 1,2,3,4,5,7", err)
		}
	}
	if cfg.want(7) {
		if _, err := findVersitygw(cfg.Versitygw); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "tfmirror-bench-")
	if err != nil {
		return err
	}
	// nginx workers may run as another user: they need to read the
	// static mirror below dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	if cfg.KeepTemp {
		defer fmt.Fprintln(os.Stderr, "bench: kept", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	e := &env{cfg: cfg, dir: dir, staticRoot: filepath.Join(dir, "static"), report: newReport(cfg)}
	e.report.machine.loadStart = loadAvg()

	progress("building tfmirror")
	bin, err := buildMirror(ctx, dir)
	if err != nil {
		return err
	}
	tlsFiles, err := certs.Ensure(filepath.Join(dir, "tls"), []string{"127.0.0.1", "localhost"}, time.Now())
	if err != nil {
		return err
	}
	e.caFile = tlsFiles.CA
	pem, err := os.ReadFile(tlsFiles.CA)
	if err != nil {
		return err
	}
	e.pool = x509.NewCertPool()
	e.pool.AppendCertsFromPEM(pem)

	e.tls = tlsFiles
	e.bin = bin
	if cfg.wantAny(1, 2, 3, 4, 5, 6, 7, 11) {
		stopMain, err := e.setupMain(ctx)
		if err != nil {
			return err
		}
		defer stopMain()
	}

	figures := []struct {
		n int
		f func(context.Context) error
	}{{1, e.warmThroughput}, {2, e.warmJSON}, {3, e.coldFanOut}, {4, e.coldTTFB}, {5, e.memory}, {6, e.terraformInit}, {7, e.sharedTier},
		{8, e.growth}, {9, e.diskUse}, {10, e.soak}, {11, e.warmCLIArchive}}
	for _, fig := range figures {
		if !e.want(fig.n) {
			continue
		}
		if err := fig.f(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("figure %d: %w", fig.n, err)
		}
	}
	e.report.machine.loadEnd = loadAvg()
	if e.nginx != nil {
		e.report.machine.nginx = e.nginx.version
	}
	e.report.print(os.Stdout)
	if cfg.Out != "" {
		f, err := os.Create(cfg.Out)
		if err != nil {
			return err
		}
		e.report.print(f)
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// setupMain starts what figures 1 to 7 and 11 share: the fake origins
// (and, for figure 11, the stand-in CLI release origin), a CONNECT proxy,
// tfmirror and, for figures 1, 2, 3 and 6, nginx; stop stops them.
func (e *env) setupMain(ctx context.Context) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	progress("starting fake origins")
	if e.big, err = fakeorigin.Start(fakeorigin.Options{ArchiveSize: int64(e.cfg.ArchiveMiB) << 20}); err != nil {
		return stop, err
	}
	stops = append(stops, e.big.Close)
	var bigVersions []string
	for _, v := range []string{warmVersion, "2.0.0", "2.1.0", "4.0.0", sharedVersion, localVersion} {
		bigVersions = append(bigVersions, v)
	}
	for i := range e.cfg.TTFBSamples {
		bigVersions = append(bigVersions, fmt.Sprintf("3.0.%d", i))
	}
	e.big.AddProvider(bigNS, bigType, bigVersions, []string{platform})

	if e.json, err = fakeorigin.Start(fakeorigin.Options{}); err != nil {
		return stop, err
	}
	stops = append(stops, e.json.Close)
	e.json.AddProvider(jsonNS, jsonType, fakeorigin.BenchVersions(), fakeorigin.BenchPlatforms)

	if e.tf, err = fakeorigin.Start(fakeorigin.Options{Hostnames: []string{tfHost}, ArchiveSize: int64(e.cfg.TFArchive) << 20}); err != nil {
		return stop, err
	}
	stops = append(stops, e.tf.Close)
	var tfVersions []string
	for i := range e.cfg.TFRuns {
		tfVersions = append(tfVersions, fmt.Sprintf("1.0.%d", i))
	}
	for i := range e.cfg.TFProviders {
		e.tf.AddProvider(tfNS, fmt.Sprintf("tfp%d", i), tfVersions, []string{tfPlatform()})
	}
	proxy, err := startConnectProxy(map[string]string{tfHost + ":443": e.tf.Addr})
	if err != nil {
		return stop, err
	}
	stops = append(stops, proxy.Close)

	allowed := []string{e.big.Addr, e.json.Addr, tfHost}
	cas := append(append(append([]byte{}, e.big.CACertPEM...), e.json.CACertPEM...), e.tf.CACertPEM...)
	var releasesFlags []string
	if e.want(11) {
		if releasesFlags, err = e.startReleasesOrigin(int64(e.cfg.ArchiveMiB) << 20); err != nil {
			return stop, err
		}
		stops = append(stops, e.releases.Close)
		allowed = append(allowed, e.releasesHost)
		cas = append(cas, e.releases.CACertPEM...)
	}
	originCAs := filepath.Join(e.dir, "origin-cas.pem")
	if err := os.WriteFile(originCAs, cas, 0o644); err != nil {
		return stop, err
	}

	progress("starting tfmirror")
	e.mirrorArgs = []string{
		"--data-dir", filepath.Join(e.dir, "data"),
		"--tls-cert", e.tls.Cert, "--tls-key", e.tls.Key,
		"--allowed-origins", strings.Join(allowed, ","),
		"--allow-private-origins",
	}
	e.mirrorArgs = append(e.mirrorArgs, releasesFlags...)
	e.mirrorEnv = []string{"SSL_CERT_FILE=" + originCAs, "HTTPS_PROXY=" + proxy.URL(), "https_proxy=", "NO_PROXY=", "no_proxy="}
	for _, kv := range strings.Split(e.cfg.MirrorEnv, ",") {
		if kv = strings.TrimSpace(kv); kv != "" {
			if !strings.Contains(kv, "=") {
				return stop, fmt.Errorf("-mirror-env: %q is not KEY=VALUE", kv)
			}
			e.mirrorEnv = append(e.mirrorEnv, kv)
		}
	}
	if err := e.startMirror(ctx); err != nil {
		return stop, err
	}
	stops = append(stops, func() { e.mirror.stop(syscall.SIGTERM, 10*time.Second) })

	if e.cfg.wantAny(1, 2, 3, 6) {
		if err := e.startReference(ctx); err != nil {
			return stop, err
		}
		stops = append(stops, func() { e.nginx.stop(syscall.SIGTERM, 10*time.Second) })
	}

	return stop, nil
}

// wantAny reports whether -only selects any of figs.
func (c config) wantAny(figs ...int) bool {
	return slices.ContainsFunc(figs, c.want)
}

// startReference warms the mirror with the files figures 1 and 2 serve,
// writes the same bytes as a static mirror directory (the layout
// `terraform providers mirror` writes) and starts nginx on it.
func (e *env) startReference(ctx context.Context) error {
	progress("warming the mirror and writing the static mirror for nginx")
	c := newClient(e.pool, 4)
	defer closeIdle(c)
	root := e.staticRoot
	files := []string{
		e.big.Addr + "/" + bigNS + "/" + bigType + "/index.json",
		e.big.Addr + "/" + bigNS + "/" + bigType + "/" + warmVersion + ".json",
		zipPath(e.big.Addr, bigNS, bigType, warmVersion),
		e.json.Addr + "/" + jsonNS + "/" + jsonType + "/index.json",
		e.json.Addr + "/" + jsonNS + "/" + jsonType + "/" + jsonVersion + ".json",
	}
	for _, f := range files {
		body, err := get(ctx, c, e.mirror.url+f)
		if err != nil {
			return err
		}
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			return err
		}
	}
	if err := e.waitCached(ctx, c, zipPath(e.big.Addr, bigNS, bigType, warmVersion)); err != nil {
		return err
	}
	var err error
	tlsFiles := certs.In(filepath.Join(e.dir, "tls"))
	e.nginx, err = startNginx(ctx, e.cfg.Nginx, e.dir, root, tlsFiles.Cert, tlsFiles.Key)
	return err
}

// jsonVersion is the VERSION.json measured in figure 2.
const jsonVersion = "4.9.0"

// waitCached waits until the mirror serves path from its cache.
func (e *env) waitCached(ctx context.Context, c *http.Client, path string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, e.mirror.url+path, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.Header.Get("X-Tfmirror-Cache") == "hit" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s was not cached within 2 minutes", path)
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

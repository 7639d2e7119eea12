package main

// The mirror behind a proxy that sends a Host of its own choosing (and
// forwarding headers naming another host and scheme), with --public-url
// in force: nothing the client gets names that Host, and the real
// terraform installs through the proxy as it does from the origin.

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/certs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// hostileFront is a TLS reverse proxy on loopback in front of the mirror
// at mirrorURL, serving the mirror's own certificate (issued for
// 127.0.0.1), that sends every request on with Host attacker.example and
// forwarding headers that name it, and records the paths it forwarded.
type hostileFront struct {
	url   string
	mu    sync.Mutex
	paths []string
}

func startHostileFront(t *testing.T, mirrorURL, dataDir, caFile string) *hostileFront {
	t.Helper()
	target, err := url.Parse(mirrorURL)
	if err != nil {
		t.Fatal(err)
	}
	f := &hostileFront{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = "attacker.example"
			pr.Out.Header.Set("X-Forwarded-Host", "attacker.example")
			pr.Out.Header.Set("X-Forwarded-Proto", "http")
			pr.Out.Header.Set("Forwarded", "for=192.0.2.1;host=attacker.example;proto=http")
		},
		Transport: trustingClient(t, caFile).Transport,
		ErrorLog:  slog.NewLogLogger(slog.New(slog.NewTextHandler(testWriter{t}, nil)).Handler(), slog.LevelError),
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.paths = append(f.paths, r.URL.Path)
		f.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	dir := filepath.Join(dataDir, "tls")
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certs.ServerFile), filepath.Join(dir, certs.ServerKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/"
	return f
}

// forwarded reports whether the front forwarded a path ending in suffix.
func (f *hostileFront) forwarded(suffix string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.paths {
		if strings.HasSuffix(p, suffix) {
			return true
		}
	}
	return false
}

// TestTerraformBehindProxyWithForeignHost: with --public-url in force,
// behind a proxy that sends Host attacker.example and X-Forwarded-Host,
// X-Forwarded-Proto and Forwarded naming it, the status page and its
// snippets name the public URL, never the Host; and the real terraform,
// through a host block at the proxy, installs what it installs from the
// origin, the archive through the URL it was given (the registry
// protocol's URLs are relative to the answer's).
func TestTerraformBehindProxyWithForeignHost(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true})
	e.mirror.proxy.SetPublicURL(e.url) // as a reload puts --public-url in force
	pls := registryPlatforms()
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, pls)
	providers := map[string]string{"random": "hashicorp/random@3.6.0"}
	front := startHostileFront(t, e.url, e.dataDir, e.caFile)

	client := trustingClient(t, e.caFile)
	resp, err := client.Get(front.url + "?format=json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st proxy.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("status through the proxy: %d %s", resp.StatusCode, body)
	}
	if st.MirrorURL != e.url || bytes.Contains(body, []byte("attacker")) {
		t.Errorf("status through the proxy: mirror_url %q (want %q), or it names the proxy's Host:\n%s", st.MirrorURL, e.url, body)
	}
	if v := resp.Header.Values("Vary"); strings.Contains(strings.Join(v, ","), "Host") {
		t.Errorf("with a public URL in force the status page says it varies by Host: %q", v)
	}

	want, wantOut := direct(t, e).init(t, providers)
	conf := hostBlockConf(t, tfRegistry, front.url+proxy.RegistryPath(tfRegistry))
	got, out := registryRun{e: e, conf: conf, caFile: e.caFile}.init(t, providers)
	checkSameInstall(t, "init through the proxy", want, got, wantOut, out)
	if !front.forwarded("terraform-provider-random_3.6.0_" + runtime.GOOS + "_" + runtime.GOARCH + ".zip") {
		t.Errorf("the archive was not fetched through the proxy the client was given: %q", front.paths)
	}
	if strings.Contains(out, "attacker") {
		t.Errorf("terraform's output names the proxy's Host:\n%s", out)
	}
}

// TestNoPublicURLWarning: serving beyond loopback without --public-url
// is warned about once at start; on loopback, or with a public URL,
// nothing is said.
func TestNoPublicURLWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  settings.Config
		addr net.Addr
		warn bool
	}{
		{"all addresses", settings.Config{}, &net.TCPAddr{IP: net.IPv6unspecified, Port: 8443}, true},
		{"all IPv4 addresses", settings.Config{}, &net.TCPAddr{IP: net.IPv4zero, Port: 8443}, true},
		{"one address", settings.Config{}, &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 8443}, true},
		{"loopback", settings.Config{}, &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8443}, false},
		{"IPv6 loopback", settings.Config{}, &net.TCPAddr{IP: net.IPv6loopback, Port: 8443}, false},
		{"public URL", settings.Config{PublicURL: "https://mirror.example/"}, &net.TCPAddr{IP: net.IPv4zero, Port: 8443}, false},
	} {
		var buf bytes.Buffer
		warnNoPublicURL(slog.New(slog.NewJSONHandler(&buf, nil)), tc.cfg, tc.addr)
		if got := strings.Contains(buf.String(), `"msg":"`+noPublicURLWarning+`"`); got != tc.warn {
			t.Errorf("%s: logged %q, want the warning: %v", tc.name, buf.String(), tc.warn)
		}
	}
}

package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestHelmChartServiceCertificate renders the chart with its defaults
// (no tls.existingSecret: tfmirror generates its CA and certificate),
// starts tfmirror serve with the rendered arguments and configuration file
// (only the data directory and the listeners moved to the test's), and
// checks that a TLS client trusting the generated CA completes the
// handshake with every name the cluster gives the rendered Service, and
// with the host the NOTES tell clients to use.
func TestHelmChartServiceCertificate(t *testing.T) {
	t.Parallel()
	m, notes := helmTemplate(t, "defaults", chartValues(t, ""))
	w := checkWorkload(t, m)
	var svc string
	for _, s := range m.services {
		for _, p := range s.Spec.Ports {
			if p.TargetPort.String() == w.scheme {
				svc = s.Name
			}
		}
	}
	if svc == "" {
		t.Fatal("no Service targets the mirror's port")
	}
	names := []string{svc, svc + ".mirror", svc + ".mirror.svc", svc + ".mirror.svc.cluster.local"}
	noted := regexp.MustCompile(`https://([a-z0-9.-]+)[:/]`).FindStringSubmatch(notes)
	if noted == nil {
		t.Fatalf("the NOTES name no https URL in the cluster:\n%s", notes)
	}
	names = append(names, noted[1])

	addr, _, dir := startRendered(t, w, nil)

	pemData, err := os.ReadFile(filepath.Join(dir, "data", "tls", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemData) {
		t.Fatal("no generated CA")
	}
	for _, name := range names {
		d := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: name, RootCAs: roots})
		if err != nil {
			t.Errorf("TLS handshake as %s with the generated CA: %v", name, err)
			continue
		}
		// "also the last certificate the mirror sends in its TLS
		// handshake", as the NOTES say.
		peer := conn.ConnectionState().PeerCertificates
		if block, _ := pem.Decode(pemData); block == nil || !bytes.Equal(peer[len(peer)-1].Raw, block.Bytes) {
			t.Errorf("the last certificate of the handshake is not the CA of ca.pem")
		}
		conn.Close()
	}
	// And not with just any name.
	if conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "other.mirror.svc", RootCAs: roots}); err == nil {
		conn.Close()
		t.Error("the generated certificate names other.mirror.svc: the check above proves nothing")
	}
}

// startRendered starts tfmirror serve with w's rendered arguments and
// configuration file, only the data directory and the listeners moved to
// the test's (loopback, any port; metrics too) and the settings in
// override replaced, and returns the mirror's and the metrics' addresses
// and the test's directory, which holds data/.
func startRendered(t *testing.T, w *workload, override map[string]any) (addr, metricsURL, dir string) {
	t.Helper()
	var conf map[string]any
	if err := json.Unmarshal(w.config, &conf); err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	conf["data_dir"] = filepath.Join(dir, "data")
	conf["listen"] = "127.0.0.1:0"
	conf["metrics_listen"] = "127.0.0.1:0"
	maps.Copy(conf, override)
	data, _ := json.Marshal(conf)
	file := filepath.Join(dir, "tfmirror.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve"}
	for i := 0; i < len(w.args); i++ {
		if argFlag(w.args[i]) == "config" {
			args = append(args, "--config", file)
			i++
			continue
		}
		args = append(args, w.args[i])
	}
	bin := binary(t) // the build first: the timeout is the run's
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		cancel()
	})
	var log []string
	sc := bufio.NewScanner(stderr)
	// Both lines come at start, in either order; a process that stops
	// ends the scan.
	for (addr == "" || metricsURL == "") && sc.Scan() {
		log = append(log, sc.Text())
		var line struct {
			Msg     string `json:"msg"`
			Address string `json:"address"`
			URL     string `json:"url"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			switch line.Msg {
			case "serving metrics":
				metricsURL = line.URL
			case "tfmirror is serving":
				addr = line.Address
			}
		}
	}
	if addr == "" || metricsURL == "" {
		t.Fatalf("tfmirror serve did not serve, and metrics, with the rendered settings:\n%s", strings.Join(log, "\n"))
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return addr, metricsURL, dir
}

// TestHelmChartProbesWithAuth renders the chart with client
// authentication, starts tfmirror serve with the rendered settings, and
// sends each probe as the kubelet does (the probe's port, path and scheme,
// no token, the certificate unchecked): each is answered 200, while the
// mirror refuses a provider request without a token, so authentication
// is on. The metrics port answers the ServiceMonitor's scrape, which
// carries no token either.
func TestHelmChartProbesWithAuth(t *testing.T) {
	t.Parallel()
	m, _ := helmTemplate(t, "auth", map[string]any{"auth": map[string]any{"existingSecret": "tfmirror-auth"}})
	w := checkWorkload(t, m)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(strings.Repeat("a1", 16)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if w.env["TFMIRROR_AUTH_TOKENS_FILE"] == "" {
		t.Fatal("auth.existingSecret rendered no auth_tokens_file")
	}
	addr, metricsURL, _ := startRendered(t, w, map[string]any{"auth_tokens_file": tokens})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(url string) int {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []*corev1.Probe{w.container.LivenessProbe, w.container.ReadinessProbe, w.container.StartupProbe} {
		host := addr
		if p.HTTPGet.Port.String() == "metrics" {
			host = strings.TrimSuffix(strings.TrimPrefix(metricsURL, "http://"), "/metrics")
		}
		url := strings.ToLower(string(p.HTTPGet.Scheme)) + "://" + host + p.HTTPGet.Path
		if code := get(url); code != http.StatusOK {
			t.Errorf("probe GET %s without a token: %d, want 200", url, code)
		}
	}
	if code := get(w.scheme + "://" + addr + "/registry.terraform.io/hashicorp/null/index.json"); code != http.StatusUnauthorized {
		t.Errorf("a provider request without a token: %d, want 401: authentication is not on, and the probes prove nothing", code)
	}
	if code := get(metricsURL); code != http.StatusOK {
		t.Errorf("the scrape GET %s without a token: %d, want 200", metricsURL, code)
	}
}

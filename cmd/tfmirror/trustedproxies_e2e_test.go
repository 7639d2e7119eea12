package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// startIngress starts a TLS-terminating reverse proxy in front of e's
// mirror, as an ingress controller is: it serves the mirror's certificate,
// connects to the mirror from 127.0.0.2, and appends to X-Forwarded-For
// client, the address it saw the client at (all test clients connect from
// 127.0.0.1: each ingress stands for the clients of one network). It
// returns the URL clients use.
func startIngress(t *testing.T, e *e2e, client string) string {
	t.Helper()
	target, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(e.caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 10 * time.Second}).DialContext,
	}
	t.Cleanup(tr.CloseIdleConnections)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.Header["X-Forwarded-For"] = append(pr.In.Header["X-Forwarded-For"], client)
		},
		Transport: tr,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp, TLSConfig: e.mirror.tls.Clone(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("ingress: %v", err)
		}
	})
	return "https://" + ln.Addr().String() + "/"
}

// TestTerraformInitBehindTrustedIngress: behind an ingress named in
// --trusted-proxies, a misconfigured client sending a wrong token gets
// itself refused (429) once over the limit, and only itself: terraform
// init of another client, through the same ingress, installs its
// provider without a single 429, and the access log names each client.
func TestTerraformInitBehindTrustedIngress(t *testing.T) {
	t.Parallel()
	const token = "e2e-ingress-token.0123456789"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	e := &e2e{t: t, tf: terraformBinary(t), logTo: logs}
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: e2eOrigins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	e.origin = origin
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	e.startMirror(filepath.Join(t.TempDir(), "data"), "--auth-tokens-file", tokens, "--trusted-proxies", "127.0.0.2/32")
	const broken, good = "192.0.2.10", "198.51.100.7"
	ciURL, laptopURL := startIngress(t, e, broken), startIngress(t, e, good)

	// The CI job with a stale token, through its ingress.
	client := trustingClient(t, e.caFile)
	defer client.CloseIdleConnections()
	get := func(tok string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ciURL+tfRegistry+"/hashicorp/random/index.json", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range proxy.AuthFailureBurst {
		if got := get("stale-ci-token-0123456789"); got != http.StatusUnauthorized {
			t.Fatalf("stale token %d: status %d, want 401", i+1, got)
		}
	}
	// Over the limit, even the right token is refused. The limit gives
	// one more try a second (proxy.AuthFailureRate), which a loaded
	// machine may have earned while the burst was sent: each round
	// spends what was earned with the stale token first (a 401 until a
	// 429), then asks with the right one.
	over := false
	for round := 0; round < 5 && !over; round++ {
		for i := 0; i < proxy.AuthFailureBurst; i++ {
			if got := get("stale-ci-token-0123456789"); got == http.StatusTooManyRequests {
				break
			} else if got != http.StatusUnauthorized {
				t.Fatalf("stale token over the limit: status %d, want 401 or 429", got)
			}
		}
		switch got := get(token); got {
		case http.StatusTooManyRequests:
			over = true
		case http.StatusOK:
			t.Logf("round %d: a try was earned back before the right token's request", round+1)
		default:
			t.Fatalf("the CI job over the limit: status %d, want 429", got)
		}
	}
	if !over {
		t.Fatal("the CI job over the limit: the right token was let through in every round, want 429")
	}

	// Another client installs through the same kind of ingress.
	u, err := url.Parse(laptopURL)
	if err != nil {
		t.Fatal(err)
	}
	cliConf := filepath.Join(t.TempDir(), "cli.tfrc")
	conf := fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\ncredentials %q {\n  token = %q\n}\n", laptopURL, u.Host, token)
	if err := os.WriteFile(cliConf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := writeConfig(t, map[string]string{"random": "hashicorp/random@3.6.0"})
	if out, err := e.terraformWith(dir, cliConf, e.caFile, "init", "-no-color"); err != nil {
		t.Fatalf("terraform init of another client failed: %v\n%s", err, out)
	}
	plugin := "registry.terraform.io/hashicorp/random/3.6.0/linux_amd64/terraform-provider-random_v3.6.0"
	if _, err := os.Stat(filepath.Join(dir, ".terraform", "providers", plugin)); err != nil {
		t.Errorf("provider not installed: %v", err)
	}
	waitIdle(e.mirror.engine)

	// The access log: the other client's requests all answered, none
	// with 429; the CI job's counted against it, not the ingress.
	byClient := map[string][]float64{}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) != nil || l["msg"] != "request" {
			continue
		}
		c, _ := l["client"].(string)
		status, _ := l["status"].(float64)
		byClient[c] = append(byClient[c], status)
	}
	if len(byClient[good]) < 2 || len(byClient[broken]) < proxy.AuthFailureBurst+2 || len(byClient) != 2 {
		t.Fatalf("access log by client: %v; want %s's and %s's requests only", byClient, good, broken)
	}
	for _, s := range byClient[good] {
		if s != http.StatusOK {
			t.Errorf("a request of %s answered %v, want 200: %v", good, s, byClient[good])
		}
	}
}

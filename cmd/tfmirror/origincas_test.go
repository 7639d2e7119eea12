package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// TestOriginCAsReadAgain: origin_ca_file's files changed while the mirror
// serves are put in force by tfmirror reload and by the reading once a
// minute, which reload reports with the CAs' subjects; files that would
// stop a start (no certificate in them, others may write them, one read
// half written, its last certificate cut short) are refused, logged and
// counted once however often they are read, the CAs in force staying,
// rather than put in force without what they were cut before; files put
// back clear the refusal.
func TestOriginCAsReadAgain(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "company-ca.pem")
	a, b := newCompanyCA(t), newCompanyCA(t)
	write := func(content []byte, mode os.FileMode) {
		t.Helper()
		tmp := caFile + ".new"
		if err := os.WriteFile(tmp, content, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(tmp, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		if err := os.Rename(tmp, caFile); err != nil {
			t.Fatal(err)
		}
	}
	write(a.pem, 0o644)
	m, _ := reloadingServer(t, []string{"--data-dir", filepath.Join(dir, "data"), "--origin-ca-file", caFile})
	count := func(outcome string) float64 {
		return metric(t, m.registry, "tfmirror_origin_ca_reloads_total", "outcome", outcome)
	}
	lastOK := func() float64 { return metric(t, m.registry, "tfmirror_origin_ca_last_reload_successful") }

	both := append(append([]byte(nil), a.pem...), b.pem...)
	cut := both[:len(a.pem)+len(b.pem)/2]
	for _, step := range []struct {
		name              string
		content           []byte
		mode              os.FileMode
		wantCAs           int    // CAs reload says it put in force; 0: none new
		wantErr           string // in reload's error
		applied, refused  float64
		wantLastSuccesful float64
	}{
		{"unchanged", a.pem, 0o644, 0, "", 0, 0, 1},
		{"a CA added", both, 0o644, 2, "", 1, 0, 1},
		{"no certificate in the file", []byte("not a certificate\n"), 0o644, 0, "no PEM certificate", 1, 1, 0},
		{"the same, read again", []byte("not a certificate\n"), 0o644, 0, "no PEM certificate", 1, 1, 0},
		{"others may write it", both, 0o666, 0, "chmod go-w", 1, 2, 0},
		{"read half written, its last certificate cut short", cut, 0o644, 0, "cut short", 1, 3, 0},
		{"put back", both, 0o644, 0, "", 2, 3, 1},
		{"a CA removed", b.pem, 0o644, 1, "", 3, 3, 1},
	} {
		write(step.content, step.mode)
		res, err := m.reload()
		switch {
		case step.wantErr == "" && err != nil:
			t.Fatalf("%s: reload: %v", step.name, err)
		case step.wantErr != "" && (err == nil || !strings.Contains(err.Error(), step.wantErr) || !strings.Contains(err.Error(), "origin_ca_file's files refused; the CAs in force stay")):
			t.Fatalf("%s: reload: %v, want it refused saying %q", step.name, err, step.wantErr)
		}
		if res.OriginCAsNew != (step.wantCAs > 0) || (step.wantCAs > 0 && len(res.OriginCAs) != step.wantCAs) {
			t.Errorf("%s: reload says new CAs %v, %q in force; want %d new", step.name, res.OriginCAsNew, res.OriginCAs, step.wantCAs)
		}
		var out strings.Builder
		printReloaded(&out, res)
		switch want := "origin CAs: unchanged, "; {
		case step.wantErr != "" && strings.Contains(out.String(), "origin CAs:"):
			t.Errorf("%s: tfmirror reload of files refused printed %q", step.name, out.String())
		case step.wantErr == "" && step.wantCAs == 0 && !strings.Contains(out.String(), want):
			t.Errorf("%s: tfmirror reload printed %q, want %q", step.name, out.String(), want)
		}
		if count("applied") != step.applied || count("refused") != step.refused || lastOK() != step.wantLastSuccesful {
			t.Errorf("%s: applied %v, refused %v, last_reload_successful %v; want %v, %v, %v", step.name,
				count("applied"), count("refused"), lastOK(), step.applied, step.refused, step.wantLastSuccesful)
		}
	}
	// A start refuses the file cut short as a reload does.
	write(cut, 0o644)
	if _, err := originRoots([]string{caFile}, nil, slog.New(slog.DiscardHandler)); err == nil {
		t.Errorf("a start with a file cut short is not refused")
	}
	write(b.pem, 0o644)

	// The reading once a minute, without a reload.
	m.originCAs.every = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.originCAs.follow(ctx)
	}()
	defer func() { cancel(); <-done }()
	write(a.pem, 0o644)
	for i := 0; count("applied") < 4 && i < 500; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if count("applied") != 4 {
		t.Errorf("the files changed were not put in force by the reading once a minute: applied %v, want 4", count("applied"))
	}
}

// TestOriginCAReloadedBehindInspectingProxy: behind a TLS-inspecting
// egress proxy whose CA origin_ca_file's file lacks, origin requests fail
// with 502; the proxy's CA written into the file and tfmirror reload
// make them work without a restart, and the CA taken out of the file
// again is trusted no more after the next reload, connections already
// made through the proxy included.
func TestOriginCAReloadedBehindInspectingProxy(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: []string{egressHost}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	for _, name := range []string{"widget", "gadget"} {
		origin.AddProvider("acme", name, []string{"0.1.0"}, registryPlatforms())
	}
	systemRoots := originCAFile(t, origin) // the fake origin's CA stands for the system roots
	proxyCA, otherCA := newCompanyCA(t), newCompanyCA(t)
	egress := startInspectingProxy(t, proxyCA, origin.Addr, origin.CertPool())
	caFile := otherCA.file(t)
	replace := func(content []byte) { t.Helper(); renameInPlace(t, caFile, content) }
	env := []string{"PATH=" + os.Getenv("PATH"), "SSL_CERT_FILE=" + systemRoots, "HTTPS_PROXY=" + egress.URL(), "NO_PROXY="}
	data := filepath.Join(t.TempDir(), "data")
	p := startProcessEnv(t, bin, data, origin, env, "--allowed-origins", egressHost, "--origin-ca-file", caFile)
	versions := func(name string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		body, resp, err := p.get(ctx, proxy.RegistryPath(egressHost)+"acme/"+name+"/versions")
		if resp == nil {
			t.Fatalf("versions of %s: %v", name, err)
		}
		return resp.StatusCode, string(body)
	}
	reload := func(want string) {
		t.Helper()
		stdout, stderr, code := runProcess(t, bin, "", "reload", "--data-dir", data)
		if code != 0 || !strings.Contains(stdout, want) {
			t.Fatalf("tfmirror reload: exit %d, want 0 and %q\n%s%s", code, want, stdout, stderr)
		}
	}

	if code, body := versions("widget"); code != http.StatusBadGateway || !strings.Contains(body, "signed by an unknown authority") {
		t.Fatalf("the proxy's CA not in the file: %d %s, want 502 naming the cause", code, body)
	}
	replace(append(append([]byte(nil), otherCA.pem...), proxyCA.pem...))
	reload("origin CAs: new ones in force")
	if code, body := versions("widget"); code != http.StatusOK {
		t.Fatalf("the proxy's CA added to the file, after tfmirror reload: %d %s, want 200", code, body)
	}
	p.waitLog("put in force the CAs read again from origin_ca_file's files", 10*time.Second)

	replace(otherCA.pem)
	reload("origin CAs: new ones in force")
	if code, body := versions("gadget"); code != http.StatusBadGateway || !strings.Contains(body, "signed by an unknown authority") {
		t.Errorf("the proxy's CA taken out of the file, after tfmirror reload: %d %s, want 502", code, body)
	}
}

// TestSharedStoreFollowsOriginCAs: the shared store's endpoint, whose
// certificate the company's CA signed, is trusted as origin_ca_file's
// files are read again, as the origins are: not before its CA is in the
// files, from the reload that puts it in force on, and no more once a
// reload takes it out.
func TestSharedStoreFollowsOriginCAs(t *testing.T) {
	dir := t.TempDir()
	storeCA, otherCA := newCompanyCA(t), newCompanyCA(t)
	endpoint, key := sharedEndpointSignedBy(t, storeCA)
	caFile := otherCA.file(t)
	replace := func(content []byte) { t.Helper(); renameInPlace(t, caFile, content) }
	m, _ := reloadingServer(t, []string{"--data-dir", filepath.Join(dir, "data"), "--origin-ca-file", caFile,
		"--shared-store", endpoint, "--shared-store-key-file", key, "--shared-store-breaker-threshold", "100"})
	read := func() error {
		_, _, err := m.shared.GetMeta(context.Background(), "k")
		return err
	}

	if err := read(); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("the store's CA not in the files: %v, want its certificate refused", err)
	}
	replace(append(append([]byte(nil), otherCA.pem...), storeCA.pem...))
	if _, err := m.reload(); err != nil {
		t.Fatal(err)
	}
	if err := read(); err != nil {
		t.Errorf("the store's CA added to the files, after a reload: %v", err)
	}
	replace(otherCA.pem)
	if _, err := m.reload(); err != nil {
		t.Fatal(err)
	}
	if err := read(); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("the store's CA taken out of the files, after a reload: %v, want its certificate refused", err)
	}
}

// sharedEndpointSignedBy is a shared store (its --shared-store URL and a
// --shared-store-key-file) on loopback whose TLS certificate ca signed,
// holding no object, as S3 answers.
func sharedEndpointSignedBy(t *testing.T, ca *companyCA) (url, keyFile string) {
	t.Helper()
	leaf, err := ca.leaf("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>none</Message></Error>`))
	}))
	endpoint.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	endpoint.StartTLS()
	t.Cleanup(endpoint.Close)
	s3test.NoAWSConfig(t, map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"})
	keyFile = filepath.Join(t.TempDir(), "shared.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("k", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	return "s3://tfm/p?region=us-east-1&path_style=true&endpoint=" + endpoint.URL, keyFile
}

// TestOriginCAListReloaded: a new list of origin_ca_file's files in the
// configuration file is put in force by tfmirror reload, for the origins
// and the shared store's endpoint alike: a file added (to a mirror that
// started without any) is trusted, a list naming a file that is missing
// refuses the reload, and the CAs in force stay, and a file taken out of
// the list is trusted no more.
func TestOriginCAListReloaded(t *testing.T) {
	dir := t.TempDir()
	storeCA := newCompanyCA(t)
	endpoint, key := sharedEndpointSignedBy(t, storeCA)
	caFile := storeCA.file(t)
	conf := filepath.Join(dir, "tfmirror.hcl")
	configure := func(lines ...string) {
		t.Helper()
		lines = append([]string{`shared_store = "` + endpoint + `"`, `shared_store_key_file = "` + key + `"`,
			`shared_store_breaker_threshold = 100`}, lines...)
		if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	configure()
	m, _ := reloadingServer(t, []string{"--data-dir", filepath.Join(dir, "data"), "--config", conf})
	read := func() error {
		_, _, err := m.shared.GetMeta(context.Background(), "k")
		return err
	}
	if err := read(); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("started without origin_ca_file: %v, want the store's certificate refused", err)
	}

	configure(`origin_ca_file = ["` + caFile + `"]`)
	res, err := m.reload()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printReloaded(&out, res)
	if !strings.Contains(out.String(), "origin_ca_file: ") || strings.Contains(out.String(), "after a restart") ||
		!strings.Contains(out.String(), "origin CAs: new ones in force") {
		t.Errorf("tfmirror reload of a file added to origin_ca_file printed:\n%s", out.String())
	}
	if err := read(); err != nil {
		t.Errorf("a file added to origin_ca_file, after a reload: %v", err)
	}

	configure(`origin_ca_file = ["` + caFile + `", "` + filepath.Join(dir, "missing.pem") + `"]`)
	if _, err := m.reload(); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("a list naming a missing file: reload %v, want it refused naming the file", err)
	}
	if err := read(); err != nil {
		t.Errorf("after a reload refused, the CAs in force did not stay: %v", err)
	}

	configure()
	if _, err := m.reload(); err != nil {
		t.Fatal(err)
	}
	if err := read(); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("the file taken out of origin_ca_file, after a reload: %v, want the store's certificate refused", err)
	}
}

// renameInPlace puts content in path (mode 0644) as configuration
// management and the kubelet do: written beside it, then renamed over it,
// so that no reading finds it half written.
func renameInPlace(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.WriteFile(path+".new", content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

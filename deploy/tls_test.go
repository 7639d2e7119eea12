package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
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

	// The rendered configuration, with the test's data directory and
	// loopback listeners.
	var conf map[string]any
	if err := json.Unmarshal(w.config, &conf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf["data_dir"] = filepath.Join(dir, "data")
	conf["listen"] = "127.0.0.1:0"
	conf["metrics_listen"] = ""
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	addr := ""
	var log []string
	sc := bufio.NewScanner(stderr)
	for addr == "" && sc.Scan() {
		log = append(log, sc.Text())
		var line struct {
			Msg     string `json:"msg"`
			Address string `json:"address"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "tfmirror is serving" {
			addr = line.Address
		}
	}
	if addr == "" {
		t.Fatalf("tfmirror serve did not serve with the rendered settings:\n%s", strings.Join(log, "\n"))
	}
	go func() {
		for sc.Scan() {
		}
	}()

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

package ocitest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/certs"
)

// Server is a distribution registry running on loopback over HTTPS
// with a certificate of its own CA, storing in a test directory,
// anonymous and open to pushes.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	addr string // 127.0.0.1:PORT
	// CA is the PEM file of the CA its certificate is issued by: for
	// clients' SSL_CERT_FILE.
	CA     string
	pool   *x509.CertPool
	config string
	cmd    *exec.Cmd
	done   chan struct{}
	log    bytes.Buffer
}

// StartRegistry starts a distribution registry on a free loopback port,
// and stops it when the test ends.
func StartRegistry(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, bin: Registry.Binary(t), dir: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	l.Close()
	files, err := certs.Ensure(filepath.Join(s.dir, "tls"), []string{"127.0.0.1", "localhost"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.CA = files.CA
	pem, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	s.pool = x509.NewCertPool()
	s.pool.AppendCertsFromPEM(pem)
	s.config = filepath.Join(s.dir, "config.yml")
	config := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
`, filepath.Join(s.dir, "data"), s.addr, files.Cert, files.Key)
	if err := os.WriteFile(s.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("registry output:\n%s", s.log.String())
		}
	})
	return s
}

// Host is the registry's host:port, as OCI references name it.
func (s *Server) Host() string { return s.addr }

// Client returns an HTTP client that trusts the registry.
func (s *Server) Client() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.pool}}}
}

func (s *Server) start() {
	t := s.t
	t.Helper()
	cmd := exec.Command(s.bin, "serve", s.config)
	cmd.Stdout, cmd.Stderr = &s.log, &s.log
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() { cmd.Wait(); close(done) }()
	client := s.Client()
	client.Timeout = time.Second
	for range 300 {
		select {
		case <-done:
			t.Fatalf("registry exited: %s", s.log.String())
		default:
		}
		resp, err := client.Get("https://" + s.addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond) // polling a process we do not control
	}
	t.Fatalf("registry did not answer on %s within 30s", s.addr)
}

func (s *Server) stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

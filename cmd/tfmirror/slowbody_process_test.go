package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/internal/httpserve"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestBodyNeverSentProcess: a client that declares a request body and
// never sends it is answered and cut off within httpserve.BodyTimeout on
// every listener of serve: the front doors (TLS), the metrics listener
// and the admin socket. Before, Go's server waited for the body without
// end, so that any client could hold connections (and file descriptors)
// for good.
func TestBodyNeverSentProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	data := filepath.Join(t.TempDir(), "data")
	m := startProcess(t, bin, data, origin, originCAFile(t, origin), "--metrics-listen", "127.0.0.1:0")
	logged := m.waitLog("serving metrics", 30*time.Second)
	mu, err := url.Parse(fmt.Sprint(logged["url"]))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		dial       func() (net.Conn, error)
	}{
		{"front doors", "/", func() (net.Conn, error) {
			return tls.Dial("tcp", m.addr, &tls.Config{InsecureSkipVerify: true}) // loopback, the test's own mirror
		}},
		{"metrics", "/metrics", func() (net.Conn, error) { return net.Dial("tcp", mu.Host) }},
		{"admin socket", "/v1/versions", func() (net.Conn, error) { return net.Dial("unix", admin.SocketPath(data)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := tc.dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			method := "GET"
			if tc.name == "admin socket" {
				method = "POST"
			}
			fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{", method, tc.path)
			start := time.Now()
			c.SetReadDeadline(start.Add(httpserve.BodyTimeout + 20*time.Second))
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("still open after %v: %v (read %q)", time.Since(start), err, got)
			}
			if !strings.HasPrefix(string(got), "HTTP/1.1 ") {
				t.Errorf("closed after %v without an answer: %q", time.Since(start), got)
			}
		})
	}
}

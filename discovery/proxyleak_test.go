package discovery

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// The upstream proxy of these tests is named, in its URL, by a name and
// an address of the operator's internal network, which the client's
// DialContext routes to a listener on loopback: no answer to a client
// may name either, nor the loopback port the proxy listens on, nor the
// password of its URL.
const (
	leakProxyName = "proxy.corp.internal"
	leakProxyIP   = "10.1.2.3"
	leakProxyPass = "s3cret-proxy-pass"
)

// leakProxyClient is a client of s through the proxy of the given scheme
// named host:3128 in its URL, dialled at real (a loopback address) by
// dial, which may fail instead; logs go to logs.
func leakProxyClient(t *testing.T, s *testServer, scheme, host, real string, dial func(ctx context.Context, real string) (net.Conn, error), logs *logbuf.Buffer, mod func(*Config)) *Client {
	t.Helper()
	proxyAddr := net.JoinHostPort(host, "3128")
	proxyURL := &url.URL{Scheme: scheme, User: url.UserPassword("mirror", leakProxyPass), Host: proxyAddr}
	if dial == nil {
		dial = func(ctx context.Context, real string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", real)
		}
	}
	return newTestClient(t, s, func(cfg *Config) {
		cfg.Proxy = http.ProxyURL(proxyURL)
		cfg.Retries = -1
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		cfg.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == proxyAddr {
				return dial(ctx, real)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		if mod != nil {
			mod(cfg)
		}
	})
}

// namesNoProxy fails t when text names the proxy: its name or address
// as its URL gives them, the loopback port it really listens on, or its
// password.
func namesNoProxy(t *testing.T, what, text, real string) {
	t.Helper()
	secrets := []string{leakProxyName, leakProxyIP, leakProxyPass, "3128"}
	if _, port, err := net.SplitHostPort(real); err == nil {
		secrets = append(secrets, ":"+port)
	}
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s names %q: %s", what, s, text)
		}
	}
}

// TestProxyCertificateNamesNoProxyAddress: an https:// upstream proxy
// whose certificate the mirror refuses fails the request with a
// *CertificateError whose words name the proxy by its settings only:
// not the host name or address of its URL, which x509's words for a
// certificate issued for another name give ("x509: certificate is valid
// for proxy.other.example, not proxy.corp.internal", "cannot validate
// certificate for 10.1.2.3 because it doesn't contain any IP SANs"),
// nor the names the certificate is issued for, the proxy's own. The
// answer to the client, and the status page's origin row, quote these
// words to whoever asks. The log may name them.
func TestProxyCertificateNamesNoProxyAddress(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	s := newTestServer(t, http.NotFoundHandler())
	for _, tc := range []struct {
		name, host string
		certNames  []string
		from, to   time.Time
		wantCause  string
	}{
		{"other name", leakProxyName, []string{"proxy.other.example"}, now.Add(-time.Hour), now.Add(time.Hour), "not valid for this host name"},
		{"no IP SAN", leakProxyIP, []string{"proxy.other.example"}, now.Add(-time.Hour), now.Add(time.Hour), "not valid for this host name"},
		{"other IP", leakProxyIP, []string{"10.9.9.9"}, now.Add(-time.Hour), now.Add(time.Hour), "not valid for this host name"},
		{"expired", leakProxyName, []string{leakProxyName}, now.Add(-2 * time.Hour), now.Add(-time.Hour), "expired or not yet valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxySrv := httptest.NewUnstartedServer(http.HandlerFunc(tunnel))
			proxySrv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, tc.certNames, tc.from, tc.to)}}
			proxySrv.StartTLS()
			t.Cleanup(proxySrv.Close)
			real := proxySrv.Listener.Addr().String()
			var logs logbuf.Buffer
			c := leakProxyClient(t, s, "https", tc.host, real, nil, &logs, func(cfg *Config) {
				pool := rootCAs(t, s)
				pool.AddCert(ca.cert)
				cfg.RootCAs = pool
			})
			_, err := c.Discover(context.Background(), s.host)
			var ce *CertificateError
			if !errors.As(err, &ce) || !ce.Proxy || ce.Cause != tc.wantCause {
				t.Fatalf("err = %v (%T), want the proxy's *CertificateError, %s", err, err, tc.wantCause)
			}
			namesNoProxy(t, "the error", err.Error(), real)
			for _, n := range tc.certNames {
				if strings.Contains(err.Error(), n) {
					t.Errorf("the error names %q, a name of the proxy's certificate: %s", n, err)
				}
			}
			if logged := logs.String(); strings.Contains(logged, leakProxyPass) || !strings.Contains(logged, "x509: ") {
				t.Errorf("the log names the proxy's password, or not the verification's words for the operator:\n%s", logged)
			}
		})
	}
}

// TestProxyFailuresNameNoProxyAddress: however the upstream proxy fails
// (not reached: refused, its name not resolving, no answer; an https://
// proxy that does not speak TLS, or ends the handshake with an alert;
// an HTTP proxy that answers CONNECT with a 502 or 504 whose body names
// itself, or that resets the connection before it answers; a SOCKS5
// proxy that resets it in the handshake), the error names neither the
// proxy's name or address nor the port it listens on, nor its password;
// the log never names the password either.
func TestProxyFailuresNameNoProxyAddress(t *testing.T) {
	s := newTestServer(t, http.NotFoundHandler())
	dead := deadAddr(t)
	ca := newTestCA(t)
	proxyCert := ca.issue(t, []string{leakProxyName}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	naming := fmt.Sprintf("%s (%s:3128) could not connect to %%s", leakProxyName, leakProxyIP)
	for _, tc := range []struct {
		name, scheme string
		// serve, when set, is the proxy, handed each connection; else
		// the proxy is dead (nothing listens), or dial fails as given.
		serve func(net.Conn)
		tls   *tls.Config // serve is behind TLS
		dial  func(ctx context.Context, real string) (net.Conn, error)
	}{
		{name: "refused", scheme: "http"},
		{name: "refused socks5", scheme: "socks5"},
		{name: "refused https", scheme: "https"},
		{name: "name does not resolve", scheme: "http", dial: func(context.Context, string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: leakProxyName, Server: "10.0.0.53:53", IsNotFound: true}}
		}},
		{name: "no answer", scheme: "http", dial: func(context.Context, string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP(leakProxyIP), Port: 3128}, Err: &timeoutErr{}}
		}},
		{name: "https not TLS", scheme: "https", serve: func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nServer: "+leakProxyName+"\r\n\r\n")
		}},
		{name: "https alert", scheme: "https", tls: &tls.Config{ClientAuth: tls.RequireAnyClientCert, Certificates: []tls.Certificate{proxyCert}}, serve: func(c net.Conn) {}},
		{name: "CONNECT 502 naming itself", scheme: "http", serve: connectAnswer("HTTP/1.1 502 Bad Gateway\r\nServer: "+leakProxyName+"\r\nContent-Length: 60\r\n\r\n%-60s", naming)},
		{name: "CONNECT 504 naming itself", scheme: "http", serve: connectAnswer("HTTP/1.1 504 Gateway Timeout\r\nVia: 1.1 "+leakProxyName+"\r\n\r\n%s", naming)},
		{name: "CONNECT status line naming itself", scheme: "http", serve: connectAnswer("HTTP/1.1 599 "+leakProxyName+" %s\r\n\r\n", "down")},
		{name: "reset before the answer", scheme: "http", serve: func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			c.(*net.TCPConn).SetLinger(0)
		}},
		{name: "half an answer", scheme: "http", serve: func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			io.WriteString(c, "HTTP/1.1 200 Conn")
		}},
		{name: "socks5 reset in the handshake", scheme: "socks5", serve: func(c net.Conn) {
			c.Read(make([]byte, 3))
			c.(*net.TCPConn).SetLinger(0)
		}},
		{name: "socks5 bound address naming itself", scheme: "socks5", serve: func(c net.Conn) {
			c.Read(make([]byte, 3))
			c.Write([]byte{5, 0})
			c.Read(make([]byte, 512))
			// A reply of an unknown type, then the proxy's name.
			c.Write(append([]byte{5, 0, 0, 9}, leakProxyName...))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			real := dead
			if tc.serve != nil {
				real = serveConns(t, tc.tls, tc.serve)
			}
			var logs logbuf.Buffer
			c := leakProxyClient(t, s, tc.scheme, leakProxyName, real, tc.dial, &logs, func(cfg *Config) {
				pool := rootCAs(t, s)
				pool.AddCert(ca.cert)
				cfg.RootCAs = pool
			})
			_, err := c.Discover(context.Background(), s.host)
			if err == nil {
				t.Fatal("the request succeeded")
			}
			namesNoProxy(t, "the error", err.Error(), real)
			if strings.Contains(logs.String(), leakProxyPass) {
				t.Errorf("the log names the proxy's password:\n%s", logs.String())
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// connectAnswer is an HTTP proxy that answers a CONNECT with format,
// given words with the target's host:port.
func connectAnswer(format, words string) func(net.Conn) {
	return func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		fmt.Fprintf(c, format, fmt.Sprintf(words, req.Host))
	}
}

// serveConns listens on loopback, behind TLS when cfg is not nil, and hands each connection to serve, closed
// when serve returns; it returns the listener's address.
func serveConns(t *testing.T, cfg *tls.Config, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				if cfg != nil {
					tc := tls.Server(conn, cfg)
					if tc.Handshake() != nil {
						return
					}
					serve(tc)
					return
				}
				serve(conn)
			}()
		}
	}()
	return l.Addr().String()
}

// tunnels is an HTTP proxy on loopback that tunnels each CONNECT to its
// target, and can reset every tunnel it holds at once.
type tunnels struct {
	addr   string
	mu     sync.Mutex
	open   []*net.TCPConn
	closed bool // no more tunnels: the test is over
}

func startTunnels(t *testing.T) *tunnels {
	t.Helper()
	p := &tunnels{}
	p.addr = serveConns(t, nil, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil || req.Method != http.MethodConnect {
			return
		}
		target, err := net.Dial("tcp", req.Host)
		if err != nil {
			return
		}
		defer target.Close()
		c.SetDeadline(time.Time{})
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		p.mu.Lock()
		p.open = append(p.open, c.(*net.TCPConn))
		closed := p.closed
		p.mu.Unlock()
		if closed {
			p.reset()
		}
		go func() { io.Copy(target, br); target.Close() }()
		io.Copy(c, target)
	})
	t.Cleanup(func() { // before the listener's cleanup waits for them
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.reset()
	})
	return p
}

// reset resets every tunnel open.
func (p *tunnels) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.open {
		c.SetLinger(0)
		c.Close()
	}
	p.open = nil
}

// newH2Server is a testServer that speaks HTTP/2.
func newH2Server(t *testing.T, h http.Handler) *testServer {
	t.Helper()
	hc := &hitCounter{hits: map[string]int{}, headers: map[string]http.Header{}, next: h}
	srv := httptest.NewUnstartedServer(hc)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	host, err := svchost.ForComparison(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{hitCounter: hc, srv: srv, host: host}
}

// TestProxyTunnelHTTP2FailureNamesNoProxyAddress: HTTP/2 with the origin
// through the proxy's tunnel, the tunnel reset while a request waits for
// its answer, and while an archive's body is read: the errors are the
// origin's, and name no address of the proxy's.
func TestProxyTunnelHTTP2FailureNamesNoProxyAddress(t *testing.T) {
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	held := make(chan struct{}, 2)
	var protos sync.Map
	s := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto, true)
		switch r.URL.Path {
		case "/hold":
			held <- struct{}{}
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		case "/body":
			w.Write([]byte(strings.Repeat("x", 1<<10)))
			w.(http.Flusher).Flush()
			held <- struct{}{}
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		default:
			w.Write([]byte("ok"))
		}
	}))
	p := startTunnels(t)
	var logs logbuf.Buffer
	c := leakProxyClient(t, s, "http", leakProxyName, p.addr, nil, &logs, nil)
	prov := addrs.Provider{Hostname: s.host, Namespace: "hashicorp", Type: "random"}
	if _, err := c.FetchDocument(context.Background(), prov, s.url("/ok"), 0); err != nil {
		t.Fatalf("through the tunnel: %v", err)
	}
	if _, ok := protos.Load("HTTP/2.0"); !ok {
		t.Fatal("the origin was not asked over HTTP/2")
	}
	for _, path := range []string{"/hold", "/body"} {
		errc := make(chan error, 1)
		go func() {
			if path == "/body" {
				body, _, err := c.OpenArchive(context.Background(), prov, s.url(path))
				if err == nil {
					_, err = io.ReadAll(body)
					body.Close()
				}
				errc <- err
				return
			}
			_, err := c.FetchDocument(context.Background(), prov, s.url(path), 0)
			errc <- err
		}()
		select {
		case <-held:
		case err := <-errc:
			t.Fatalf("%s: %v before the tunnel was reset", path, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the origin was not asked", path)
		}
		p.reset()
		var err error
		select {
		case err = <-errc:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer 10s after the tunnel was reset", path)
		}
		if err == nil {
			t.Fatalf("%s: no error", path)
		}
		if errors.As(err, new(*ProxyError)) {
			t.Errorf("%s: err = %v, the proxy's; want the origin's", path, err)
		}
		namesNoProxy(t, path+": the error", err.Error(), p.addr)
	}
}

// TestProxyChoiceConcurrent: many requests at once through an HTTP
// proxy that tunnels, one that answers CONNECT with garbage, one not
// reached and a SOCKS5 proxy that breaks its protocol, each request's
// proxyChoice written by the dials and CONNECT answers made for it
// while it is read (run with -race): each request's failure is the
// proxy's, and each success succeeds.
func TestProxyChoiceConcurrent(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	for _, tc := range []struct {
		name, scheme string
		h2           bool
		serve        func(net.Conn) // nil: a tunnelling proxy
		dead         bool
	}{
		{name: "tunnel", scheme: "http"},
		{name: "tunnel h2", scheme: "http", h2: true},
		{name: "garbage", scheme: "http", serve: func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n\r\n")
		}},
		{name: "dead", scheme: "http", dead: true},
		{name: "socks5 garbage", scheme: "socks5", serve: func(c net.Conn) {
			c.Read(make([]byte, 3))
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\n\r\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, h)
			if tc.h2 {
				s = newH2Server(t, h)
			}
			var real string
			switch {
			case tc.dead:
				real = deadAddr(t)
			case tc.serve != nil:
				real = serveConns(t, nil, tc.serve)
			default:
				real = startTunnels(t).addr
			}
			var logs logbuf.Buffer
			c := leakProxyClient(t, s, tc.scheme, leakProxyName, real, nil, &logs, func(cfg *Config) {
				cfg.BreakerThreshold = -1
			})
			prov := addrs.Provider{Hostname: s.host, Namespace: "hashicorp", Type: "random"}
			var wg sync.WaitGroup
			var failed, proxys atomic.Int32
			for i := range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := c.FetchDocument(context.Background(), prov, s.url(fmt.Sprintf("/doc%d", i)), 0)
					if err != nil {
						failed.Add(1)
						if Outcome(err) == "proxy" {
							proxys.Add(1)
						}
						namesNoProxy(t, "the error", err.Error(), real)
					}
				}()
			}
			wg.Wait()
			want := int32(40)
			if tc.serve == nil && !tc.dead {
				want = 0
			}
			if failed.Load() != want || proxys.Load() != want {
				t.Errorf("%d of 40 requests failed, %d the proxy's; want %d and %d", failed.Load(), proxys.Load(), want, want)
			}
		})
	}
}

// outcomes counts the outcomes of every operation observed.
type outcomes struct {
	noObserver
	mu   sync.Mutex
	seen map[string]int
}

func (o *outcomes) OriginRequest(_, _, outcome string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[string]int{}
	}
	o.seen[outcome]++
}

func (o *outcomes) count(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[outcome]
}

// TestSharedTunnelFailureIsTheOrigins: requests that start together on
// a cold client each dial the HTTP proxy; the first tunnel opened speaks
// HTTP/2 with the origin and is handed to every request waiting, while
// the proxy has not yet answered the others' CONNECTs (it is slow to
// reach the origin, which is in trouble). The origin then fails each
// request on that tunnel (it resets the streams): every failure is the
// origin's, counted by its circuit breaker and observed as "error", not
// taken for the proxy's break of the HTTP protocol, which would keep the
// breaker shut on an origin in trouble, blame the proxy to the clients
// and fire the proxy's alert.
func TestSharedTunnelFailureIsTheOrigins(t *testing.T) {
	const n = 4
	var arrived atomic.Int32
	all := make(chan struct{})
	s := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(10 * time.Second):
		}
		panic(http.ErrAbortHandler) // the stream reset
	}))
	// The proxy reads n CONNECTs, then tunnels the first; the others it
	// answers only once the test is over.
	var connects atomic.Int32
	read := make(chan struct{})
	over := make(chan struct{})
	real := serveConns(t, nil, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil || req.Method != http.MethodConnect {
			return
		}
		i := connects.Add(1)
		if i == n {
			close(read)
		}
		select {
		case <-read:
		case <-over:
			return
		}
		if i != 1 {
			<-over
			return
		}
		target, err := net.Dial("tcp", req.Host)
		if err != nil {
			return
		}
		defer target.Close()
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() {
			select {
			case <-over:
			case <-time.After(10 * time.Second):
			}
			c.Close()
			target.Close()
		}()
		go func() { io.Copy(target, br); target.Close() }()
		io.Copy(c, target)
	})
	t.Cleanup(func() { close(over) }) // before the proxy's listener's cleanup
	obs := &outcomes{}
	var logs logbuf.Buffer
	c := leakProxyClient(t, s, "http", leakProxyName, real, nil, &logs, func(cfg *Config) {
		cfg.Observer = obs
		cfg.BreakerThreshold = 10
	})
	prov := addrs.Provider{Hostname: s.host, Namespace: "hashicorp", Type: "random"}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.FetchDocument(context.Background(), prov, s.url(fmt.Sprintf("/doc%d", i)), 0)
		}()
	}
	wg.Wait()
	if got := arrived.Load(); got != n {
		t.Fatalf("%d requests reached the origin, want %d on the one tunnel", got, n)
	}
	for i, err := range errs {
		if err == nil || errors.As(err, new(*ProxyError)) {
			t.Errorf("request %d: err = %v, want the origin's failure", i, err)
		}
	}
	if got := c.Circuit(string(s.host)); got.Failures != n {
		t.Errorf("the origin's breaker counted %d failures, want %d", got.Failures, n)
	}
	if obs.count("error") != n || obs.count("proxy") != 0 {
		t.Errorf("outcomes %v, want %d errors", obs.seen, n)
	}
}

// TestUnreachableProxyLogTellsTheBreaker: the log line of an upstream
// proxy not reached says what the mirror does of it: retried, and
// counted toward the origin's circuit breaker (which opens on it, as
// the network down), not that the breaker ignores it, as it does the
// proxy's refusals.
func TestUnreachableProxyLogTellsTheBreaker(t *testing.T) {
	s := newTestServer(t, http.NotFoundHandler())
	var logs logbuf.Buffer
	c := leakProxyClient(t, s, "http", leakProxyName, deadAddr(t), nil, &logs, func(cfg *Config) {
		cfg.BreakerThreshold = 1
	})
	if _, err := c.Discover(context.Background(), s.host); !errors.As(err, new(*ProxyError)) {
		t.Fatalf("err = %v, want the proxy's", err)
	}
	if got := c.Circuit(string(s.host)); got.State != "open" {
		t.Fatalf("the origin's breaker is %+v, want open", got)
	}
	logged := logs.String()
	if !strings.Contains(logged, "the upstream proxy could not be reached") || strings.Contains(logged, "the circuit breaker ignores it") ||
		!strings.Contains(logged, "counted toward the circuit breaker") {
		t.Errorf("the log does not say the breaker counts the proxy not reached:\n%s", logged)
	}
}

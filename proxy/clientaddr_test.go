package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// proxiedMirror is a mirror with client authentication whose handler is
// the one tfmirror serve runs: TrustProxies in front of Instrument in
// front of the Server, with its access log and auth log kept.
type proxiedMirror struct {
	h      *harness
	url    string
	client *http.Transport
	clock  *testClock
	counts *authCounts
	logMu  sync.Mutex
	logs   bytes.Buffer
}

func newProxiedMirror(t *testing.T, trusted ...string) *proxiedMirror {
	t.Helper()
	m := &proxiedMirror{clock: &testClock{now: time.Now()}, counts: &authCounts{}}
	logger := slog.New(slog.NewJSONHandler(lockedWriter{mu: &m.logMu, w: &m.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := NewAuth(AuthConfig{
		TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))},
		SigningKey:  bytes.Repeat([]byte{7}, 32),
		Now:         m.clock.Now,
		Logger:      logger,
		Metrics:     m.counts,
	})
	if err != nil {
		t.Fatal(err)
	}
	m.h = newHarness(t, harnessOptions{cfg: Config{Auth: a, Logger: logger}})
	m.h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	var prefixes []netip.Prefix
	for _, p := range trusted {
		prefixes = append(prefixes, netip.MustParsePrefix(p))
	}
	srv := httptest.NewServer(TrustProxies(Instrument(m.h.server, logger, nil), prefixes))
	t.Cleanup(srv.Close)
	m.url = srv.URL
	m.client = srv.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(m.client.CloseIdleConnections)
	return m
}

// from returns a client of m whose connections come from the loopback
// address ip; each request takes its headers as name, value pairs (a
// name given twice is sent as two header lines).
func (m *proxiedMirror) from(t *testing.T, ip string) func(path string, header ...string) response {
	t.Helper()
	tr := m.client.Clone()
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}).DialContext
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return func(path string, header ...string) response {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, m.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return response{status: resp.StatusCode, header: resp.Header, body: body, err: err}
	}
}

// lines returns the log lines of m with message msg, decoded.
func (m *proxiedMirror) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	m.h.waitIdle()
	m.logMu.Lock()
	defer m.logMu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(m.logs.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Bytes(), err)
		}
		if line["msg"] == msg {
			out = append(out, line)
		}
	}
	return out
}

// accessClients returns the client address of each access-log line of
// path, in order.
func (m *proxiedMirror) accessClients(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, l := range m.lines(t, "request") {
		if l["path"] == path {
			c, _ := l["client"].(string)
			out = append(out, c)
		}
	}
	return out
}

const wrongToken = "wrong-token-guess-0000"

// Behind a trusted proxy (127.0.0.2), each client the proxy names in
// X-Forwarded-For has a budget of its own: one client's wrong tokens get
// that client refused, and only it; another's right token keeps working,
// as do the proxy's own requests. The access log names each client, and
// the line saying a client went over the limit names it too.
func TestTrustedProxyClientsLimitedApart(t *testing.T) {
	t.Parallel()
	m := newProxiedMirror(t, "127.0.0.2/32")
	proxy := m.from(t, "127.0.0.2")
	index := providerPath("index.json")
	const broken, good = "192.0.2.10", "198.51.100.7"

	for i := range AuthFailureBurst {
		if r := proxy(index, "Authorization", "Bearer "+wrongToken, "X-Forwarded-For", broken); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d of %s: status %d, want 401", i+1, broken, r.status)
		}
	}
	for _, tok := range []string{wrongToken, testToken} {
		if r := proxy(index, "Authorization", "Bearer "+tok, "X-Forwarded-For", broken); r.status != http.StatusTooManyRequests {
			t.Fatalf("%s over the limit: status %d, want 429", broken, r.status)
		}
	}
	// The other client, through the same proxy, is not limited.
	for i := range 3 {
		if r := proxy(index, "Authorization", "Bearer "+testToken, "X-Forwarded-For", good); r.status != http.StatusOK {
			t.Fatalf("right token %d of %s through the proxy: status %d, want 200", i+1, good, r.status)
		}
	}
	if r := proxy(index, "Authorization", "Bearer "+wrongToken, "X-Forwarded-For", good); r.status != http.StatusUnauthorized {
		t.Errorf("wrong token of %s: status %d, want 401 (a budget of its own)", good, r.status)
	}
	// Nor is the proxy's own address (a request it makes itself).
	if r := proxy(index, "Authorization", "Bearer "+testToken); r.status != http.StatusOK {
		t.Errorf("the proxy's own request: status %d, want 200", r.status)
	}
	// And the limited client waits as ever.
	m.clock.Add(time.Second)
	if r := proxy(index, "Authorization", "Bearer "+testToken, "X-Forwarded-For", broken); r.status != http.StatusOK {
		t.Errorf("%s after waiting: status %d, want 200", broken, r.status)
	}

	clients := m.accessClients(t, index)
	counted := map[string]int{}
	for _, c := range clients {
		counted[c]++
	}
	if counted[broken] != AuthFailureBurst+3 || counted[good] != 4 || counted["127.0.0.2"] != 1 {
		t.Errorf("access log clients %v, want %d of %s, 4 of %s, 1 of 127.0.0.2", counted, AuthFailureBurst+3, broken, good)
	}
	limited := m.lines(t, LimitedMessage)
	if len(limited) != 1 || limited[0]["client"] != broken || limited[0]["from"] != "x-forwarded-for" || limited[0]["level"] != "WARN" {
		t.Errorf("over-the-limit lines %v, want one warning naming %s, from X-Forwarded-For", limited, broken)
	}
	for _, l := range m.lines(t, "client authentication failed") {
		if l["client"] != broken && l["client"] != good {
			t.Errorf("a failure counted against %v", l["client"])
		}
	}
}

// From a peer that is not trusted, X-Forwarded-For is not read, whatever
// it says: a client cannot escape its budget by naming another address
// in each request, nor put another client over the limit. The line
// saying it went over the limit says its header was ignored, and how to
// trust a proxy.
func TestSpoofedForwardedForIgnored(t *testing.T) {
	t.Parallel()
	m := newProxiedMirror(t, "127.0.0.2/32")
	spoofer, victim := m.from(t, "127.0.0.3"), m.from(t, "127.0.0.2")
	index := providerPath("index.json")
	for i := range AuthFailureBurst {
		xff := netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}).String()
		if r := spoofer(index, "Authorization", "Bearer "+wrongToken, "X-Forwarded-For", xff); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: status %d, want 401", i+1, r.status)
		}
	}
	if r := spoofer(index, "Authorization", "Bearer "+testToken, "X-Forwarded-For", "203.0.113.200"); r.status != http.StatusTooManyRequests {
		t.Errorf("spoofer over the limit with a fresh X-Forwarded-For: status %d, want 429", r.status)
	}
	// The addresses it named are not limited.
	if r := victim(index, "Authorization", "Bearer "+testToken, "X-Forwarded-For", "203.0.113.0"); r.status != http.StatusOK {
		t.Errorf("a client the spoofer named: status %d, want 200", r.status)
	}
	for _, c := range m.accessClients(t, index)[:AuthFailureBurst+1] {
		if c != "127.0.0.3" {
			t.Errorf("access log client %q, want the peer 127.0.0.3", c)
		}
	}
	limited := m.lines(t, LimitedMessage)
	if len(limited) != 1 || limited[0]["client"] != "127.0.0.3" || limited[0]["from"] != "peer" ||
		limited[0]["x_forwarded_for_ignored"] != true || !strings.Contains(limited[0]["hint"].(string), "trusted_proxies") {
		t.Errorf("over-the-limit lines %v, want one naming the peer, its ignored header and trusted_proxies", limited)
	}
}

// Through a chain of trusted proxies, the client is the rightmost address
// not in a trusted range: not a trusted hop (10.0.0.0/8), and never what
// lies left of the client's address, which the client wrote. Header
// lines are one list.
func TestForwardedForChain(t *testing.T) {
	t.Parallel()
	m := newProxiedMirror(t, "127.0.0.2/32", "10.0.0.0/8")
	proxy := m.from(t, "127.0.0.2")
	index := providerPath("index.json")
	const client = "198.51.100.1"
	chains := [][]string{
		{"X-Forwarded-For", "203.0.113.9, " + client + ", 10.1.2.3"},
		{"X-Forwarded-For", "203.0.113.9," + client + ",10.9.9.9,10.1.1.1"},
		{"X-Forwarded-For", "203.0.113.9", "X-Forwarded-For", client + ", 10.1.2.3"},
		{"X-Forwarded-For", client + ":4711, 10.1.2.3"},
	}
	for i := range AuthFailureBurst {
		chain := chains[i%len(chains)]
		if r := proxy(index, append([]string{"Authorization", "Bearer " + wrongToken}, chain...)...); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: status %d, want 401", i+1, r.status)
		}
	}
	for _, chain := range chains {
		if r := proxy(index, append([]string{"Authorization", "Bearer " + testToken}, chain...)...); r.status != http.StatusTooManyRequests {
			t.Errorf("%v: status %d, want 429: one client, whichever hops it came through", chain, r.status)
		}
	}
	// The address the client wrote on the left is someone else's.
	if r := proxy(index, "Authorization", "Bearer "+testToken, "X-Forwarded-For", "203.0.113.9, 10.1.2.3"); r.status != http.StatusOK {
		t.Errorf("203.0.113.9: status %d, want 200", r.status)
	}
	for i, c := range m.accessClients(t, index)[:AuthFailureBurst+len(chains)] {
		if c != client {
			t.Errorf("access log line %d: client %q, want %s", i, c, client)
		}
	}
}

// A malformed header from a trusted proxy (an entry that is not an IP
// address where the client's should be), or one naming only trusted
// hops, leaves the proxy itself as the client: its own budget, which the
// clients it names properly do not share. Garbage left of the client's
// address is never read.
func TestMalformedForwardedForFallsBackToPeer(t *testing.T) {
	t.Parallel()
	m := newProxiedMirror(t, "127.0.0.2/32", "10.0.0.0/8")
	proxy := m.from(t, "127.0.0.2")
	index := providerPath("index.json")
	bad := []string{"not-an-address", "192.0.2.1, unknown", "10.1.2.3", "192.0.2.1/24"}
	for i := range AuthFailureBurst {
		if r := proxy(index, "Authorization", "Bearer "+wrongToken, "X-Forwarded-For", bad[i%len(bad)]); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: status %d, want 401", i+1, r.status)
		}
	}
	if r := proxy(index, "Authorization", "Bearer "+testToken, "X-Forwarded-For", bad[0]); r.status != http.StatusTooManyRequests {
		t.Errorf("the proxy's own budget spent: status %d, want 429", r.status)
	}
	if r := proxy(index, "Authorization", "Bearer "+testToken); r.status != http.StatusTooManyRequests {
		t.Errorf("the proxy without a header: status %d, want 429", r.status)
	}
	if r := proxy(index, "Authorization", "Bearer "+testToken, "X-Forwarded-For", "garbage, 192.0.2.1"); r.status != http.StatusOK {
		t.Errorf("a client named after the garbage it wrote: status %d, want 200", r.status)
	}
	clients := m.accessClients(t, index)
	for i, c := range clients[:AuthFailureBurst+2] {
		if c != "127.0.0.2" {
			t.Errorf("access log line %d: client %q, want the peer 127.0.0.2", i, c)
		}
	}
	if got := clients[len(clients)-1]; got != "192.0.2.1" {
		t.Errorf("access log client %q, want 192.0.2.1", got)
	}
	limited := m.lines(t, LimitedMessage)
	if len(limited) != 1 || limited[0]["client"] != "127.0.0.2" || limited[0]["from"] != "trusted-proxy" ||
		!strings.Contains(limited[0]["hint"].(string), "appends the client's address") {
		t.Errorf("over-the-limit lines %v, want one naming the trusted proxy and why", limited)
	}
}

// forwardedFor reads the list from the right, at most
// MaxForwardedEntries entries, and gives up on an entry that is not an
// address before it reaches the client's.
func TestForwardedForSelection(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	many := strings.Repeat("10.0.0.1, ", MaxForwardedEntries)
	for _, tc := range []struct {
		name   string
		values []string
		want   string // "" = fall back to the peer
	}{
		{"one", []string{"192.0.2.1"}, "192.0.2.1"},
		{"rightmost untrusted", []string{"192.0.2.1, 192.0.2.2"}, "192.0.2.2"},
		{"past trusted hops", []string{"192.0.2.1, 192.0.2.2, 10.0.0.1, 10.2.3.4"}, "192.0.2.2"},
		{"lines are one list", []string{"192.0.2.1", "192.0.2.2, 10.0.0.1", "10.0.0.2"}, "192.0.2.2"},
		{"empty entries skipped", []string{"192.0.2.1, , 10.0.0.1,"}, "192.0.2.1"},
		{"IPv6", []string{"2001:db8::7, 2001:db8:ffff::1"}, "2001:db8::7"},
		{"IPv6 with port", []string{"[2001:db8::7]:4711"}, "2001:db8::7"},
		{"IPv4 with port", []string{"192.0.2.1:4711"}, "192.0.2.1"},
		{"IPv4-mapped", []string{"::ffff:192.0.2.1"}, "192.0.2.1"},
		{"IPv4-mapped trusted", []string{"192.0.2.1, ::ffff:10.0.0.1"}, "192.0.2.1"},
		{"garbage left of the client", []string{"<script>, 192.0.2.1"}, "192.0.2.1"},
		{"garbage right of the client", []string{"192.0.2.1, unknown"}, ""},
		{"garbage after trusted hops", []string{"192.0.2.1, nope, 10.0.0.1"}, ""},
		{"only trusted", []string{"10.0.0.1, 10.0.0.2"}, ""},
		{"empty", []string{""}, ""},
		{"none", nil, ""},
		{"a CIDR", []string{"192.0.2.0/24"}, ""},
		{"a zone", []string{"fe80::1%eth0"}, "fe80::1"},
		{"client beyond the bound", []string{"192.0.2.1, " + many}, ""},
		{"client beyond the bound, an empty entry counted", []string{"192.0.2.1, " + strings.Repeat("10.0.0.1, ", MaxForwardedEntries-1)}, ""},
		{"client at the bound", []string{"192.0.2.1," + strings.Repeat("10.0.0.1,", MaxForwardedEntries-2) + "10.0.0.1"}, "192.0.2.1"},
		{"a long header", []string{strings.Repeat(",", 60<<10) + "192.0.2.1"}, "192.0.2.1"},
		{"a long header of empty entries", []string{"192.0.2.1" + strings.Repeat(",", 60<<10)}, ""},
	} {
		addr, ok := forwardedFor(tc.values, trusted)
		got := ""
		if ok {
			got = addr.String()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Without trusted proxies no header is read; a request from a peer not
// trusted keeps its peer; the access log's client is the peer's address.
func TestClientAddrWithoutTrust(t *testing.T) {
	t.Parallel()
	var got []string
	next := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		a, ok := ClientAddr(r)
		got = append(got, a.String()+"|"+clientText(r)+"|"+map[bool]string{true: "ok", false: "none"}[ok])
	})
	req := func(remote, xff string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xff)
		return r
	}
	TrustProxies(next, nil).ServeHTTP(nil, req("192.0.2.7:5000", "198.51.100.1"))
	trusting := TrustProxies(next, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	trusting.ServeHTTP(nil, req("192.0.2.7:5000", "198.51.100.1"))
	trusting.ServeHTTP(nil, req("10.0.0.5:5000", "198.51.100.1"))
	trusting.ServeHTTP(nil, req("[::ffff:10.0.0.5]:5000", "198.51.100.2"))
	trusting.ServeHTTP(nil, req("@", "198.51.100.1"))
	want := []string{
		"192.0.2.7|192.0.2.7|ok",
		"192.0.2.7|192.0.2.7|ok",
		"198.51.100.1|198.51.100.1|ok",
		"198.51.100.2|198.51.100.2|ok",
		"invalid IP||none",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Whatever the header, forwardedFor returns an address outside the
// trusted ranges that one of the last MaxForwardedEntries entries names,
// or nothing.
func FuzzForwardedFor(f *testing.F) {
	for _, seed := range []string{"192.0.2.1", "192.0.2.1, 10.0.0.1", "[2001:db8::1]:80,10.1.1.1", ",,,", "a,b", "::ffff:10.0.0.1", "fe80::1%lo"} {
		f.Add(seed, "10.0.0.2")
	}
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	f.Fuzz(func(t *testing.T, line1, line2 string) {
		addr, ok := forwardedFor([]string{line1, line2}, trusted)
		if !ok {
			return
		}
		if !addr.IsValid() || addr.Zone() != "" || addr.Is4In6() || inPrefixes(trusted, addr) {
			t.Fatalf("%q, %q: %v", line1, line2, addr)
		}
		entries := append(strings.Split(line1, ","), strings.Split(line2, ",")...)
		if len(entries) > MaxForwardedEntries {
			entries = entries[len(entries)-MaxForwardedEntries:]
		}
		for _, e := range entries {
			if a, valid := parseForwarded(strings.TrimSpace(e)); valid && a == addr {
				return
			}
		}
		t.Fatalf("%q, %q: %v is none of the last entries", line1, line2, addr)
	})
}

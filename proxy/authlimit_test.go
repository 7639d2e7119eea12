package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
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

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// authCounts is an AuthMetrics that counts.
type authCounts struct {
	mu       sync.Mutex
	failures map[string]int
	limited  int
}

func (c *authCounts) AuthFailed(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failures == nil {
		c.failures = map[string]int{}
	}
	c.failures[kind]++
}

func (c *authCounts) AuthLimited() { c.mu.Lock(); c.limited++; c.mu.Unlock() }

func (c *authCounts) get() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for k, v := range c.failures {
		m[k] = v
	}
	return m, c.limited
}

// clientAt returns a client of h's server whose connections come from
// the loopback address ip.
func clientAt(t *testing.T, h *harness, ip string) func(path string, header ...string) response {
	t.Helper()
	tr := h.http.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}).DialContext
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return func(path string, header ...string) response {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, h.http.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
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

// A guesser of tokens gets AuthFailureBurst wrong tries from one address,
// then 429 with Retry-After, for every credential (the right token too)
// until it waited; a request without credentials is no guess and is not
// limited; another address keeps working; the failures are counted and
// logged without the tokens.
func TestAuthFailuresLimitedPerAddress(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	counts := &authCounts{}
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(lockedWriter{mu: &logMu, w: &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := NewAuth(AuthConfig{
		TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))},
		SigningKey:  bytes.Repeat([]byte{7}, 32),
		URLTTL:      time.Hour,
		Now:         clock.Now,
		Logger:      logger,
		Metrics:     counts,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{cfg: Config{Auth: a}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	guesser, other := clientAt(t, h, "127.0.0.2"), clientAt(t, h, "127.0.0.3")
	index := providerPath("index.json")
	const wrong = "wrong-token-guess-0000"

	// A client's first request without a token is answered 401, and is
	// not counted: it guessed nothing.
	for range 3 {
		if r := guesser(index); r.status != http.StatusUnauthorized {
			t.Fatalf("without a token: status %d, want 401", r.status)
		}
	}
	for i := range AuthFailureBurst {
		if r := guesser(index, "Authorization", "Bearer "+wrong); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: status %d, want 401", i+1, r.status)
		}
	}
	for _, hdr := range [][]string{
		{"Authorization", "Bearer " + wrong},
		{"Authorization", "Bearer " + testToken}, // the right guess, too late
	} {
		r := guesser(index, hdr...)
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" {
			t.Fatalf("over the limit: status %d, Retry-After %q; want 429, 1", r.status, r.header.Get("Retry-After"))
		}
		var body errorBody
		r.json(t, &body)
		if len(body.Errors) != 1 || !strings.Contains(body.Errors[0], "too many failed authentication attempts") {
			t.Errorf("errors %q", body.Errors)
		}
	}
	// Without credentials the same address is answered as before.
	if r := guesser(index); r.status != http.StatusUnauthorized {
		t.Errorf("without a token, over the limit: status %d, want 401", r.status)
	}
	if r := guesser("/healthz"); r.status == http.StatusTooManyRequests {
		t.Errorf("/healthz without credentials: 429")
	}
	// Another address is not limited by the guesser.
	if r := other(index, "Authorization", "Bearer "+testToken); r.status != http.StatusOK {
		t.Errorf("valid token from another address: status %d, want 200", r.status)
	}
	if r := other(index, "Authorization", "Bearer "+wrong); r.status != http.StatusUnauthorized {
		t.Errorf("wrong token from another address: status %d, want 401 (its own budget)", r.status)
	}
	// A second later the guesser has one try again.
	clock.Add(time.Second)
	if r := guesser(index, "Authorization", "Bearer "+testToken); r.status != http.StatusOK {
		t.Errorf("valid token after waiting: status %d, want 200", r.status)
	}
	if r := guesser(index, "Authorization", "Bearer "+wrong); r.status != http.StatusUnauthorized {
		t.Errorf("wrong token after waiting: status %d, want 401", r.status)
	}
	if r := guesser(index, "Authorization", "Bearer "+testToken); r.status != http.StatusTooManyRequests {
		t.Errorf("valid token after a new failure: status %d, want 429", r.status)
	}

	failures, limited := counts.get()
	if failures[FailureToken] != AuthFailureBurst+2 || limited != 3 {
		t.Errorf("counted failures %v and %d limited; want %d token failures, 3 limited", failures, limited, AuthFailureBurst+2)
	}
	logMu.Lock()
	log := logs.String()
	logMu.Unlock()
	if strings.Contains(log, wrong) || strings.Contains(log, testToken) {
		t.Error("a token reached the log")
	}
	if !strings.Contains(log, `"msg":"client authentication failed"`) || !strings.Contains(log, `"client":"127.0.0.2"`) ||
		!strings.Contains(log, `"limited":true`) {
		t.Errorf("the failures are not logged with their client address:\n%s", log)
	}
}

// A wrong signature on an archive URL is a failed attempt too; a missing
// one is not.
func TestBadArchiveSignaturesLimited(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	counts := &authCounts{}
	a, err := NewAuth(AuthConfig{
		TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))},
		SigningKey:  bytes.Repeat([]byte{7}, 32),
		Now:         clock.Now,
		Metrics:     counts,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{cfg: Config{Auth: a}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	guesser := clientAt(t, h, "127.0.0.4")
	archive := archivePath("1.0.0", "linux_amd64")
	for range 3 {
		if r := guesser(archive); r.status != http.StatusForbidden {
			t.Fatalf("no signature: status %d, want 403", r.status)
		}
	}
	forged := archive + "?exp=99999999999&sig=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for i := range AuthFailureBurst {
		if r := guesser(forged); r.status != http.StatusForbidden {
			t.Fatalf("forged signature %d: status %d, want 403", i+1, r.status)
		}
	}
	if r := guesser(forged); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("forged signature over the limit: status %d, Retry-After %q; want 429 with Retry-After", r.status, r.header.Get("Retry-After"))
	}
	// The status page counts a wrong token too, though it answers 200.
	if r := clientAt(t, h, "127.0.0.5")("/?format=json", "Authorization", "Bearer "+"wrong-token-guess-0000"); r.status != http.StatusOK {
		t.Errorf("status page with a wrong token: %d", r.status)
	}
	if failures, limited := counts.get(); failures[FailureSignature] != AuthFailureBurst || failures[FailureToken] != 1 || limited != 1 {
		t.Errorf("counted %v, %d limited; want %d signature failures, 1 token failure, 1 limited", failures, limited, AuthFailureBurst)
	}
}

// A signature is a credential however its parameter is spelt: the door
// reads the query as url.ParseQuery decodes it, so "%73ig" is "sig", and
// an address over the limit is answered 429 for it before any door
// checks it, as for "sig", not 403 after its check.
func TestEncodedSignatureParameterLimited(t *testing.T) {
	t.Parallel()
	counts := &authCounts{}
	a, err := NewAuth(AuthConfig{
		TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))},
		SigningKey:  bytes.Repeat([]byte{7}, 32),
		Metrics:     counts,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{cfg: Config{Auth: a}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	guesser := clientAt(t, h, "127.0.0.6")
	archive := archivePath("1.0.0", "linux_amd64")
	for i := range AuthFailureBurst {
		if r := guesser(archive + "?exp=99999999999&sig=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"); r.status != http.StatusForbidden {
			t.Fatalf("forged signature %d: status %d, want 403", i+1, r.status)
		}
	}
	for _, query := range []string{"?exp=99999999999&%73ig=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "?exp=99999999999&s%69g=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		if r := guesser(archive + query); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
			t.Errorf("forged signature %s over the limit: status %d, Retry-After %q; want 429 with Retry-After, before the door checks it", query, r.status, r.header.Get("Retry-After"))
		}
	}
	if failures, limited := counts.get(); failures[FailureSignature] != AuthFailureBurst || limited != 2 {
		t.Errorf("counted %v, %d limited; want %d signature failures and 2 limited", failures, limited, AuthFailureBurst)
	}
}

// The addresses remembered are bounded: the one whose last failure is
// oldest is forgotten first.
func TestFailureLimiterBounded(t *testing.T) {
	t.Parallel()
	l := newFailureLimiter(3)
	now := time.Now()
	keys := []netip.Prefix{
		netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("192.0.2.2/32"),
		netip.MustParsePrefix("2001:db8::/64"), netip.MustParsePrefix("192.0.2.4/32"),
	}
	for range AuthFailureBurst {
		l.fail(keys[0], now)
	}
	for _, k := range keys[1:] {
		l.fail(k, now)
	}
	if len(l.clients) != 3 || l.order.Len() != 3 {
		t.Fatalf("%d addresses remembered, want 3", len(l.clients))
	}
	if _, ok := l.clients[keys[0]]; ok {
		t.Error("the oldest address is still remembered")
	}
	if _, over := l.wait(keys[0], now); over {
		t.Error("a forgotten address is still limited")
	}
}

// An IPv6 client is counted by its /64; an IPv4-mapped address as IPv4.
func TestClientKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ remote, want string }{
		{"192.0.2.7:5000", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.7]:5000", "192.0.2.7"},
		{"@", "local"},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tc.remote
		if got := clientString(clientKey(r)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.remote, got, tc.want)
		}
	}
}

// A right token checked while its address is over the limit (in a race
// with the failures that put it there, past the front door's check) is
// refused all the same: no guess is accepted beyond the budget.
func TestRightTokenOverLimitRefused(t *testing.T) {
	t.Parallel()
	a, err := NewAuth(AuthConfig{TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))}, SigningKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.9:4000"
	for range AuthFailureBurst {
		if a.CheckToken(r, "wrong-token-guess-0000") {
			t.Fatal("a wrong token accepted")
		}
	}
	if a.CheckToken(r, testToken) {
		t.Error("the right token accepted from an address over the limit")
	}
	r.RemoteAddr = "192.0.2.10:4000"
	if !a.CheckToken(r, testToken) {
		t.Error("the right token refused from another address")
	}
}

// A credential the mirror made that has expired (a signed URL a slow
// install used late, a token the OCI door issued, whether sent to the
// door or to its token endpoint) is refused without counting as a failed
// attempt: it guessed nothing.
func TestExpiredCredentialsNotCounted(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	counts := &authCounts{}
	a, err := NewAuth(AuthConfig{TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))}, SigningKey: bytes.Repeat([]byte{7}, 32),
		URLTTL: time.Hour, Now: clock.Now, Metrics: counts})
	if err != nil {
		t.Fatal(err)
	}
	p := addrs.Provider{Hostname: "registry.terraform.io", Namespace: "hashicorp", Type: "random"}
	const file = "terraform-provider-random_1.0.0_linux_amd64.zip"
	archive := httptest.NewRequest(http.MethodGet, "/"+file+"?"+a.sign(p, file), nil)
	archive.RemoteAddr = "192.0.2.20:4000"
	token := httptest.NewRequest(http.MethodGet, "/v2/", nil)
	token.RemoteAddr = archive.RemoteAddr
	issued, _, ok := a.IssueToken(token, testToken)
	if !ok || !a.verify(archive, p, file) || !a.CheckBearer(token, issued) {
		t.Fatal("fresh credentials refused")
	}
	// A client that sends the token endpoint the bearer token it holds
	// is not issued another (which would outlive the first's TTL), and
	// guessed nothing.
	for range 2 * AuthFailureBurst {
		if again, _, ok := a.IssueToken(token, issued); ok {
			t.Fatalf("a token issued for an issued token: %q", again)
		}
	}
	clock.Add(time.Hour + time.Second)
	for range 2 * AuthFailureBurst {
		if a.verify(archive, p, file) || a.CheckBearer(token, issued) {
			t.Fatal("an expired credential accepted")
		}
		if _, _, ok := a.IssueToken(token, issued); ok {
			t.Fatal("a token issued for an expired issued token")
		}
	}
	if !a.CheckToken(token, testToken) {
		t.Error("the right token refused after expired credentials")
	}
	if failures, _ := counts.get(); len(failures) != 0 {
		t.Errorf("expired credentials counted as failures: %v", failures)
	}
}

package proxy

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestStatusShowsAuthLimit: with client authentication on, the status
// page shows a request with a valid token the failed attempts since
// start by kind, the client addresses over the limit now and the trusted
// proxy ranges, and never an address; a request without a token sees
// none of it.
func TestStatusShowsAuthLimit(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	a, err := NewAuth(AuthConfig{
		TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))},
		SigningKey:  bytes.Repeat([]byte{7}, 32),
		URLTTL:      time.Hour,
		Now:         clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{cfg: Config{Auth: a, TrustedProxyRanges: 2}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	guesser, operator := clientAt(t, h, "127.0.0.2"), clientAt(t, h, "127.0.0.3")
	const wrong = "wrong-token-guess-0000"

	view := func() (Status, response) {
		t.Helper()
		var st Status
		raw := operator("/?format=json", "Authorization", "Bearer "+testToken)
		raw.json(t, &st)
		page := operator("/", "Authorization", "Bearer "+testToken, "Accept", "text/html")
		if page.status != http.StatusOK {
			t.Fatalf("status page: %d", page.status)
		}
		for _, body := range [][]byte{page.body, raw.body} {
			if bytes.Contains(body, []byte("127.0.0.2")) || bytes.Contains(body, []byte(wrong)) || bytes.Contains(body, []byte(testToken)) {
				t.Errorf("the status page shows a client address or a token:\n%s", body)
			}
		}
		return st, page
	}

	st, page := view()
	if st.ClientAuth == nil || st.ClientAuth.FailedAttempts[FailureToken] != 0 || st.ClientAuth.ClientsOverLimit != 0 {
		t.Fatalf("before any failure: client_auth %+v", st.ClientAuth)
	}
	if !bytes.Contains(page.body, []byte("no failed attempt since start; no client address over the limit now; 2 trusted proxy ranges")) {
		t.Errorf("before any failure: the page's row is not there:\n%s", page.body)
	}

	for i := range AuthFailureBurst + 1 {
		want := http.StatusUnauthorized
		if i == AuthFailureBurst {
			want = http.StatusTooManyRequests
		}
		if r := guesser(providerPath("index.json"), "Authorization", "Bearer "+wrong); r.status != want {
			t.Fatalf("wrong token %d: status %d, want %d", i+1, r.status, want)
		}
	}
	st, page = view()
	want := AuthLimitStatus{FailedAttempts: map[string]uint64{FailureToken: AuthFailureBurst, FailureIssued: 0, FailureSignature: 0},
		ClientsOverLimit: 1, TrustedProxyRanges: 2}
	if got := st.ClientAuth; got == nil || got.ClientsOverLimit != want.ClientsOverLimit || got.TrustedProxyRanges != want.TrustedProxyRanges ||
		len(got.FailedAttempts) != 3 || got.FailedAttempts[FailureToken] != AuthFailureBurst || got.FailedAttempts[FailureIssued] != 0 || got.FailedAttempts[FailureSignature] != 0 {
		t.Fatalf("after %d wrong tokens: client_auth %+v, want %+v", AuthFailureBurst+1, got, want)
	}
	for _, text := range []string{`id="health-auth"`, "20 failed attempts</span> since start (<span class=\"plat\">token 20</span>)",
		"1 client address over the limit</span> now"} {
		if !bytes.Contains(page.body, []byte(text)) {
			t.Errorf("the page lacks %q:\n%s", text, page.body)
		}
	}

	// Without a token, or with a wrong one: none of it.
	var anon Status
	raw := h.get("/?format=json", "Authorization", "Bearer "+wrong)
	raw.json(t, &anon)
	if anon.ClientAuth != nil || bytes.Contains(raw.body, []byte("client_auth")) {
		t.Errorf("without a valid token: client_auth %s", raw.body)
	}
	if p := h.get("/", "Accept", "text/html"); bytes.Contains(p.body, []byte("health-auth")) || bytes.Contains(p.body, []byte("failed attempt")) {
		t.Errorf("without a token the page shows the row:\n%s", p.body)
	}

	// Over the limit is now: a second later the guesser has a try again.
	clock.Add(time.Second)
	if st, _ = view(); st.ClientAuth == nil || st.ClientAuth.ClientsOverLimit != 0 || st.ClientAuth.FailedAttempts[FailureToken] < AuthFailureBurst {
		t.Errorf("a second later: client_auth %+v, want no address over the limit, the failures kept", st.ClientAuth)
	}
}

// TestStatusAuthLimitAbsentWithoutAuth: without client authentication
// the status page has no such row.
func TestStatusAuthLimitAbsentWithoutAuth(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: Config{TrustedProxyRanges: 1}})
	raw := h.get("/?format=json")
	var st Status
	raw.json(t, &st)
	if st.ClientAuth != nil || bytes.Contains(raw.body, []byte("client_auth")) {
		t.Errorf("without client authentication: %s", raw.body)
	}
	if p := h.get("/", "Accept", "text/html"); bytes.Contains(p.body, []byte("health-auth")) || strings.Contains(string(p.body), "failed attempt") {
		t.Errorf("without client authentication the page shows the row:\n%s", p.body)
	}
}

// TestFailureLimiterOverLimit: the addresses over the limit are counted
// as of the time asked, debt included.
func TestFailureLimiterOverLimit(t *testing.T) {
	t.Parallel()
	l := newFailureLimiter(8)
	now := time.Now()
	a, b, c := netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("192.0.2.2/32"), netip.MustParsePrefix("2001:db8::/64")
	for range AuthFailureBurst {
		l.fail(a, now)
	}
	for range AuthFailureBurst + 5 {
		l.fail(b, now)
	}
	l.fail(c, now)
	for _, tc := range []struct {
		after time.Duration
		want  int
	}{{0, 2}, {999 * time.Millisecond, 2}, {time.Second, 1}, {5 * time.Second, 1}, {6 * time.Second, 0}} {
		at := now.Add(tc.after)
		if got := l.overLimit(at); got != tc.want {
			t.Errorf("after %v: %d over the limit, want %d", tc.after, got, tc.want)
		}
		n := 0
		for _, k := range []netip.Prefix{a, b, c} {
			if _, over := l.wait(k, at); over {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("after %v: wait says %d over the limit, overLimit %d", tc.after, n, tc.want)
		}
	}
}

// TestStatusHealthErrorNamesNoFile: when the cache's database fails the
// test write (an I/O error, say), the status page, with a client token or
// without, and /readyz say that it failed, not the database's error,
// which names the data directory's files (the log has it); why the disk's
// room stops writes is said as it is (TestStatusHealthJSON).
func TestStatusHealthErrorNamesNoFile(t *testing.T) {
	t.Parallel()
	a, err := NewAuth(AuthConfig{TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))}, SigningKey: bytes.Repeat([]byte{7}, 32), URLTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const file = "/srv/secret-data-dir/000012.vlog"
	health := &HealthSource{Store: fakeHealthStore{pingErr: errors.New("cache: not writable: open " + file + ": input/output error"), free: -1, reserve: -1}}
	h := newHarness(t, harnessOptions{cfg: Config{Auth: a, Health: health}})
	for _, header := range [][]string{nil, {"Authorization", "Bearer " + testToken}} {
		var st Status
		raw := h.get("/?format=json", header...)
		raw.json(t, &st)
		page := h.get("/", append([]string{"Accept", "text/html"}, header...)...)
		if st.Health.Cache != HealthCacheNotWritable || st.Health.CacheError != healthWriteFailed {
			t.Errorf("health %s, want the cache not writable, its database's failure said", healthString(st.Health))
		}
		for what, body := range map[string][]byte{"JSON": raw.body, "page": page.body} {
			if bytes.Contains(body, []byte(file)) {
				t.Errorf("the status %s (token %v) names the database's file %q", what, header != nil, file)
			}
		}
	}
	rec := httptest.NewRecorder()
	Readyz(health)(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || strings.Contains(rec.Body.String(), file) {
		t.Errorf("/readyz: %d %s; want 503 naming no file", rec.Code, rec.Body)
	}
}

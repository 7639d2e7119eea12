package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestValidHost(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"mirror.example.com", true},
		{"mirror.example.com:8443", true},
		{"Mirror.Example.COM.", true},
		{"localhost", true},
		{"tfmirror_svc:8080", true},
		{"127.0.0.1", true},
		{"127.0.0.1:443", true},
		{"[::1]", true},
		{"[2001:db8::7]:8443", true},
		{long, true},
		{long + ".e", false},
		{strings.Repeat("a", 64) + ".example", false},
		{"", false},
		{"user@mirror.example", false},
		{"mirror.example/evil", false},
		{"mirror.example?x", false},
		{"mirror.example#x", false},
		{"mirror.example\r\nX-Evil: 1", false},
		{"mirror.example\x00", false},
		{"evil.example'", false},
		{"evil.example\"", false},
		{"a(b)", false},
		{"a,b", false},
		{"a;b=c", false},
		{"%65vil.example", false},
		{"a..b", false},
		{".", false},
		{"mirror.example:", false},
		{"mirror.example:0", false},
		{"mirror.example:65536", false},
		{"mirror.example:99999", false},
		{"mirror.example:1:2", false},
		{"mirror.example:+80", false},
		{"::1", false},
		{"[::1", false},
		{"[127.0.0.1]", false},
		{"[fe80::1%25eth0]", false},
		{"[::1]x", false},
		{"[::1]:", false},
		{"mirror.example:80" + strings.Repeat("0", 300), false},
	} {
		if got := ValidHost(tc.host); got != tc.ok {
			t.Errorf("ValidHost(%q) = %v, want %v", tc.host, got, tc.ok)
		}
	}
}

// rawGet sends a GET of path with Host header host over a connection of
// its own, as written (net/http's client would refuse or rewrite a bad
// Host), and returns the answer.
func rawGet(t *testing.T, addr, path, host string, header ...string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n"
	for i := 0; i+1 < len(header); i += 2 {
		req += header[i] + ": " + header[i+1] + "\r\n"
	}
	if _, err := io.WriteString(c, req+"Connection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// hostileHosts are Host headers that are not a host[:port]: those net/http
// lets through, which only the mirror can refuse, and those it refuses
// itself.
var hostileHosts = []string{
	"evil.example'x",
	"a(b)",
	"evil.example,mirror.example",
	"evil.example;x=y",
	"%65vil.example",
	"evil.example:99999",
	"evil.example:80:80",
	"evil..example",
	"[fe80::1%25eth0]",
	strings.Repeat("evil.", 60) + "example",
	"user@evil.example",
	"evil.example/path",
	"evil.example\x01",
}

// TestMalformedHostRefused: with no public URL in force, a request whose
// Host is not a host[:port] is answered 400 without the Host in the
// answer, on every route (the status page, which names the mirror by it,
// and the protocol routes alike); a valid one names the mirror; with a
// public URL in force the Host is not read, and whatever it says is not
// reflected.
func TestMalformedHostRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	addr := h.http.Listener.Addr().String()
	for _, host := range hostileHosts {
		for _, path := range []string{"/", "/?format=json", providerPath("index.json"), registryPath("versions")} {
			resp, body := rawGet(t, addr, path, host)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("Host %q, %s: %d, want 400:\n%s", host, path, resp.StatusCode, body)
			}
			if strings.Contains(body, "evil") {
				t.Errorf("Host %q, %s: the answer names it:\n%s", host, path, body)
			}
		}
	}
	resp, body := rawGet(t, addr, "/?format=json", "mirror.example:8443")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"mirror_url":"https://mirror.example:8443/"`) {
		t.Errorf("valid Host: %d\n%s", resp.StatusCode, body)
	}

	h.server.SetPublicURL("https://mirror.example/")
	for _, host := range hostileHosts[:10] { // those net/http lets through
		resp, body := rawGet(t, addr, "/", host)
		if resp.StatusCode != http.StatusOK || strings.Contains(body, "evil") || !strings.Contains(body, "https://mirror.example/") {
			t.Errorf("public URL in force, Host %q: %d, or the page names the Host:\n%s", host, resp.StatusCode, body)
		}
	}
}

// TestHostNeverInProtocolAnswers: the network mirror's and the registry
// protocol's answers name the mirror by relative URLs, so that neither the
// answers the server keeps (hotDocs, renderMemo) nor a cache in front can
// hand one Host's answer to another: the same bytes for every Host, none
// of them the Host.
func TestHostNeverInProtocolAnswers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	addr := h.http.Listener.Addr().String()
	for _, path := range []string{providerPath("index.json"), providerPath("1.0.0.json"), registryPath("versions"), registryPath("1.0.0/download/linux/amd64")} {
		var first string
		for _, host := range []string{"attacker-one.example", "attacker-two.example:8443", "mirror.example"} {
			resp, body := rawGet(t, addr, path, host)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s, Host %s: %d %s", path, host, resp.StatusCode, body)
			}
			if strings.Contains(body, "attacker") || strings.Contains(body, "mirror.example") {
				t.Errorf("%s, Host %s: the answer names a host:\n%s", path, host, body)
			}
			if first == "" {
				first = body
			} else if body != first {
				t.Errorf("%s: the answer differs by Host:\n%s\n%s", path, first, body)
			}
		}
	}
}

// TestStatusPageVariesByHost: the status page made from the request's
// Host says so in Vary, so that a cache in front keeps it per Host; with
// a public URL in force it is the same for every Host.
func TestStatusPageVariesByHost(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	for _, path := range []string{"/", "/?format=json"} {
		r := h.get(path)
		if v := strings.Join(r.header.Values("Vary"), ", "); !strings.Contains(v, "Host") || !strings.Contains(v, "X-Forwarded-Proto") {
			t.Errorf("%s: Vary %q, want Host and X-Forwarded-Proto", path, v)
		}
	}
	h.server.SetPublicURL("https://mirror.example/")
	if v := h.get("/").header.Values("Vary"); strings.Contains(strings.Join(v, ","), "Host") {
		t.Errorf("public URL in force: Vary %q", v)
	}
}

// TestForwardedProtoOnlyFromTrustedProxies: plain HTTP behind a proxy
// that ends TLS, the scheme the mirror names itself by is https only when
// a proxy the operator trusts says so (X-Forwarded-Proto); the same
// header from any other peer changes nothing.
func TestForwardedProtoOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: Config{PlainHTTP: true}})
	mirrorURL := func(srv *httptest.Server, header ...string) string {
		t.Helper()
		resp, body := rawGet(t, srv.Listener.Addr().String(), "/?format=json", "mirror.example", header...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		_, after, _ := strings.Cut(body, `"mirror_url":"`)
		u, _, _ := strings.Cut(after, `"`)
		return u
	}
	if u := mirrorURL(h.http, "X-Forwarded-Proto", "https"); u != "http://mirror.example/" {
		t.Errorf("X-Forwarded-Proto from a peer not trusted: %q, want http://mirror.example/", u)
	}
	untrusted := httptest.NewServer(TrustProxies(h.server, []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}))
	t.Cleanup(untrusted.Close)
	if u := mirrorURL(untrusted, "X-Forwarded-Proto", "https"); u != "http://mirror.example/" {
		t.Errorf("X-Forwarded-Proto from a peer outside the trusted ranges: %q, want http://mirror.example/", u)
	}
	trusted := httptest.NewServer(TrustProxies(h.server, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}))
	t.Cleanup(trusted.Close)
	if u := mirrorURL(trusted, "X-Forwarded-Proto", "https", "X-Forwarded-For", "198.51.100.7"); u != "https://mirror.example/" {
		t.Errorf("X-Forwarded-Proto from a trusted proxy: %q, want https://mirror.example/", u)
	}
	if u := mirrorURL(trusted); u != "http://mirror.example/" {
		t.Errorf("a trusted proxy without X-Forwarded-Proto: %q, want http://mirror.example/", u)
	}
}

// TestStatusPageSaysURLFromRequest: without a public URL the status page
// says that the URL in its snippets is the one it was asked on, and how
// to set one; with one it says nothing of the kind.
func TestStatusPageSaysURLFromRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	var st Status
	h.get("/?format=json").json(t, &st)
	if !st.MirrorURLFromRequest || !strings.Contains(string(h.get("/").body), `id="url-from-request"`) {
		t.Errorf("no public URL: mirror_url_from_request %v, or the page lacks the note", st.MirrorURLFromRequest)
	}
	h.server.SetPublicURL("https://mirror.example/")
	st = Status{}
	h.get("/?format=json").json(t, &st)
	if st.MirrorURLFromRequest || st.MirrorURL != "https://mirror.example/" || strings.Contains(string(h.get("/").body), `id="url-from-request"`) {
		t.Errorf("public URL in force: %+v, or the page has the note", st.MirrorURLFromRequest)
	}
}

// FuzzValidHost: a Host ValidHost lets into the mirror's URLs is, in an
// https URL, that URL's host and nothing else: no user info, path,
// query or fragment, no byte outside printable ASCII, at most
// MaxHostLen bytes.
func FuzzValidHost(f *testing.F) {
	for _, s := range append([]string{"mirror.example:8443", "[::1]:443", "127.0.0.1", "a@b", "a/b", "a:1:2", "[::1]x", "x%41"}, hostileHosts...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		if !ValidHost(h) {
			return
		}
		if len(h) > MaxHostLen {
			t.Fatalf("%q: %d bytes", h, len(h))
		}
		for i := 0; i < len(h); i++ {
			if h[i] <= ' ' || h[i] >= 0x7f {
				t.Fatalf("%q: byte %#x", h, h[i])
			}
		}
		u, err := url.Parse("https://" + h + "/x")
		if err != nil || u.Host != h || u.User != nil || u.Path != "/x" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			t.Fatalf("%q: in a URL %#v, %v", h, u, err)
		}
	})
}

// TestRequestURLNeverReflectsABadHost: RequestURL itself never puts a
// Host ValidHost refuses in a URL (Server refuses such a request while no
// public URL is in force, but a reload may remove the public URL between
// its check and a door's call), nor an empty one.
func TestRequestURLNeverReflectsABadHost(t *testing.T) {
	t.Parallel()
	for _, host := range append([]string{""}, hostileHosts...) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = host
		if got := RequestURL(r, false); got != "https://localhost/" {
			t.Errorf("Host %q: %q, want https://localhost/", host, got)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Host = "mirror.example:8443"
	if got := RequestURL(r, true); got != "http://mirror.example:8443/" {
		t.Errorf("valid Host, plain HTTP: %q", got)
	}
}

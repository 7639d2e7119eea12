package proxy

import (
	"bytes"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const testToken = "s3cret-token-for-tests"

func TestParseTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{name: "comments and blanks", in: "# team tokens\n\n  alpha-0123456789ab  \n#beta\nbravo-0123456789ab\n", want: []string{"alpha-0123456789ab", "bravo-0123456789ab"}},
		{name: "crlf", in: "alpha-0123456789ab\r\nbravo-0123456789ab\r\n", want: []string{"alpha-0123456789ab", "bravo-0123456789ab"}},
		// Saved by an editor that begins UTF-8 with a byte order mark:
		// the mark is not part of the first token.
		{name: "byte order mark", in: "\ufeffalpha-0123456789ab\r\nbravo-0123456789ab\r\n", want: []string{"alpha-0123456789ab", "bravo-0123456789ab"}},
		{name: "byte order mark before a comment", in: "\ufeff# team tokens\nalpha-0123456789ab\n", want: []string{"alpha-0123456789ab"}},
		{name: "empty", in: "", wantErr: "no tokens"},
		{name: "only comments", in: "# nothing\n\n", wantErr: "no tokens"},
		{name: "space inside", in: "alpha-0123456789ab bravo\n", wantErr: "line 1"},
		{name: "sixteen characters", in: "0123456789abcdef\n", want: []string{"0123456789abcdef"}},
		{name: "sixteen characters, not bytes", in: "ééééééééééééééé1\n", want: []string{"ééééééééééééééé1"}},
		{name: "one character", in: "# ok\nalpha-0123456789ab\nZ\n", wantErr: "line 3: a token of 1 characters is too short: at least 16"},
		{name: "fifteen characters", in: "0123456789abcde\n", wantErr: "line 1: a token of 15 characters is too short"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTokens(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
				}
				if strings.Contains(tc.name, "characters") && !strings.Contains(err.Error(), "openssl rand -hex 32") {
					t.Errorf("error %v does not say how to make a token", err)
				}
				for _, line := range strings.Split(tc.in, "\n") {
					if line != "" && !strings.HasPrefix(line, "#") && strings.Contains(err.Error(), line) {
						t.Errorf("error %v quotes the token %q", err, line)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d hashes, want %d", len(got), len(tc.want))
			}
			for i, tok := range tc.want {
				if got[i] != sha256.Sum256([]byte(tok)) {
					t.Errorf("hash %d is not sha256(%q)", i, tok)
				}
			}
		})
	}
}

// TestParseTokensRefusesWhatNoClientCanSend: a tokens file saved as
// UTF-16 (PowerShell's > and Out-File, Notepad's "Unicode"), which holds
// a NUL byte beside each character, and a token with a control character
// or a byte that is not UTF-8, are refused naming the line, never taken
// as tokens no client can send in its Authorization header (every client
// refused, the reload said to have put them in force).
func TestParseTokensRefusesWhatNoClientCanSend(t *testing.T) {
	t.Parallel()
	utf16 := func(s string) string {
		var b []byte
		for _, r := range s {
			b = append(b, byte(r), byte(r>>8))
		}
		return string(b)
	}
	tests := []struct {
		name string
		in   string
		line string
	}{
		{name: "utf-16 with its byte order mark, no newline at the end", in: utf16("\ufeffalpha-0123456789ab\r\nbravo-0123456789ab"), line: "line 1:"},
		{name: "utf-16 without a byte order mark", in: utf16("alpha-0123456789ab"), line: "line 1:"},
		{name: "nul", in: "alpha-0123456789ab\nbravo-01234\x0056789ab\n", line: "line 2:"},
		{name: "escape", in: "alpha-0123456789ab\x1b[0m\n", line: "line 1:"},
		{name: "delete", in: "alpha-0123456789ab\x7f\n", line: "line 1:"},
		{name: "c1 control", in: "alpha-01234\u009b56789ab\n", line: "line 1:"},
		{name: "not utf-8", in: "alpha-0123456789ab\xff\n", line: "line 1:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTokens(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("%d tokens taken, want the file refused", len(got))
			}
			if !strings.Contains(err.Error(), tc.line) || !strings.Contains(err.Error(), "save the file as UTF-8") {
				t.Errorf("error %q, want it to name %q and say to save the file as UTF-8", err, tc.line)
			}
		})
	}
	// A token of printable characters beyond ASCII is taken.
	if _, err := ParseTokens(strings.NewReader("jeton-privé-0123456789ab\n")); err != nil {
		t.Errorf("a token of printable UTF-8: %v", err)
	}
}

// TestParseTokensNamesALineTooLong: a line longer than any token (a
// file of another kind named as the tokens file) is refused naming its
// line and why, where the refusal said only "bufio.Scanner: token too
// long".
func TestParseTokensNamesALineTooLong(t *testing.T) {
	t.Parallel()
	in := "# tokens\nalpha-0123456789ab\n" + strings.Repeat("x", 70<<10) + "\nbravo-0123456789ab\n"
	_, err := ParseTokens(strings.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "line 3: a line longer than 64 KiB") {
		t.Fatalf("error %v, want line 3 named as longer than 64 KiB", err)
	}
	if strings.Contains(err.Error(), "xxxxxxxx") {
		t.Errorf("error %v quotes the line", err)
	}
}

func TestNewAuthValidates(t *testing.T) {
	t.Parallel()
	hashes := [][32]byte{sha256.Sum256([]byte("x"))}
	if _, err := NewAuth(AuthConfig{SigningKey: make([]byte, 32)}); err == nil {
		t.Error("no tokens accepted")
	}
	if _, err := NewAuth(AuthConfig{TokenHashes: hashes, SigningKey: make([]byte, 16)}); err == nil {
		t.Error("16-byte signing key accepted")
	}
}

// testClock is a settable clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newAuthHarness(t *testing.T, clock *testClock, key []byte) *harness {
	t.Helper()
	a, err := NewAuth(AuthConfig{
		TokenHashes: [][32]byte{sha256.Sum256([]byte("other-token-0123456789")), sha256.Sum256([]byte(testToken))},
		SigningKey:  key,
		URLTTL:      time.Hour,
		Now:         clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{cfg: Config{Auth: a}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	return h
}

func TestClientAuthTokens(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	h := newAuthHarness(t, clock, bytes.Repeat([]byte{7}, 32))

	tests := []struct {
		name       string
		path       string
		auth       string
		wantStatus int
	}{
		{name: "index without token", path: providerPath("index.json"), wantStatus: 401},
		{name: "index with wrong token", path: providerPath("index.json"), auth: "Bearer nope", wantStatus: 401},
		{name: "index with basic auth", path: providerPath("index.json"), auth: "Basic " + testToken, wantStatus: 401},
		{name: "index with empty bearer", path: providerPath("index.json"), auth: "Bearer ", wantStatus: 401},
		{name: "version without token", path: providerPath("1.0.0.json"), wantStatus: 401},
		{name: "disallowed host without token", path: "/evil.example.com/a/b/index.json", wantStatus: 401},
		{name: "index with token", path: providerPath("index.json"), auth: "Bearer " + testToken, wantStatus: 200},
		{name: "scheme is case-insensitive", path: providerPath("index.json"), auth: "bearer " + testToken, wantStatus: 200},
		{name: "version with token", path: providerPath("1.0.0.json"), auth: "Bearer " + testToken, wantStatus: 200},
		{name: "status page stays open", path: "/?format=json", wantStatus: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.auth != "" {
				hdr = []string{"Authorization", tc.auth}
			}
			r := h.get(tc.path, hdr...)
			if r.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.status, tc.wantStatus, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			switch {
			case tc.wantStatus == 401:
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("WWW-Authenticate %q, want Bearer", got)
				}
				var body errorBody
				r.json(t, &body)
				if len(body.Errors) != 1 || !strings.Contains(body.Errors[0], "unauthorized") {
					t.Errorf("errors %q", body.Errors)
				}
			case tc.path != "/?format=json":
				if cc := r.header.Get("Cache-Control"); cc != "private, no-store" {
					t.Errorf("Cache-Control %q, want private, no-store", cc)
				}
			}
		})
	}
}

func TestSignedArchiveURLs(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	h := newAuthHarness(t, clock, bytes.Repeat([]byte{7}, 32))

	var doc versionDocument
	h.get(providerPath("1.0.0.json"), "Authorization", "Bearer "+testToken).json(t, &doc)
	signed := doc.Archives["linux_amd64"].URL
	u, err := url.Parse(signed)
	if err != nil {
		t.Fatal(err)
	}
	name := "terraform-provider-" + typ + "_1.0.0_linux_amd64.zip"
	if u.Path != name || u.Query().Get("sig") == "" || u.Query().Get("exp") == "" {
		t.Fatalf("archive URL %q: want %s?exp=...&sig=...", signed, name)
	}
	other, _ := url.Parse(doc.Archives["darwin_arm64"].URL)

	tamper := func(s string) string {
		b := []byte(s)
		if b[0] == 'A' {
			b[0] = 'B'
		} else {
			b[0] = 'A'
		}
		return string(b)
	}
	q := u.Query()
	tests := []struct {
		name       string
		query      string
		file       string
		wantStatus int
	}{
		{name: "no signature", query: "", wantStatus: 403},
		{name: "tampered signature", query: url.Values{"exp": {q.Get("exp")}, "sig": {tamper(q.Get("sig"))}}.Encode(), wantStatus: 403},
		{name: "extended expiry", query: url.Values{"exp": {q.Get("exp") + "0"}, "sig": {q.Get("sig")}}.Encode(), wantStatus: 403},
		{name: "signature of another platform", query: other.RawQuery, wantStatus: 403},
		{name: "bearer token is not enough", query: "", wantStatus: 403},
		{name: "valid", query: u.RawQuery, wantStatus: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := providerPath(name)
			if tc.query != "" {
				path += "?" + tc.query
			}
			var hdr []string
			if strings.Contains(tc.name, "bearer") {
				hdr = []string{"Authorization", "Bearer " + testToken}
			}
			r := h.get(path, hdr...)
			if r.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %.200s", r.status, tc.wantStatus, r.body)
			}
			if tc.wantStatus == 200 {
				if cc := r.header.Get("Cache-Control"); cc != "private, no-store" {
					t.Errorf("archive Cache-Control %q, want private, no-store", cc)
				}
			} else {
				var body errorBody
				r.json(t, &body)
				if len(body.Errors) != 1 || !strings.Contains(body.Errors[0], "signature") {
					t.Errorf("errors %q", body.Errors)
				}
			}
		})
	}
	h.waitIdle()

	// After the TTL the same URL is refused; a fresh VERSION.json signs anew.
	clock.Add(time.Hour + time.Second)
	if r := h.get(providerPath(signed)); r.status != http.StatusForbidden {
		t.Errorf("expired URL: status %d, want 403", r.status)
	}
	h.get(providerPath("1.0.0.json"), "Authorization", "Bearer "+testToken).json(t, &doc)
	if r := h.get(providerPath(doc.Archives["linux_amd64"].URL)); r.status != http.StatusOK {
		t.Errorf("freshly signed URL: status %d, want 200", r.status)
	}

	// A mirror with another key (a replica not sharing it) refuses the URL.
	h2 := newAuthHarness(t, clock, bytes.Repeat([]byte{8}, 32))
	if r := h2.get(providerPath(doc.Archives["linux_amd64"].URL)); r.status != http.StatusForbidden {
		t.Errorf("URL signed with another key: status %d, want 403", r.status)
	}
}

func TestAccessLogHidesCredentials(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	h := newAuthHarness(t, clock, bytes.Repeat([]byte{7}, 32))
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil))
	h.http.Config.Handler = Instrument(h.server, logger, nil)

	var doc versionDocument
	h.get(providerPath("1.0.0.json"), "Authorization", "Bearer "+testToken).json(t, &doc)
	u, _ := url.Parse(doc.Archives["linux_amd64"].URL)
	h.get(providerPath(doc.Archives["linux_amd64"].URL))
	h.get(providerPath("index.json"), "Authorization", "Bearer wrong-"+testToken)
	h.waitIdle()

	mu.Lock()
	logged := buf.String()
	mu.Unlock()
	if !strings.Contains(logged, "1.0.0.json") || !strings.Contains(logged, "linux_amd64.zip") {
		t.Fatalf("access log lacks the requests:\n%s", logged)
	}
	for _, secret := range []string{testToken, u.Query().Get("sig"), "sig="} {
		if strings.Contains(logged, secret) {
			t.Errorf("access log contains %q:\n%s", secret, logged)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestStatusPageShowsCredentialsBlock(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	h := newAuthHarness(t, clock, bytes.Repeat([]byte{7}, 32))
	h.server.SetPublicURL("https://Mirror.Example.com:443/")
	var st Status
	h.get("/?format=json").json(t, &st)
	if st.CredentialsHost != "mirror.example.com" {
		t.Errorf("credentials host %q, want mirror.example.com", st.CredentialsHost)
	}
	page := h.get("/", "Accept", "text/html")
	if !bytes.Contains(page.body, []byte(`credentials &#34;mirror.example.com&#34; {`)) && !bytes.Contains(page.body, []byte(`credentials "mirror.example.com" {`)) {
		t.Errorf("status page lacks the credentials block:\n%s", page.body)
	}
	open := newHarness(t, harnessOptions{})
	var openSt Status
	open.get("/?format=json").json(t, &openSt)
	if openSt.CredentialsHost != "" {
		t.Errorf("without authentication: credentials host %q", openSt.CredentialsHost)
	}
}

func TestStatusPageHidesProvidersWithoutToken(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	h := newAuthHarness(t, clock, bytes.Repeat([]byte{7}, 32))
	// Cache a provider's metadata through the guarded protocol.
	if r := h.get(providerPath("1.0.0.json"), "Authorization", "Bearer "+testToken); r.status != 200 {
		t.Fatalf("VERSION.json: status %d: %s", r.status, r.body)
	}

	var anon Status
	h.get("/?format=json").json(t, &anon)
	if !anon.ProvidersHidden || len(anon.Providers) != 0 {
		t.Errorf("without a token: providers_hidden=%v, %d providers listed; want hidden and none", anon.ProvidersHidden, len(anon.Providers))
	}
	page := h.get("/", "Accept", "text/html")
	if bytes.Contains(page.body, []byte(`id="providers"`)) || !bytes.Contains(page.body, []byte("requires a token")) {
		t.Errorf("status page without a token shows the provider table or lacks the note:\n%s", page.body)
	}
	var wrong Status
	h.get("/?format=json", "Authorization", "Bearer nope").json(t, &wrong)
	if !wrong.ProvidersHidden {
		t.Error("a wrong token sees the provider list")
	}

	var authed Status
	h.get("/?format=json", "Authorization", "Bearer "+testToken).json(t, &authed)
	if authed.ProvidersHidden || len(authed.Providers) != 1 {
		t.Fatalf("with a token: providers_hidden=%v, providers %+v; want the one cached provider", authed.ProvidersHidden, authed.Providers)
	}
}

// TestStatusPagePrivateWithClientAuth: with client authentication on, the
// status page answers a token holder what a viewer without one is not
// shown (the provider list, the configuration, the policy), so every view
// of it, HTML or JSON, with a token or without, is private and not to be
// stored, and says it varies by Authorization: a cache in front that
// keeps answers whatever the request's Authorization (nginx's proxy_cache
// does) must never hand a token holder's view to a viewer without one.
func TestStatusPagePrivateWithClientAuth(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	h := newAuthHarness(t, clock, bytes.Repeat([]byte{7}, 32))
	if r := h.get(providerPath("1.0.0.json"), "Authorization", "Bearer "+testToken); r.status != http.StatusOK {
		t.Fatalf("VERSION.json: status %d: %s", r.status, r.body)
	}
	for _, view := range []struct {
		name, path string
		header     []string
	}{
		{"HTML with a token", "/", []string{"Authorization", "Bearer " + testToken}},
		{"JSON with a token", "/?format=json", []string{"Authorization", "Bearer " + testToken}},
		{"HTML without a token", "/", nil},
		{"JSON without a token", "/?format=json", nil},
	} {
		r := h.get(view.path, view.header...)
		if r.status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", view.name, r.status, r.body)
		}
		cc := r.header.Get("Cache-Control")
		if !strings.Contains(cc, "private") || !strings.Contains(cc, "no-store") {
			t.Errorf("%s: Cache-Control %q, want private, no-store", view.name, cc)
		}
		if !slices.Contains(r.header.Values("Vary"), "Authorization") {
			t.Errorf("%s: Vary %q, want Authorization among them", view.name, r.header.Values("Vary"))
		}
	}
	// Without client authentication the page is the same for everyone.
	open := newHarness(t, harnessOptions{})
	if got := open.get("/").header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("without client authentication: status page Cache-Control %q, want no-cache", got)
	}
}

// TestBadSignatureSaysWhatToAskAgain: a signed URL refused (no
// signature, a wrong one) is answered 403 saying what to ask for again
// to get a fresh one, for the protocol the URL came from: VERSION.json for
// a network mirror archive, the download answer for a provider registry's
// SHA256SUMS or signature and for a module package, where the latter two
// were told to fetch a VERSION.json their protocol has none of.
func TestBadSignatureSaysWhatToAskAgain(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	h := newAuthHarness(t, clock, bytes.Repeat([]byte{7}, 32))
	registry := "/registry/" + originHost + "/v1/providers/" + ns + "/" + typ + "/1.0.0/download/linux/amd64/"
	for _, tc := range []struct {
		name, path, want, not string
	}{
		{"network mirror archive", archivePath("1.0.0", "linux_amd64"), "VERSION.json", "download answer"},
		{"registry SHA256SUMS", registry + sumsFile, "download answer", "VERSION.json"},
		{"registry signature", registry + signatureFile + "?exp=1&sig=AAAA", "download answer", "VERSION.json"},
		{"module package", modBase + "acme/vpc/aws/1.0.0/" + moduleZipFile, "download answer", "VERSION.json"},
	} {
		r := h.get(tc.path)
		if r.status != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403: %s", tc.name, r.status, r.body)
			continue
		}
		if !strings.Contains(string(r.body), tc.want) || strings.Contains(string(r.body), tc.not) {
			t.Errorf("%s: %s; want it to name %s, not %s", tc.name, r.body, tc.want, tc.not)
		}
	}
}

package ocidoor

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/tfmirror/tfmirror/v2/proxy"
)

const clientToken = "s3cret-client-token-for-oci"

func testAuth(t *testing.T, now func() time.Time) *proxy.Auth {
	t.Helper()
	hashes, err := proxy.ParseTokens(strings.NewReader(clientToken + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := proxy.NewAuth(proxy.AuthConfig{TokenHashes: hashes, SigningKey: bytes.Repeat([]byte("k"), 32), URLTTL: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// With client authentication, everything under /v2/ needs a token: an
// anonymous request gets 401 UNAUTHORIZED with a Bearer challenge whose
// realm is the mirror's https token endpoint.
func TestAuthChallenge(t *testing.T) {
	r := newRig(t, rigOptions{auth: testAuth(t, nil)})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	for _, path := range []string{"/v2/", "/v2/providers/" + originHost + "/acme/net/tags/list", "/v2/providers/" + originHost + "/acme/net/manifests/1.0.0"} {
		resp := r.do("GET", path)
		status, code := ociError(t, resp)
		want := `Bearer realm="https://` + r.host() + `/v2/token",service="tfmirror"`
		if status != 401 || code != "UNAUTHORIZED" || resp.Header.Get("WWW-Authenticate") != want {
			t.Errorf("GET %s: %d %s, challenge %q, want %q", path, status, code, resp.Header.Get("WWW-Authenticate"), want)
		}
	}
	for _, hdr := range [][]string{
		{"Authorization", "Bearer wrong"},
		{"Authorization", "Basic " + basic("user", "wrong")},
		{"Authorization", "Bearer tfm1.AAAA"},
	} {
		if status, _ := ociError(t, r.do("GET", "/v2/", hdr...)); status != 401 {
			t.Errorf("%v: %d, want 401", hdr, status)
		}
	}
	if r.origin.TotalHits() != 0 {
		t.Errorf("%d origin requests from unauthorized requests", r.origin.TotalHits())
	}
	// The token endpoint refuses a wrong password.
	if status, code := ociError(t, r.do("GET", "/v2/token", "Authorization", "Basic "+basic("u", "wrong"))); status != 401 || code != "UNAUTHORIZED" {
		t.Errorf("token endpoint with a wrong password: %d %s", status, code)
	}
}

// The challenge's realm names the mirror as the server does
// (proxy.Server.MirrorURL): by the public URL in force, a reload's too,
// and only without one by the request's Host; always https.
func TestAuthChallengeRealmFollowsPublicURL(t *testing.T) {
	r := newRig(t, rigOptions{auth: testAuth(t, nil)})
	for _, tc := range []struct{ publicURL, want string }{
		{"https://mirror.example:8443/", "https://mirror.example:8443/v2/token"},
		{"http://other.example/tfmirror/", "https://other.example/v2/token"},
		{"", "https://" + r.host() + "/v2/token"},
	} {
		r.server.SetPublicURL(tc.publicURL)
		resp := r.do("GET", "/v2/")
		resp.Body.Close()
		want := `Bearer realm="` + tc.want + `",service="tfmirror"`
		if got := resp.Header.Get("WWW-Authenticate"); got != want {
			t.Errorf("public URL %q: challenge %q, want %q", tc.publicURL, got, want)
		}
	}
}

func basic(user, pass string) string {
	req, _ := http.NewRequest("GET", "/", nil)
	req.SetBasicAuth(user, pass)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// oras-go, as OpenTofu with oci_credentials, answers the challenge: it
// asks the token endpoint with the client token as the Basic password
// and pulls with the bearer token it gets.
func TestAuthBearerFlow(t *testing.T) {
	r := newRig(t, rigOptions{auth: testAuth(t, nil)})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	pullProvider(t, r, "acme", "net", "1.0.0", "linux_amd64", auth.Credential{Username: "tofu", Password: clientToken})

	// The endpoint answers a request without scope, with both fields.
	resp := r.do("GET", "/v2/token?service=tfmirror", "Authorization", "Basic "+basic("tofu", clientToken))
	var tok tokenAnswer
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if resp.StatusCode != 200 || tok.Token == "" || tok.Token != tok.AccessToken || tok.ExpiresIn != 3600 ||
		strings.Contains(tok.Token, clientToken) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token answer %s %+v", resp.Status, tok)
	}
	ok := r.do("GET", "/v2/", "Authorization", "Bearer "+tok.Token)
	ok.Body.Close()
	if ok.StatusCode != 200 || !strings.Contains(ok.Header.Get("Cache-Control"), "private") {
		t.Errorf("with the issued token: %s, Cache-Control %q", ok.Status, ok.Header.Get("Cache-Control"))
	}
}

// Basic credentials with the client token as password pass on every
// request, as does the client token as a Bearer token.
func TestAuthBasicAndClientBearer(t *testing.T) {
	r := newRig(t, rigOptions{auth: testAuth(t, nil)})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	for _, hdr := range []string{"Basic " + basic("anyone", clientToken), "Bearer " + clientToken} {
		resp := r.do("GET", "/v2/providers/"+originHost+"/acme/net/tags/list", "Authorization", hdr)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "1.0.0") {
			t.Errorf("%s: %s %s", strings.Fields(hdr)[0], resp.Status, b)
		}
	}
}

// An issued token expires, and stops working when its client token is
// taken out of the tokens file.
func TestIssuedTokenLifetime(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := testAuth(t, func() time.Time { return now })
	req := httptest.NewRequest(http.MethodGet, "/v2/", nil)
	issued, ttl, ok := a.IssueToken(req, clientToken)
	if !ok || ttl != time.Hour || !a.CheckBearer(req, issued) {
		t.Fatalf("IssueToken: %q %v %v", issued, ttl, ok)
	}
	if _, _, ok := a.IssueToken(req, "not a token of this mirror"); ok {
		t.Error("issued a token for a wrong client token")
	}
	tampered := []byte(issued)
	tampered[len(tampered)-3] ^= 1
	if a.CheckBearer(req, string(tampered)) {
		t.Error("a tampered token passed")
	}
	now = now.Add(time.Hour)
	if a.CheckBearer(req, issued) {
		t.Error("an expired token passed")
	}
	now = now.Add(-30 * time.Minute)
	other, _ := proxy.ParseTokens(strings.NewReader("another-client-token\n"))
	if err := a.SetTokens(other); err != nil {
		t.Fatal(err)
	}
	if a.CheckBearer(req, issued) {
		t.Error("a token issued for a client token no longer accepted passed")
	}
}

// No token, client or issued, reaches a log line.
func TestTokensNeverLogged(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := newRig(t, rigOptions{auth: testAuth(t, nil)})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	handler := proxy.Instrument(r.http.Config.Handler, logger, nil)
	r.http.Config.Handler = handler
	digests, _ := pullProvider(t, r, "acme", "net", "1.0.0", "linux_amd64", auth.Credential{Username: "tofu", Password: clientToken})
	resp := r.do("GET", "/v2/token", "Authorization", "Basic "+basic("tofu", clientToken))
	var tok tokenAnswer
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	r.do("GET", "/v2/?token="+clientToken, "Authorization", "Bearer wrong-"+clientToken).Body.Close()
	if len(digests) == 0 || !strings.Contains(logs.String(), "/v2/token") {
		t.Fatalf("the access log saw nothing: %s", logs.String())
	}
	for _, secret := range []string{clientToken, tok.Token, basic("tofu", clientToken)} {
		if secret != "" && strings.Contains(logs.String(), secret) {
			t.Errorf("a token is in the log:\n%s", logs.String())
		}
	}
}

// The token endpoint trades client tokens for issued ones: each wrong
// client token it is given is a failed attempt of its client's address,
// and once over the limit the mirror's front door answers that address
// 429 with Retry-After, even for the right token, until it has waited.
func TestTokenEndpointFailuresLimited(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := testAuth(t, func() time.Time { return now })
	r := newRig(t, rigOptions{auth: a})
	var retryAfter string
	status := func(hdr string) int {
		t.Helper()
		resp := r.do("GET", "/v2/token?service=tfmirror", "Authorization", hdr)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		retryAfter = resp.Header.Get("Retry-After")
		return resp.StatusCode
	}
	for i := range proxy.AuthFailureBurst {
		if got := status("Basic " + basic("tofu", "wrong-client-token-guess")); got != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, got)
		}
	}
	if got := status("Basic " + basic("tofu", clientToken)); got != http.StatusTooManyRequests || retryAfter != "1" {
		t.Errorf("the right token over the limit: %d, Retry-After %q; want 429, 1", got, retryAfter)
	}
	// The layer in front of the doors answers an OCI client as the door
	// does: the spec's error envelope, TOOMANYREQUESTS.
	for _, path := range []string{"/v2/token", "/v2/providers/" + originHost + "/acme/net/tags/list"} {
		resp := r.do("GET", path, "Authorization", "Basic "+basic("tofu", clientToken))
		if got, code := ociError(t, resp); got != http.StatusTooManyRequests || code != "TOOMANYREQUESTS" || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("%s over the limit: %d %s, Retry-After %q; want 429 TOOMANYREQUESTS, 1", path, got, code, resp.Header.Get("Retry-After"))
		}
	}
	now = now.Add(time.Second)
	if got := status("Basic " + basic("tofu", clientToken)); got != http.StatusOK {
		t.Errorf("the right token after waiting: %d, want 200", got)
	}
}

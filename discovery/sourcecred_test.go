package discovery

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// A source credential goes to its own host only: as a bearer token to
// archives, as basic authentication to Git's smart HTTP, never across a
// redirect to another host, never to a host it is not for.
func TestSourceCredentialOwnHostOnly(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{} // "server path" -> Authorization
	record := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name+" "+r.URL.Path] = append(seen[name+" "+r.URL.Path], r.Header.Get("Authorization"))
			mu.Unlock()
			io.WriteString(w, "tarball")
		})
	}
	other := newTestServer(t, record("other"))
	mux := http.NewServeMux()
	mux.Handle("/archives/", record("source"))
	mux.HandleFunc("/moved.tar.gz", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen["source /moved.tar.gz"] = append(seen["source /moved.tar.gz"], r.Header.Get("Authorization"))
		mu.Unlock()
		http.Redirect(w, r, other.url("/elsewhere.tar.gz"), http.StatusFound)
	})
	src := newTestServer(t, mux)
	c := newTestClient(t, src, nil)
	host := string(src.host)
	cred := SourceCredential{Host: host, Token: "tok-123"}
	ctx := WithSourceCredential(context.Background(), cred)
	read := func(ctx context.Context, u string) {
		t.Helper()
		body, _, err := c.OpenSource(ctx, src.host, u)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(body)
		body.Close()
	}
	read(ctx, src.url("/archives/a.tar.gz"))
	read(ctx, src.url("/moved.tar.gz"))
	read(WithSourceCredential(context.Background(), SourceCredential{Host: "git.example.test", Token: "tok-123"}), src.url("/archives/b.tar.gz"))
	read(context.Background(), src.url("/archives/c.tar.gz"))
	resp, err := c.SourceHTTPClient(src.host).Do(mustRequest(t, ctx, src.url("/archives/git")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:tok-123"))
	want := map[string][]string{
		"source /archives/a.tar.gz": {"Bearer tok-123"},
		"source /moved.tar.gz":      {"Bearer tok-123"},
		"other /elsewhere.tar.gz":   {""},
		"source /archives/b.tar.gz": {""},
		"source /archives/c.tar.gz": {""},
		"source /archives/git":      {basic},
	}
	mu.Lock()
	defer mu.Unlock()
	for k, v := range want {
		if strings.Join(seen[k], ",") != strings.Join(v, ",") {
			t.Errorf("%s saw Authorization %q, want %q", k, seen[k], v)
		}
	}
	if s := cred.String() + fmtGo(cred); strings.Contains(s, "tok-123") {
		t.Errorf("String reveals the token: %s", s)
	}
}

func mustRequest(t *testing.T, ctx context.Context, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func fmtGo(c SourceCredential) string { return fmt.Sprintf("%v %+v %#v", c, c, c) }

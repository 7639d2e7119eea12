package discovery

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// TestFailedRequestLogHidesSignedQuery: a download URL's query string (a
// pre-signed URL's signature) never reaches the log, at any level, when
// the request fails: neither the URL the origin named nor the one a
// redirect sent it to.
func TestFailedRequestLogHidesSignedQuery(t *testing.T) {
	const (
		named      = "X-Amz-Signature=namedsecretsignature0123"
		redirected = "X-Amz-Signature=redirectsecretsignature4567"
	)
	// A port nothing listens on: every connection to it is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "https://" + ln.Addr().String()
	ln.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/presigned", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, closed+"/bucket/a.zip?"+redirected, http.StatusFound)
	})
	s := newTestServer(t, mux)
	c, logs := loggedClient(t, s)
	p := testProvider(s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	calls := map[string]func() error{
		"archive": func() error { _, _, err := c.OpenArchive(ctx, p, closed+"/a.zip?"+named); return err },
		"document": func() error {
			_, err := c.FetchDocument(ctx, p, closed+"/SHA256SUMS?"+named, 1024)
			return err
		},
		"archive redirected": func() error { _, _, err := c.OpenArchive(ctx, p, s.url("/presigned?"+named)); return err },
		"module source":      func() error { _, _, err := c.OpenSource(ctx, s.host, closed+"/m.tgz?"+named); return err },
	}
	for name, call := range calls {
		err := call()
		if err == nil {
			t.Fatalf("%s: no error from a refused connection", name)
		}
		for _, secret := range []string{"namedsecretsignature0123", "redirectsecretsignature4567"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: error carries the signed query: %v", name, err)
			}
		}
	}
	out := logs.String()
	if !strings.Contains(out, "origin request failed") {
		t.Fatalf("no failure was logged:\n%s", out)
	}
	for _, secret := range []string{"namedsecretsignature0123", "redirectsecretsignature4567"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log carries the signed query %q:\n%s", secret, out)
		}
	}
}

// TestUnparsableRedirectHidesSignedQuery: a redirect whose Location does
// not parse as a URL (an escape such as %zz) fails the request without
// spelling the Location out: its query (a pre-signed URL's signature)
// reaches neither the error, which the client's answer and the status
// page show, nor the log, for downloads, module archives and Git's
// requests alike.
func TestUnparsableRedirectHidesSignedQuery(t *testing.T) {
	const secret = "badredirectsecretsignature89"
	mux := http.NewServeMux()
	mux.HandleFunc("/presigned", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "https://cdn.example/bucket/a%zz.zip?X-Amz-Signature="+secret)
		w.WriteHeader(http.StatusFound)
	})
	s := newTestServer(t, mux)
	c, logs := loggedClient(t, s)
	p := testProvider(s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := map[string]func() error{
		"archive":       func() error { _, _, err := c.OpenArchive(ctx, p, s.url("/presigned")); return err },
		"document":      func() error { _, err := c.FetchDocument(ctx, p, s.url("/presigned"), 1024); return err },
		"module source": func() error { _, _, err := c.OpenSource(ctx, s.host, s.url("/presigned")); return err },
		"git": func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url("/presigned"), nil)
			if err != nil {
				return err
			}
			resp, err := c.SourceHTTPClient(s.host).Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if err == nil {
			t.Fatalf("%s: a redirect to a Location that does not parse was followed", name)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error carries the redirect's signed query: %v", name, err)
		}
		if !strings.Contains(err.Error(), "Location") {
			t.Errorf("%s: error does not say the redirect's Location is the matter: %v", name, err)
		}
	}
	if out := logs.String(); strings.Contains(out, secret) {
		t.Errorf("the log carries the redirect's signed query:\n%s", out)
	}
}

// TestUnparsablePackageURLHidesSignedQuery: a package answer's URL that
// does not parse (a pre-signed URL whose path holds an escape such as
// %zz) is refused without spelling it out: its query reaches neither the
// error nor the log.
func TestUnparsablePackageURLHidesSignedQuery(t *testing.T) {
	const (
		path   = "/v1/providers/hashicorp/random/2.0.0/download/linux/amd64"
		secret = "badpackagesecretsignature42"
	)
	bad := "https://cdn.example/bucket/a%zz.zip?X-Amz-Signature=" + secret
	for _, field := range []string{"download_url", "shasums_url", "shasums_signature_url"} {
		t.Run(field, func(t *testing.T) {
			urls := map[string]string{"download_url": "a.zip", "shasums_url": "SUMS", "shasums_signature_url": "SUMS.sig"}
			urls[field] = bad
			s := newTestServer(t, registry(map[string]http.HandlerFunc{path: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, packageJSON("linux", "amd64", urls["download_url"], urls["shasums_url"], urls["shasums_signature_url"]))
			}}))
			var logs logbuf.Buffer
			c := newTestClient(t, s, func(cfg *Config) {
				cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			_, err := c.Package(context.Background(), testProvider(s), "2.0.0", addrs.Platform{OS: "linux", Arch: "amd64"})
			wantOriginError(t, err, OpPackage, 0)
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error carries the URL's signed query: %v", err)
			}
			if !strings.Contains(err.Error(), field) {
				t.Errorf("error does not name %s: %v", field, err)
			}
			if out := logs.String(); strings.Contains(out, secret) {
				t.Errorf("the log carries the URL's signed query:\n%s", out)
			}
		})
	}
}

// TestRedirectSendsNoReferer: a redirect of a download (a pre-signed URL
// redirecting to another) does not hand the URL redirected from, query
// included, to the host redirected to as a Referer, as net/http would.
func TestRedirectSendsNoReferer(t *testing.T) {
	const secret = "referersecretsignature42"
	var referer atomic.Value
	referer.Store("unset")
	mux := http.NewServeMux()
	mux.HandleFunc("/first", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/second", http.StatusFound)
	})
	mux.HandleFunc("/second", func(w http.ResponseWriter, r *http.Request) {
		referer.Store(r.Header.Get("Referer"))
		w.Write([]byte("archive"))
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, _, err := c.OpenArchive(ctx, testProvider(s), s.url("/first?X-Amz-Signature="+secret))
	if err != nil {
		t.Fatal(err)
	}
	body.Close()
	if got := referer.Load().(string); got != "" {
		t.Errorf("the host redirected to was sent Referer %q, want none", got)
	}
}

// loggedClient is a client of s that logs everything, at debug level,
// into the buffer it returns; it tries each request once, and its
// breaker never opens.
func loggedClient(t *testing.T, s *testServer) (*Client, *logbuf.Buffer) {
	t.Helper()
	logs := new(logbuf.Buffer)
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		cfg.Retries = 1
		cfg.BreakerThreshold = -1
	})
	return c, logs
}

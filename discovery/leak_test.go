package discovery

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

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
	var logs logbuf.Buffer
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		cfg.Retries = 1
		cfg.BreakerThreshold = -1
	})
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

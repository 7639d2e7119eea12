package discovery

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// statusWatcher keeps the errors an OriginWatcher is told of (the
// status page's origin rows).
type statusWatcher struct {
	mu   sync.Mutex
	errs []error
}

func (w *statusWatcher) OriginDone(_, _ string, err error) {
	if err != nil {
		w.mu.Lock()
		w.errs = append(w.errs, err)
		w.mu.Unlock()
	}
}

// An answer's status line is the host's own text: a host that echoes the
// request (its Authorization, the credential the mirror sent it) in its
// reason phrase has it shown nowhere. An error names the status by its
// code and the standard text for it, as a refusal is said by its status
// alone (never the page, which may echo the request too), for the
// registry's API, its documents and archives, and a module source's
// archives and Git's smart HTTP. Nor are the other headers an error
// speaks of (a JSON answer's Content-Type, an archive size's
// Content-Range) quoted as the host sent them.
func TestStatusLineEchoNotShown(t *testing.T) {
	const token = "registry-token-ECHOED-1234"
	const sourceToken = "source-token-ECHOED-5678"
	echo := func(w http.ResponseWriter, r *http.Request, code int) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(rw, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", code, r.Header.Get("Authorization"))
		rw.Flush()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	})
	mux.HandleFunc("GET /v1/providers/hashicorp/random/versions", func(w http.ResponseWriter, r *http.Request) { echo(w, r, http.StatusForbidden) })
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/versions", func(w http.ResponseWriter, r *http.Request) { echo(w, r, http.StatusUnauthorized) })
	mux.HandleFunc("GET /files/SHA256SUMS", func(w http.ResponseWriter, r *http.Request) { echo(w, r, http.StatusForbidden) })
	mux.HandleFunc("GET /files/a.zip", func(w http.ResponseWriter, r *http.Request) { echo(w, r, http.StatusUnauthorized) })
	mux.HandleFunc("GET /source/a.tar.gz", func(w http.ResponseWriter, r *http.Request) { echo(w, r, http.StatusForbidden) })
	mux.HandleFunc("GET /v1/providers/hashicorp/echo/versions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", r.Header.Get("Authorization"))
		io.WriteString(w, `{"versions":[]}`)
	})
	// The credential alone, without its scheme: a media type of a single
	// token, which mime.ParseMediaType reads (lowercased).
	mux.HandleFunc("GET /v1/providers/hashicorp/bare/versions", func(w http.ResponseWriter, r *http.Request) {
		_, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		w.Header().Set("Content-Type", cred)
		io.WriteString(w, `{"versions":[]}`)
	})
	mux.HandleFunc("GET /files/b.zip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusPartialContent)
		io.WriteString(w, "P")
	})
	mux.HandleFunc("GET /source/repo.git/info/refs", func(w http.ResponseWriter, r *http.Request) { echo(w, r, http.StatusInternalServerError) })
	s := newTestServer(t, mux)
	watch := &statusWatcher{}
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.Retries = -1
		cfg.Watcher = watch
		cfg.Credentials = func(h svchost.Hostname) string {
			if h == s.host {
				return token
			}
			return ""
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := testProvider(s)
	var errs []error
	_, err := c.Versions(ctx, p)
	errs = append(errs, err)
	_, err = c.ModuleVersions(ctx, addrs.Module{Hostname: s.host, Namespace: "acme", Name: "vpc", System: "aws"})
	errs = append(errs, err)
	_, err = c.FetchDocument(ctx, p, s.url("/files/SHA256SUMS"), 1024)
	errs = append(errs, err)
	_, _, err = c.OpenArchive(ctx, p, s.url("/files/a.zip"))
	errs = append(errs, err)
	// The other headers of an answer shown in errors are the host's text
	// too.
	_, err = c.Versions(ctx, addrs.Provider{Hostname: s.host, Namespace: "hashicorp", Type: "echo"})
	echoes := []error{err}
	_, err = c.Versions(ctx, addrs.Provider{Hostname: s.host, Namespace: "hashicorp", Type: "bare"})
	echoes = append(echoes, err)
	_, err = c.ArchiveSize(ctx, p, s.url("/files/b.zip"))
	echoes = append(echoes, err)
	for i, err := range echoes {
		if err == nil {
			t.Errorf("header echo %d: no error", i)
		} else if strings.Contains(strings.ToUpper(err.Error()), "ECHOED") {
			t.Errorf("header echo %d: the error shows what the host echoed in a header: %v", i, err)
		}
	}
	sctx := WithSourceCredential(ctx, SourceCredential{Host: string(s.host), Token: sourceToken})
	_, _, err = c.OpenSource(sctx, s.host, s.url("/source/a.tar.gz"))
	errs = append(errs, err)
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, s.url("/source/repo.git/info/refs"), nil)
	if resp, err := c.SourceHTTPClient(s.host).Do(req); err != nil {
		errs = append(errs, err)
	} else {
		io.Copy(io.Discard, bufio.NewReader(resp.Body))
		resp.Body.Close()
	}
	for i, err := range errs {
		if err == nil {
			t.Errorf("request %d: no error", i)
			continue
		}
		var oe *OriginError
		if !errors.As(err, &oe) || oe.StatusCode == 0 {
			t.Errorf("request %d: %v, want an *OriginError with the status", i, err)
		}
		if msg := err.Error(); strings.Contains(msg, "ECHOED") {
			t.Errorf("request %d: the error shows what the host echoed in its status line: %s", i, msg)
		} else if !strings.Contains(msg, http.StatusText(oe.StatusCode)) {
			t.Errorf("request %d: the error %q does not name the status %d", i, msg, oe.StatusCode)
		}
	}
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + sourceToken))
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.errs) < len(errs)+len(echoes)+1 {
		t.Errorf("the watcher was told of %d failures, want %d", len(watch.errs), len(errs)+len(echoes)+1)
	}
	for _, err := range watch.errs {
		if msg := err.Error(); strings.Contains(msg, "ECHOED") || strings.Contains(msg, basic) {
			t.Errorf("the status page is told what the host echoed in its status line: %v", err)
		}
	}
}

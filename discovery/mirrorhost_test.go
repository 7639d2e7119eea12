package discovery

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
)

// A module source location on the mirror's own public host (a
// registry's download location, a submodule URL, or where a Git server
// redirects) would have the mirror ask itself, each request chaining
// another: it is refused as an unsupported module source before any
// request is sent, saying it points at this mirror. Another host, or no
// public host known, is asked as before; the host is read at each
// request, so that a reload of the public URL reaches it. A redirect to
// the mirror's host is refused at the hop, for an archive as for Git.
func TestModuleSourceOnMirrorHostRefused(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /archives/vpc.tar.gz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tarball")
	})
	mux.HandleFunc("GET /moved.git/info/refs", func(w http.ResponseWriter, r *http.Request) {
		// To the same server by another name: the mirror's, below.
		http.Redirect(w, r, "https://LOCALHOST."+strings.TrimPrefix(r.Host, "127.0.0.1")+"/vpc.git/info/refs?service=git-upload-pack", http.StatusFound)
	})
	mux.HandleFunc("GET /moved/vpc.tar.gz", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://LOCALHOST."+strings.TrimPrefix(r.Host, "127.0.0.1")+"/archives/vpc.tar.gz", http.StatusFound)
	})
	s := newTestServer(t, mux)
	var own atomic.Pointer[string]
	set := func(h string) { own.Store(&h) }
	set("127.0.0.1")
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.MirrorHost = func() string { return *own.Load() }
	})
	ctx := context.Background()
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, modsource.ErrUnsupported) || !strings.Contains(err.Error(), "points at this mirror") {
			t.Errorf("%s: %v, want an unsupported module source pointing at this mirror", what, err)
		}
	}

	_, _, err := c.OpenSource(ctx, s.host, s.url("/archives/vpc.tar.gz"))
	refused("archive", err)
	_, err = c.SourceHTTPClient(s.host).Get(s.url("/vpc.git/info/refs?service=git-upload-pack"))
	refused("Git request", err)
	addr, err := modsource.Parse("git::" + s.url("/vpc.git") + "?ref=v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	f := &modsource.Fetcher{
		HTTP: c.SourceHTTPClient(s.host),
		Open: func(ctx context.Context, u string) (io.ReadCloser, int64, error) {
			return c.OpenSource(ctx, s.host, u)
		},
		TempDir: t.TempDir(),
	}
	_, err = f.Fetch(ctx, addr, io.Discard)
	refused("Git fetch", err)
	if n := s.total(); n != 0 {
		t.Errorf("%d requests reached the source host, want none", n)
	}

	// Where a Git server redirects, hop by hop.
	set("localhost")
	addr, err = modsource.Parse("git::" + s.url("/moved.git") + "?ref=v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Fetch(ctx, addr, io.Discard)
	refused("Git fetch redirected to the mirror", err)
	// Where an archive's host redirects: refused at the hop, and not
	// asked again as a failed request would be.
	before := s.total()
	_, _, err = c.OpenSource(ctx, s.host, s.url("/moved/vpc.tar.gz"))
	refused("archive redirected to the mirror", err)
	if n := s.total() - before; n != 1 {
		t.Errorf("the archive redirected to the mirror made %d requests, want the redirect's alone", n)
	}

	// Another public host, or none: asked as before.
	for _, h := range []string{"mirror.example.test", ""} {
		set(h)
		body, _, err := c.OpenSource(ctx, s.host, s.url("/archives/vpc.tar.gz"))
		if err != nil {
			t.Fatalf("public host %q: %v", h, err)
		}
		b, _ := io.ReadAll(body)
		body.Close()
		if string(b) != "tarball" {
			t.Errorf("public host %q: read %q", h, b)
		}
	}
}

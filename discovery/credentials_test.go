package discovery

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

func TestCredentialsOnlyToOriginHost(t *testing.T) {
	// cdn is reached as "example.com:PORT" (the test certificate names
	// example.com), mapped to loopback by the test dialer.
	cdn := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("cdn"))
	}))
	cdnBase := "https://example.com:" + cdn.srv.URL[strings.LastIndex(cdn.srv.URL, ":")+1:]
	other := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("other"))
	}))

	mux := http.NewServeMux()
	mux.HandleFunc(wellKnown, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	})
	mux.HandleFunc("/v1/providers/hashicorp/random/versions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, `{"versions":[{"version":"1.0.0"}]}`)
	})
	mux.HandleFunc("/v1/providers/hashicorp/random/1.0.0/download/linux/amd64", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, packageJSON("linux", "amd64", cdnBase+"/a.zip", "/files/SHA256SUMS", cdnBase+"/SHA256SUMS.sig"))
	})
	mux.HandleFunc("/files/SHA256SUMS", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("sums")) })
	mux.HandleFunc("/redirect-same-ip-other-port", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.url("/moved"), http.StatusFound)
	})
	origin := newTestServer(t, mux)

	var (
		mu    sync.Mutex
		asked []svchost.Hostname
	)
	c := newTestClient(t, origin, func(cfg *Config) {
		cfg.DialContext = mapDialer("example.com")
		cfg.UserAgent = "tfmirror/test"
		cfg.Credentials = func(h svchost.Hostname) string {
			mu.Lock()
			asked = append(asked, h)
			mu.Unlock()
			if h == origin.host {
				return "s3cr3t"
			}
			return ""
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := testProvider(origin)

	if _, err := c.Versions(ctx, p); err != nil {
		t.Fatal(err)
	}
	pkg, err := c.Package(ctx, p, "1.0.0", addrs.Platform{OS: "linux", Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.FetchDocument(ctx, p, pkg.SHASumsURL, 1024); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FetchDocument(ctx, p, pkg.SHASumsSignatureURL, 1024); err != nil {
		t.Fatal(err)
	}
	body, _, err := c.OpenArchive(ctx, p, pkg.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	body.Close()
	if got, err := c.FetchDocument(ctx, p, origin.url("/redirect-same-ip-other-port"), 1024); err != nil || string(got) != "other" {
		t.Fatalf("redirect: %q, %v", got, err)
	}

	checks := []struct {
		name      string
		srv       *testServer
		path      string
		wantToken bool
	}{
		{"discovery", origin, wellKnown, true},
		{"versions", origin, "/v1/providers/hashicorp/random/versions", true},
		{"package", origin, "/v1/providers/hashicorp/random/1.0.0/download/linux/amd64", true},
		{"SHA256SUMS on the origin host", origin, "/files/SHA256SUMS", true},
		{"signature on another host", cdn, "/SHA256SUMS.sig", false},
		{"archive on another host", cdn, "/a.zip", false},
		{"redirect to another port", other, "/moved", false},
	}
	for _, ck := range checks {
		h := ck.srv.header(ck.path)
		if h == nil {
			t.Errorf("%s: %s was not requested", ck.name, ck.path)
			continue
		}
		if got, want := h.Get("Authorization"), map[bool]string{true: "Bearer s3cr3t"}[ck.wantToken]; got != want {
			t.Errorf("%s: Authorization = %q, want %q", ck.name, got, want)
		}
		if got := h.Get("User-Agent"); got != "tfmirror/test" {
			t.Errorf("%s: User-Agent = %q", ck.name, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range asked {
		if h != origin.host {
			t.Errorf("credentials asked for %q, only the origin host %q is expected", h, origin.host)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero config", Config{}, true},
		{"negative TTL", Config{DiscoveryTTL: -time.Second}, false},
		{"negative request timeout", Config{RequestTimeout: -1}, false},
		{"negative idle timeout", Config{IdleTimeout: -1}, false},
		{"negative document limit", Config{MaxDocumentBytes: -1}, false},
		{"negative archive limit", Config{MaxArchiveBytes: -1}, false},
		{"user agent with newline", Config{UserAgent: "tfmirror\r\nX-Evil: 1"}, false},
		{"invalid allowed origin", Config{AllowedOrigins: []string{"not a host!"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if tt.ok != (err == nil) {
				t.Fatalf("New() err = %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok {
				return
			}
			tr, dl := c.tr, c.downloads
			if tr.rt.(*policyTransport).userAgent != "tfmirror" || c.discovery.ttl != time.Hour ||
				tr.requestTimeout != 30*time.Second || dl.idle != time.Minute ||
				tr.maxDocumentBytes != 16<<20 || dl.maxArchiveBytes != 2<<30 ||
				dl.minSpeed != 1<<10 || dl.minSpeedWindow != 30*time.Second ||
				!tr.allowed["registry.terraform.io"] || !tr.allowed["registry.opentofu.org"] || len(tr.allowed) != 2 {
				t.Fatalf("defaults not applied: transport %+v, downloads %+v, discovery TTL %s", tr, dl, c.discovery.ttl)
			}
		})
	}
}

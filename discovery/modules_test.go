package discovery

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

func moduleServer(t *testing.T) *testServer {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	})
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/versions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, `{"modules":[{"source":"acme/vpc/aws","versions":[{"version":"1.0.0"},{"version":""},{"version":"v2.0.0"}]}]}`)
	})
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/1.0.0/download", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Terraform-Get", "git::https://git.example.test/vpc.git?ref=v1.0.0")
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/1.1.0/download", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, `{"location":"./archives/vpc-1.1.0.tar.gz"}`) // OpenTofu's form, relative
	})
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/1.2.0/download", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent) // no location
	})
	mux.HandleFunc("GET /archives/vpc.tar.gz", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "credentials sent to a source host", http.StatusTeapot)
			return
		}
		io.WriteString(w, "tarball")
	})
	return newTestServer(t, mux)
}

func TestModuleRegistryProtocol(t *testing.T) {
	s := moduleServer(t)
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.Credentials = func(svchost.Hostname) string { return "origin-token" }
	})
	m := addrs.Module{Hostname: s.host, Namespace: "acme", Name: "vpc", System: "aws"}
	ctx := context.Background()

	vs, err := c.ModuleVersions(ctx, m)
	if err != nil || strings.Join(vs, ",") != "1.0.0,v2.0.0" {
		t.Errorf("ModuleVersions = %v, %v", vs, err)
	}
	if got := s.header("/v1/modules/acme/vpc/aws/versions").Get("Authorization"); got != "Bearer origin-token" {
		t.Errorf("versions request carried %q, want the origin's token", got)
	}
	for version, want := range map[string]string{
		"1.0.0": "git::https://git.example.test/vpc.git?ref=v1.0.0",
		"1.1.0": s.url("/v1/modules/acme/vpc/aws/1.1.0/archives/vpc-1.1.0.tar.gz"),
	} {
		if got, err := c.ModuleLocation(ctx, m, version); err != nil || got != (ModuleDownload{Location: want}) {
			t.Errorf("ModuleLocation(%s) = %+v, %v; want %q", version, got, err, want)
		}
	}
	if _, err := c.ModuleLocation(ctx, m, "1.2.0"); err == nil || !strings.Contains(err.Error(), "no location") {
		t.Errorf("answer without a location: %v", err)
	}
	if _, err := c.ModuleLocation(ctx, m, "9.9.9"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown version: %v, want ErrNotFound", err)
	}
	other := m
	other.Hostname = "registry.example.invalid"
	if _, err := c.ModuleVersions(ctx, other); !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("module of another host: %v, want ErrHostNotAllowed", err)
	}

	// Sources are fetched anonymously, even from the origin host.
	body, _, err := c.OpenSource(ctx, s.host, s.url("/archives/vpc.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(body)
	body.Close()
	if string(b) != "tarball" {
		t.Errorf("OpenSource read %q", b)
	}
	resp, err := c.SourceHTTPClient(s.host).Get(s.url("/archives/vpc.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("SourceHTTPClient sent credentials (status %d)", resp.StatusCode)
	}
}

func TestSourceHostsGuarded(t *testing.T) {
	s := moduleServer(t)
	c := newTestClient(t, s, func(cfg *Config) { cfg.AllowPrivate = false })
	if _, _, err := c.OpenSource(context.Background(), s.host, s.url("/archives/vpc.tar.gz")); !errors.Is(err, ErrPrivateAddress) {
		t.Errorf("OpenSource to loopback: %v, want ErrPrivateAddress", err)
	}
	if _, err := c.SourceHTTPClient(s.host).Get(s.url("/archives/vpc.tar.gz")); !errors.Is(err, ErrPrivateAddress) {
		t.Errorf("SourceHTTPClient to loopback: %v, want ErrPrivateAddress", err)
	}
	if _, err := c.SourceHTTPClient(s.host).Get("http://example.test/x.tar.gz"); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("SourceHTTPClient over http: %v", err)
	}
	if _, err := c.SourceHTTPClient("registry.example.invalid").Get(s.url("/archives/vpc.tar.gz")); !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("SourceHTTPClient for a host that is not an origin: %v", err)
	}
}

// A relative location is resolved against the download URL the client
// asked, as Terraform's and OpenTofu's registry clients resolve it, not
// against the URL a redirect led to: a download answer that redirects
// (to the path with a trailing slash, as many web frameworks do) names
// the package the clients fetch from the origin directly.
func TestRelativeModuleLocationResolvedAgainstTheDownloadURL(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	})
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/1.0.0/download", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/1.0.0/download/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Terraform-Get", "./vpc.tar.gz")
		w.WriteHeader(http.StatusNoContent)
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, nil)
	m := addrs.Module{Hostname: s.host, Namespace: "acme", Name: "vpc", System: "aws"}
	want := s.url("/v1/modules/acme/vpc/aws/1.0.0/vpc.tar.gz")
	if got, err := c.ModuleLocation(context.Background(), m, "1.0.0"); err != nil || got != (ModuleDownload{Location: want}) {
		t.Errorf("ModuleLocation = %+v, %v; want %q (the clients' resolution)", got, err, want)
	}
}

// outcomeCounter records the outcomes of one operation's requests.
type outcomeCounter struct {
	noObserver
	op       string
	mu       sync.Mutex
	outcomes []string
}

func (o *outcomeCounter) OriginRequest(_, op, outcome string, _ time.Duration) {
	if op == o.op {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.outcomes = append(o.outcomes, outcome)
	}
}

// A response of a module source host that its reader closes before its
// end (as Git's smart HTTP does once it has read what it needs) is a
// success of the host, as one read to its end is; it had been counted
// as an error ("download abandoned before its end"), two for each Git
// module fetched, in tfmirror_origin_requests_total. An answer of an
// error status is still an error.
func TestSourceResponseClosedEarlyIsNoFailure(t *testing.T) {
	s := moduleServer(t)
	obs := &outcomeCounter{op: OpModuleSource}
	c := newTestClient(t, s, func(cfg *Config) { cfg.Observer = obs })
	hc := c.SourceHTTPClient(s.host)
	for i, path := range []string{"/archives/vpc.tar.gz", "/archives/vpc.tar.gz", "/archives/none.tar.gz"} {
		resp, err := hc.Get(s.url(path))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			io.ReadAll(resp.Body) // the first read to its end
		} else {
			resp.Body.Read(make([]byte, 2)) // the others left
		}
		resp.Body.Close()
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if want := []string{"success", "success", "error"}; !slices.Equal(obs.outcomes, want) {
		t.Errorf("outcomes %q, want %q", obs.outcomes, want)
	}
}

// A 200 download answer may give the package's location in both the
// X-Terraform-Get header, which Terraform reads, and the JSON body's
// "location", which OpenTofu reads on 200. The mirror serves one package
// to both, so an answer whose two name other locations (each resolved
// against the download URL asked, as the clients resolve it) is refused
// as a bad origin answer naming both; the same one twice, or either
// alone, is read as before.
func TestModuleLocationHeaderAndBodyDisagree(t *testing.T) {
	answers := map[string][2]string{ // version: header, body
		"1.0.0": {"git::https://git.example.test/vpc.git?ref=v1.0.0", "git::https://git.example.test/other.git?ref=v1.0.0"},
		"1.1.0": {"./vpc.tar.gz", "./other.tar.gz"},
		"1.2.0": {"./vpc.tar.gz", "../1.2.0/vpc.tar.gz"}, // one package, spelt twice
		"1.3.0": {"git::https://git.example.test/vpc.git?ref=v1.3.0", "git::https://git.example.test/vpc.git?ref=v1.3.0"},
		"1.4.0": {"git::https://git.example.test/vpc.git?ref=v1.4.0", ""},
		"1.5.0": {"", "git::https://git.example.test/vpc.git?ref=v1.5.0"},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	})
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/{version}/download", func(w http.ResponseWriter, r *http.Request) {
		a := answers[r.PathValue("version")]
		if a[0] != "" {
			w.Header().Set("X-Terraform-Get", a[0])
		}
		if a[1] != "" {
			writeJSON(w, `{"location":"`+a[1]+`"}`)
			return
		}
		writeJSON(w, `{}`)
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, nil)
	m := addrs.Module{Hostname: s.host, Namespace: "acme", Name: "vpc", System: "aws"}
	ctx := context.Background()
	for _, version := range []string{"1.0.0", "1.1.0"} {
		_, err := c.ModuleLocation(ctx, m, version)
		var oe *OriginError
		if !errors.As(err, &oe) || oe.StatusCode != 0 {
			t.Fatalf("ModuleLocation(%s) = %v, want a bad origin answer (OriginError)", version, err)
		}
		for _, want := range []string{"two locations", answers[version][0], answers[version][1]} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("ModuleLocation(%s): %v, want it to name %q", version, err, want)
			}
		}
	}
	for version, want := range map[string]string{
		"1.2.0": s.url("/v1/modules/acme/vpc/aws/1.2.0/vpc.tar.gz"),
		"1.3.0": answers["1.3.0"][0],
		"1.4.0": answers["1.4.0"][0],
		"1.5.0": answers["1.5.0"][1],
	} {
		if got, err := c.ModuleLocation(ctx, m, version); err != nil || got != (ModuleDownload{Location: want}) {
			t.Errorf("ModuleLocation(%s) = %+v, %v; want %q", version, got, err, want)
		}
	}
}

package discovery

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// OpenTofu's direct download answer, {"location": URL,
// "use_registry_credentials": true or false}, names the package's URL
// (any relative one resolved against the download URL asked, whatever
// the X-Terraform-Get header says), fetched with the registry's
// credential or without. "use_registry_credentials": null and an answer
// without it are read as before (go-getter syntax); one that is not a
// boolean is refused, as OpenTofu refuses it.
func TestModuleLocationDirectAnswer(t *testing.T) {
	answers := map[string]func(w http.ResponseWriter){
		"1.0.0": func(w http.ResponseWriter) {
			writeJSON(w, `{"location":"https://pkg.example.test/vpc/1.0.0","use_registry_credentials":true}`)
		},
		"1.1.0": func(w http.ResponseWriter) {
			w.Header().Set("X-Terraform-Get", "git::https://git.example.test/vpc.git?ref=v1.1.0")
			writeJSON(w, `{"location":"package","use_registry_credentials":true}`)
		},
		"1.2.0": func(w http.ResponseWriter) {
			writeJSON(w, `{"location":"./vpc.tar.gz","use_registry_credentials":false}`)
		},
		"1.2.1": func(w http.ResponseWriter) {
			w.Header().Set("X-Terraform-Get", "git::https://git.example.test/vpc.git?ref=v1.2.1")
			writeJSON(w, `{"location":"https://bucket.example.test/vpc/1.2.1?X-Amz-Signature=abc","use_registry_credentials":false}`)
		},
		"1.3.0": func(w http.ResponseWriter) {
			writeJSON(w, `{"location":"https://pkg.example.test/vpc.tar.gz//modules/a","use_registry_credentials":null}`)
		},
		"1.4.0": func(w http.ResponseWriter) {
			writeJSON(w, `{"location":"https://pkg.example.test/vpc.zip","use_registry_credentials":"true"}`)
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	})
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/{version}/download", func(w http.ResponseWriter, r *http.Request) {
		answers[r.PathValue("version")](w)
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, nil)
	m := addrs.Module{Hostname: s.host, Namespace: "acme", Name: "vpc", System: "aws"}
	for version, want := range map[string]ModuleDownload{
		"1.0.0": {Location: "https://pkg.example.test/vpc/1.0.0", Direct: true, RegistryCredentials: true},
		"1.1.0": {Location: s.url("/v1/modules/acme/vpc/aws/1.1.0/package"), Direct: true, RegistryCredentials: true},
		"1.2.0": {Location: s.url("/v1/modules/acme/vpc/aws/1.2.0/vpc.tar.gz"), Direct: true},
		"1.2.1": {Location: "https://bucket.example.test/vpc/1.2.1?X-Amz-Signature=abc", Direct: true},
		"1.3.0": {Location: "https://pkg.example.test/vpc.tar.gz//modules/a"},
	} {
		if got, err := c.ModuleLocation(context.Background(), m, version); err != nil || got != want {
			t.Errorf("ModuleLocation(%s) = %+v, %v; want %+v", version, got, err, want)
		}
	}
	if got, err := c.ModuleLocation(context.Background(), m, "1.4.0"); err == nil {
		t.Errorf("use_registry_credentials \"true\" (a string) read as %+v", got)
	}
}

// A package fetched on a context that asks for the registry's credential
// (WithRegistryCredential) carries the origin's own token, as a bearer
// token, to the package URL's host only: not across a redirect to
// another host, not to a host it was not asked for, and not at all
// without that asking or without a token for the origin. The token is
// in no log line.
func TestRegistryCredentialOwnHostOnly(t *testing.T) {
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
	pkgMux := http.NewServeMux()
	pkgMux.Handle("/pkg/", record("package"))
	pkgMux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen["package /moved"] = append(seen["package /moved"], r.Header.Get("Authorization"))
		mu.Unlock()
		http.Redirect(w, r, other.url("/elsewhere"), http.StatusFound)
	})
	pkgHost := newTestServer(t, pkgMux)
	registry := newTestServer(t, http.NotFoundHandler())
	const token = "origin-tok-55"
	var logs bytes.Buffer
	c := newTestClient(t, pkgHost, func(cfg *Config) {
		cfg.AllowedOrigins = []string{string(registry.host)}
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		cfg.Credentials = func(h svchost.Hostname) string {
			if h == registry.host {
				return token
			}
			return ""
		}
	})
	read := func(ctx context.Context, origin svchost.Hostname, u string) {
		t.Helper()
		body, _, err := c.OpenSource(ctx, origin, u)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(body)
		body.Close()
	}
	bg := context.Background()
	read(WithRegistryCredential(bg, pkgHost.url("/pkg/a")), registry.host, pkgHost.url("/pkg/a"))
	read(WithRegistryCredential(bg, pkgHost.url("/moved")), registry.host, pkgHost.url("/moved"))
	read(WithRegistryCredential(bg, other.url("/x")), registry.host, pkgHost.url("/pkg/b"))
	read(bg, registry.host, pkgHost.url("/pkg/c"))
	// A source credential of the operator's for the same host gives way
	// to the registry's, where it asks for it.
	withBoth := WithRegistryCredential(WithSourceCredential(bg, SourceCredential{Host: string(pkgHost.host), Token: "operator-tok"}), pkgHost.url("/pkg/d"))
	read(withBoth, registry.host, pkgHost.url("/pkg/d"))

	// Another origin, without a token: nothing is sent.
	c2 := newTestClient(t, pkgHost, func(cfg *Config) {
		cfg.AllowedOrigins = []string{string(registry.host)}
	})
	body, _, err := c2.OpenSource(WithRegistryCredential(bg, pkgHost.url("/pkg/e")), registry.host, pkgHost.url("/pkg/e"))
	if err != nil {
		t.Fatal(err)
	}
	body.Close()

	want := map[string][]string{
		"package /pkg/a":   {"Bearer " + token},
		"package /moved":   {"Bearer " + token},
		"other /elsewhere": {""},
		"package /pkg/b":   {""},
		"package /pkg/c":   {""},
		"package /pkg/d":   {"Bearer " + token},
		"package /pkg/e":   {""},
	}
	mu.Lock()
	defer mu.Unlock()
	for k, v := range want {
		if strings.Join(seen[k], ",") != strings.Join(v, ",") {
			t.Errorf("%s saw Authorization %q, want %q", k, seen[k], v)
		}
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the log reveals the token:\n%s", logs.String())
	}
}

// A direct download answer asking for the registry's credential counts
// only from the download URL's own host: one that a redirect brought from
// another host (which the registry's token never reached) is refused,
// not read as the registry's word. A redirect within the host is followed
// as ever.
func TestModuleLocationDirectAnswerOnlyFromTheHostAsked(t *testing.T) {
	other := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, `{"location":"/stolen","use_registry_credentials":true}`)
	}))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	})
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/1.0.0/download", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.url("/answer"), http.StatusFound)
	})
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/1.1.0/download", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/answers/1.1.0", http.StatusFound)
	})
	mux.HandleFunc("GET /answers/1.1.0", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, `{"location":"package","use_registry_credentials":true}`)
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, func(cfg *Config) {
		pool := rootCAs(t, s)
		pool.AddCert(other.srv.Certificate())
		cfg.RootCAs = pool
	})
	m := addrs.Module{Hostname: s.host, Namespace: "acme", Name: "vpc", System: "aws"}
	if got, err := c.ModuleLocation(context.Background(), m, "1.0.0"); err == nil || got.RegistryCredentials {
		t.Errorf("an answer from the host a redirect led to: %+v, %v; want it refused", got, err)
	} else if !strings.Contains(err.Error(), other.srv.Listener.Addr().String()) {
		t.Errorf("the refusal %q does not name the host that answered", err)
	}
	want := ModuleDownload{Location: s.url("/v1/modules/acme/vpc/aws/1.1.0/package"), Direct: true, RegistryCredentials: true}
	if got, err := c.ModuleLocation(context.Background(), m, "1.1.0"); err != nil || got != want {
		t.Errorf("an answer from the host asked, after a redirect within it: %+v, %v; want %+v", got, err, want)
	}
}

// The registry's token goes only to the registry's own host: a modules.v1
// service that its discovery document places on another host is asked
// without it, and so its direct download answer asking for the registry's
// credential is not the registry's word either (the token never reached
// that host, which would otherwise choose where it goes): refused, as an
// answer a redirect brought from another host is.
func TestModuleLocationDirectAnswerOnlyFromTheRegistrysHost(t *testing.T) {
	other := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the modules.v1 host of another host was sent %q", r.Header.Get("Authorization"))
		}
		writeJSON(w, `{"location":"/stolen","use_registry_credentials":true}`)
	}))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, `{"modules.v1": "`+other.url("/v1/modules/")+`"}`)
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, func(cfg *Config) {
		pool := rootCAs(t, s)
		pool.AddCert(other.srv.Certificate())
		cfg.RootCAs = pool
		cfg.Credentials = func(h svchost.Hostname) string {
			if h == s.host {
				return "registry-token-XYZ"
			}
			return ""
		}
	})
	m := addrs.Module{Hostname: s.host, Namespace: "acme", Name: "vpc", System: "aws"}
	got, err := c.ModuleLocation(context.Background(), m, "1.0.0")
	if err == nil || got.RegistryCredentials {
		t.Fatalf("a direct answer asking for the registry's credential from a modules.v1 host other than the registry's: %+v, %v; want it refused", got, err)
	}
	if !strings.Contains(err.Error(), other.srv.Listener.Addr().String()) {
		t.Errorf("the refusal %q does not name the host that answered", err)
	}
}

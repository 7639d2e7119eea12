package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
)

var testProvider = func(s *testServer) addrs.Provider {
	return addrs.Provider{Hostname: s.host, Namespace: "hashicorp", Type: "random"}
}

// registry serves discovery plus the given registry routes under /v1/providers/.
func registry(routes map[string]http.HandlerFunc) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(wellKnown, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	})
	for p, h := range routes {
		mux.HandleFunc(p, h)
	}
	return mux
}

func TestVersions(t *testing.T) {
	const path = "/v1/providers/hashicorp/random/versions"
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		maxDoc     int64
		want       []VersionInfo
		notFound   bool
		wantStatus int // for OriginError cases
		wantErr    bool
	}{
		{
			name: "ok",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, `{"versions":[
					{"version":"2.0.0","protocols":["4.0","5.1"],"platforms":[{"os":"linux","arch":"amd64"},{"os":"darwin","arch":"arm64"}]},
					{"version":"","protocols":["5.0"]},
					{"version":"2.0.1","protocols":["5.2"],"platforms":[],"extra":true}
				],"warnings":["deprecated"]}`)
			},
			want: []VersionInfo{
				{Version: "2.0.0", Protocols: []string{"4.0", "5.1"}, Platforms: []addrs.Platform{{OS: "linux", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}}},
				{Version: "2.0.1", Protocols: []string{"5.2"}},
			},
		},
		{
			name:    "empty list",
			handler: func(w http.ResponseWriter, r *http.Request) { writeJSON(w, `{"versions":[]}`) },
			want:    []VersionInfo{},
		},
		{name: "not found", handler: http.NotFound, notFound: true},
		{
			name:       "server error",
			handler:    func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
			wantErr:    true,
			wantStatus: http.StatusInternalServerError,
		},
		{
			name:       "rate limited",
			handler:    func(w http.ResponseWriter, r *http.Request) { http.Error(w, "slow down", http.StatusTooManyRequests) },
			wantErr:    true,
			wantStatus: http.StatusTooManyRequests,
		},
		{
			name: "wrong content type",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.Write([]byte(`{"versions":[]}`))
			},
			wantErr: true,
		},
		{
			name:    "garbage",
			handler: func(w http.ResponseWriter, r *http.Request) { writeJSON(w, `{"versions":[{"version":`) },
			wantErr: true,
		},
		{
			name:    "not an object",
			handler: func(w http.ResponseWriter, r *http.Request) { writeJSON(w, `[{"version":"1.0.0"}]`) },
			wantErr: true,
		},
		{
			name:    "wrong field type",
			handler: func(w http.ResponseWriter, r *http.Request) { writeJSON(w, `{"versions":"1.0.0"}`) },
			wantErr: true,
		},
		{
			name:    "no versions property",
			handler: func(w http.ResponseWriter, r *http.Request) { writeJSON(w, `{"errors":["oops"]}`) },
			wantErr: true,
		},
		{
			name: "oversize with Content-Length",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, `{"versions":[`+strings.Repeat(`{"version":"1.0.0"},`, 100)+`{"version":"9.9.9"}]}`)
			},
			maxDoc:  512,
			wantErr: true,
		},
		{
			name: "oversize streamed",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.(http.Flusher).Flush() // no Content-Length
				fmt.Fprint(w, `{"versions":[`+strings.Repeat(`{"version":"1.0.0"},`, 100)+`{"version":"9.9.9"}]}`)
			},
			maxDoc:  512,
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, registry(map[string]http.HandlerFunc{path: tt.handler}))
			c := newTestClient(t, s, func(cfg *Config) { cfg.MaxDocumentBytes = tt.maxDoc })
			got, err := c.Versions(context.Background(), testProvider(s))
			switch {
			case tt.notFound:
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
				var oe *OriginError
				if errors.As(err, &oe) {
					t.Fatalf("404 must not be an OriginError: %v", err)
				}
			case tt.wantErr:
				wantOriginError(t, err, OpVersions, tt.wantStatus)
				if tt.maxDoc != 0 && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("err = %v, want ErrTooLarge", err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got.Versions, tt.want) {
					t.Fatalf("versions = %+v\nwant %+v", got, tt.want)
				}
			}
			if h := s.header(path); h.Get("Accept") != "application/json" || h.Get("User-Agent") != "tfmirror" {
				t.Fatalf("request headers Accept=%q User-Agent=%q", h.Get("Accept"), h.Get("User-Agent"))
			}
		})
	}
}

// TestVersionsDocumentElementsBounded: an origin's versions answer within
// the byte limit (16 MiB by default) but made of millions of empty
// platform objects, which encoding/json decodes into gigabytes, is refused
// as too large before it is decoded, with the memory the refusal takes
// bounded by the document's bytes.
func TestVersionsDocumentElementsBounded(t *testing.T) {
	const path = "/v1/providers/hashicorp/random/versions"
	var b strings.Builder
	b.WriteString(`{"versions":[{"version":"1.0.0","platforms":[`)
	for b.Len() < 16<<20-64 {
		b.WriteString(`{},`)
	}
	b.WriteString(`{}]}]}`)
	doc := b.String()
	s := newTestServer(t, registry(map[string]http.HandlerFunc{path: func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, doc)
	}}))
	c := newTestClient(t, s, nil)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	got, err := c.Versions(context.Background(), testProvider(s))
	runtime.ReadMemStats(&m1)
	if err == nil {
		t.Fatalf("a versions answer of %d elements was taken: %d versions", len(doc)/3, len(got.Versions))
	}
	wantOriginError(t, err, OpVersions, 0)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "elements") {
		t.Fatalf("err = %v, want ErrTooLarge naming the element limit", err)
	}
	// Reading the answer takes about twice its size; decoding it took 2 GiB.
	if a := m1.TotalAlloc - m0.TotalAlloc; a > 128<<20 {
		t.Fatalf("refusing a %d-byte answer allocated %d MiB", len(doc), a>>20)
	}
}

func TestVersionsEscapesPathSegments(t *testing.T) {
	s := newTestServer(t, registry(nil))
	c := newTestClient(t, s, nil)
	p := addrs.Provider{Hostname: s.host, Namespace: "a b", Type: "x?y#z"}
	_, err := c.Versions(context.Background(), p)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if got := s.count("/v1/providers/a b/x?y#z/versions"); got != 1 {
		t.Fatalf("escaped path not requested; hits = %v", s.hits)
	}
}

func packageJSON(os, arch, download, sums, sig string) string {
	return fmt.Sprintf(`{
		"protocols": ["5.0"], "os": %q, "arch": %q,
		"filename": "terraform-provider-random_2.0.0_linux_amd64.zip",
		"download_url": %q, "shasums_url": %q, "shasums_signature_url": %q,
		"shasum": "5f9c7aa76b7c34d722fc9123208e26b22d60440cb47150dd04733b9b94f4541a",
		"signing_keys": {"gpg_public_keys": [
			{"key_id": "51852D87348FFC4C", "ascii_armor": "-----BEGIN PGP PUBLIC KEY BLOCK-----\nkey1\n-----END PGP PUBLIC KEY BLOCK-----",
			 "trust_signature": "-----BEGIN PGP SIGNATURE-----\ntrust1\n-----END PGP SIGNATURE-----",
			 "source": "HashiCorp", "source_url": "https://www.hashicorp.com/security.html"},
			{"key_id": "AAAA", "ascii_armor": ""},
			{"key_id": "B2", "ascii_armor": "-----BEGIN PGP PUBLIC KEY BLOCK-----\nkey2\n-----END PGP PUBLIC KEY BLOCK-----"}
		]}
	}`, os, arch, download, sums, sig)
}

// wantSigningKeys are packageJSON's keys as Package must carry them: every
// field as given, in order, without the entry that has no key.
var wantSigningKeys = []registryjson.GPGPublicKey{
	{
		KeyID:          "51852D87348FFC4C",
		ASCIIArmor:     "-----BEGIN PGP PUBLIC KEY BLOCK-----\nkey1\n-----END PGP PUBLIC KEY BLOCK-----",
		TrustSignature: "-----BEGIN PGP SIGNATURE-----\ntrust1\n-----END PGP SIGNATURE-----",
		Source:         "HashiCorp",
		SourceURL:      "https://www.hashicorp.com/security.html",
	},
	{KeyID: "B2", ASCIIArmor: "-----BEGIN PGP PUBLIC KEY BLOCK-----\nkey2\n-----END PGP PUBLIC KEY BLOCK-----"},
}

func TestPackage(t *testing.T) {
	const path = "/v1/providers/hashicorp/random/2.0.0/download/linux/amd64"
	linux := addrs.Platform{OS: "linux", Arch: "amd64"}
	tests := []struct {
		name     string
		routes   map[string]http.HandlerFunc
		want     func(s *testServer) *Package
		notFound bool
		wantErr  bool
	}{
		{
			name: "relative and absolute URLs",
			routes: map[string]http.HandlerFunc{path: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, packageJSON("linux", "amd64", "archive.zip", "/files/SHA256SUMS",
					"https://releases.example.com/random/2.0.0/SHA256SUMS.sig?X-Sig=abc"))
			}},
			want: func(s *testServer) *Package {
				return &Package{
					Protocols:           []string{"5.0"},
					OS:                  "linux",
					Arch:                "amd64",
					Filename:            "terraform-provider-random_2.0.0_linux_amd64.zip",
					DownloadURL:         s.url("/v1/providers/hashicorp/random/2.0.0/download/linux/archive.zip"),
					SHASumsURL:          s.url("/files/SHA256SUMS"),
					SHASumsSignatureURL: "https://releases.example.com/random/2.0.0/SHA256SUMS.sig?X-Sig=abc",
					SHASum:              "5f9c7aa76b7c34d722fc9123208e26b22d60440cb47150dd04733b9b94f4541a",
					SigningKeys:         wantSigningKeys,
				}
			},
		},
		{
			name: "relative URLs resolve against the final URL after a redirect",
			routes: map[string]http.HandlerFunc{
				path: func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, "/elsewhere/meta/linux_amd64.json", http.StatusFound)
				},
				"/elsewhere/meta/linux_amd64.json": func(w http.ResponseWriter, r *http.Request) {
					writeJSON(w, packageJSON("linux", "amd64", "../zips/a.zip", "SHA256SUMS", "SHA256SUMS.sig"))
				},
			},
			want: func(s *testServer) *Package {
				return &Package{
					Protocols:           []string{"5.0"},
					OS:                  "linux",
					Arch:                "amd64",
					Filename:            "terraform-provider-random_2.0.0_linux_amd64.zip",
					DownloadURL:         s.url("/elsewhere/zips/a.zip"),
					SHASumsURL:          s.url("/elsewhere/meta/SHA256SUMS"),
					SHASumsSignatureURL: s.url("/elsewhere/meta/SHA256SUMS.sig"),
					SHASum:              "5f9c7aa76b7c34d722fc9123208e26b22d60440cb47150dd04733b9b94f4541a",
					SigningKeys:         wantSigningKeys,
				}
			},
		},
		{name: "not found", routes: map[string]http.HandlerFunc{path: http.NotFound}, notFound: true},
		{
			name: "platform mismatch",
			routes: map[string]http.HandlerFunc{path: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, packageJSON("darwin", "amd64", "a.zip", "SUMS", "SUMS.sig"))
			}},
			wantErr: true,
		},
		{
			name: "missing download_url",
			routes: map[string]http.HandlerFunc{path: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, packageJSON("linux", "amd64", "", "SUMS", "SUMS.sig"))
			}},
			wantErr: true,
		},
		{
			name: "plain http download_url",
			routes: map[string]http.HandlerFunc{path: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, packageJSON("linux", "amd64", "http://releases.example.com/a.zip", "SUMS", "SUMS.sig"))
			}},
			wantErr: true,
		},
		{
			name: "unparsable URL",
			routes: map[string]http.HandlerFunc{path: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, packageJSON("linux", "amd64", "https://[::1", "SUMS", "SUMS.sig"))
			}},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, registry(tt.routes))
			c := newTestClient(t, s, nil)
			got, err := c.Package(context.Background(), testProvider(s), "2.0.0", linux)
			switch {
			case tt.notFound:
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
			case tt.wantErr:
				wantOriginError(t, err, OpPackage, 0)
			default:
				if err != nil {
					t.Fatal(err)
				}
				if want := tt.want(s); !reflect.DeepEqual(got, want) {
					t.Fatalf("package =\n%+v\nwant\n%+v", got, want)
				}
			}
		})
	}
}

func TestRegistryDiscoveryErrorsPassThrough(t *testing.T) {
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, `{"modules.v1":"/m/"}`)
	}))
	c := newTestClient(t, s, nil)
	_, err := c.Versions(context.Background(), testProvider(s))
	if !errors.Is(err, ErrNoProviderService) {
		t.Fatalf("Versions err = %v, want ErrNoProviderService", err)
	}
	_, err = c.Package(context.Background(), testProvider(s), "1.0.0", addrs.Platform{OS: "linux", Arch: "amd64"})
	if !errors.Is(err, ErrNoProviderService) {
		t.Fatalf("Package err = %v, want ErrNoProviderService", err)
	}
}

// The origin's warnings are passed on to the clients, which print them on
// a terminal: a few, each of a bounded length cut on a character's
// boundary, without a terminal's escapes or other control and format
// characters (line breaks and tabs kept), and none empty.
func TestVersionsWarningsCleaned(t *testing.T) {
	long := strings.Repeat("é", maxWarningBytes) // two bytes each
	var many []string
	for i := range maxWarnings + 3 {
		many = append(many, fmt.Sprintf("warning %d", i))
	}
	for _, tt := range []struct {
		name string
		in   []string
		want []string
	}{
		{"escapes and marks", []string{"\x1b[2J\x1b[31mdeprecated\x1b[0m\u202e!", "line one\nline\ttwo\r"}, []string{"[2J[31mdeprecated[0m!", "line one\nline\ttwo"}},
		{"empty and spaces", []string{"", "  ", "\x07", "kept"}, []string{"kept"}},
		{"invalid UTF-8", []string{"a\xffb"}, []string{"a\uFFFDb"}},
		{"too long, cut between characters", []string{"a" + long}, []string{("a" + long)[:maxWarningBytes-1]}},
		{"too many", many, many[:maxWarnings]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := cleanWarnings(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cleanWarnings(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

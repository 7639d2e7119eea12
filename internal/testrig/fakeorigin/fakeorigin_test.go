package fakeorigin

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/verify"
)

const (
	ns  = "hashicorp"
	typ = "random"
	ver = "3.6.0"
	pl  = "linux_amd64"
)

var platforms = []string{pl, "darwin_arm64"}

func start(t *testing.T, opts Options) (*Origin, *http.Client) {
	t.Helper()
	o, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	o.AddProvider(ns, typ, []string{"3.5.0", ver}, platforms)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: o.CertPool()}}}
	t.Cleanup(c.CloseIdleConnections)
	return o, c
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func get(t *testing.T, c *http.Client, u string, header ...string) resp {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", u, err)
	}
	return resp{r.StatusCode, r.Header, b}
}

func getJSON(t *testing.T, c *http.Client, u string, v any, header ...string) {
	t.Helper()
	r := get(t, c, u, header...)
	if r.status != 200 {
		t.Fatalf("GET %s: %d %s", u, r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q", u, ct)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// pkg is the package JSON with its URLs resolved against its own URL, as
// clients do.
type pkg struct {
	Protocols           []string `json:"protocols"`
	OS                  string   `json:"os"`
	Arch                string   `json:"arch"`
	Filename            string   `json:"filename"`
	DownloadURL         string   `json:"download_url"`
	ShasumsURL          string   `json:"shasums_url"`
	ShasumsSignatureURL string   `json:"shasums_signature_url"`
	Shasum              string   `json:"shasum"`
	SigningKeys         struct {
		GPGPublicKeys []struct {
			KeyID          string  `json:"key_id"`
			ASCIIArmor     string  `json:"ascii_armor"`
			TrustSignature *string `json:"trust_signature"`
			Source         string  `json:"source"`
			SourceURL      string  `json:"source_url"`
		} `json:"gpg_public_keys"`
	} `json:"signing_keys"`
}

func (p pkg) keys() []string {
	var ks []string
	for _, k := range p.SigningKeys.GPGPublicKeys {
		ks = append(ks, k.ASCIIArmor)
	}
	return ks
}

func download(t *testing.T, o *Origin, c *http.Client, header ...string) pkg {
	t.Helper()
	u := o.URL + "/v1/providers/" + ns + "/" + typ + "/" + ver + "/download/linux/amd64"
	var p pkg
	getJSON(t, c, u, &p, header...)
	base, _ := url.Parse(u)
	for _, s := range []*string{&p.DownloadURL, &p.ShasumsURL, &p.ShasumsSignatureURL} {
		ref, err := url.Parse(*s)
		if err != nil {
			t.Fatal(err)
		}
		*s = base.ResolveReference(ref).String()
	}
	return p
}

// authenticate applies the installer's checks to what the origin serves
// and returns the archive it fetched.
func authenticate(t *testing.T, c *http.Client, p pkg) ([]byte, error) {
	t.Helper()
	sums := get(t, c, p.ShasumsURL)
	sig := get(t, c, p.ShasumsSignatureURL)
	if sums.status != 200 || sig.status != 200 {
		t.Fatalf("SHA256SUMS %d, signature %d", sums.status, sig.status)
	}
	if err := verify.CheckSignature(sums.body, sig.body, p.keys()); err != nil {
		return nil, err
	}
	parsed, err := verify.ParseSHA256SUMS(sums.body)
	if err != nil {
		return nil, err
	}
	if err := verify.VerifySums(parsed, p.Filename, p.Shasum); err != nil {
		return nil, err
	}
	a := get(t, c, p.DownloadURL)
	if a.status != 200 {
		t.Fatalf("archive: %d", a.status)
	}
	if got := sha(a.body); got != p.Shasum {
		return a.body, &verify.Error{Reason: verify.ReasonChecksum, Detail: "archive sha256 " + got}
	}
	return a.body, nil
}

func reasonOf(err error) verify.Reason {
	var e *verify.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func TestWalk(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		wantHost func(o *Origin) string
	}{
		{name: "one host", opts: Options{}, wantHost: func(o *Origin) string { return o.Addr }},
		{name: "separate download host", opts: Options{SeparateDownloadHost: true}, wantHost: func(o *Origin) string { return o.DownloadAddr }},
		{name: "relative download URLs", opts: Options{RelativeDownloadURLs: true}, wantHost: func(o *Origin) string { return o.Addr }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, c := start(t, tc.opts)
			if (o.DownloadAddr != o.Addr) != tc.opts.SeparateDownloadHost || o.Host != o.Addr || o.URL != "https://"+o.Addr {
				t.Fatalf("URL %s Addr %s Host %s DownloadAddr %s", o.URL, o.Addr, o.Host, o.DownloadAddr)
			}

			var disco map[string]string
			getJSON(t, c, o.URL+"/.well-known/terraform.json", &disco)
			if disco["providers.v1"] != "/v1/providers/" {
				t.Fatalf("discovery = %v", disco)
			}

			var vs struct {
				Versions []struct {
					Version   string   `json:"version"`
					Protocols []string `json:"protocols"`
					Platforms []struct{ OS, Arch string }
				} `json:"versions"`
			}
			getJSON(t, c, o.URL+"/v1/providers/"+ns+"/"+typ+"/versions", &vs)
			if len(vs.Versions) != 2 || vs.Versions[1].Version != ver || len(vs.Versions[1].Platforms) != 2 ||
				vs.Versions[1].Platforms[0].OS != "linux" || vs.Versions[1].Platforms[0].Arch != "amd64" ||
				vs.Versions[1].Protocols[0] != "5.0" {
				t.Fatalf("versions = %+v", vs)
			}

			p := download(t, o, c)
			if p.Filename != "terraform-provider-random_3.6.0_linux_amd64.zip" || p.Filename != o.Filename(ns, typ, ver, pl) ||
				p.OS != "linux" || p.Arch != "amd64" || len(p.Protocols) != 1 || p.Protocols[0] != "5.0" {
				t.Fatalf("package = %+v", p)
			}
			if p.DownloadURL != o.ArchiveURL(ns, typ, ver, pl) || !strings.HasSuffix(p.DownloadURL, o.ArchivePath(ns, typ, ver, pl)) {
				t.Fatalf("download_url %s, ArchiveURL %s", p.DownloadURL, o.ArchiveURL(ns, typ, ver, pl))
			}
			for _, u := range []string{p.DownloadURL, p.ShasumsURL, p.ShasumsSignatureURL} {
				if pu, err := url.Parse(u); err != nil || pu.Scheme != "https" || pu.Host != tc.wantHost(o) || !strings.HasPrefix(pu.Path, "/releases/") {
					t.Fatalf("URL %q not under https://%s/releases/", u, tc.wantHost(o))
				}
			}
			if k := p.SigningKeys.GPGPublicKeys; len(k) != 1 || k[0].ASCIIArmor != o.ArmoredPublicKey() || k[0].KeyID != o.KeyID() ||
				len(k[0].KeyID) != 16 || strings.ToUpper(k[0].KeyID) != k[0].KeyID ||
				k[0].TrustSignature == nil || *k[0].TrustSignature != "" ||
				k[0].Source != o.SigningKey().Source || k[0].SourceURL != o.SigningKey().SourceURL || k[0].Source == "" {
				t.Fatalf("signing keys %+v", k)
			}

			zb, err := authenticate(t, c, p)
			if err != nil {
				t.Fatalf("authenticating the package: %v", err)
			}
			if p.Shasum != o.SHA256(ns, typ, ver, pl) || !bytes.Equal(zb, o.Archive(ns, typ, ver, pl)) {
				t.Fatal("served archive differs from Archive/SHA256")
			}
			zr, err := zip.NewReader(bytes.NewReader(zb), int64(len(zb)))
			if err != nil {
				t.Fatal(err)
			}
			if f := zr.File[0]; f.Name != "terraform-provider-random_v3.6.0" || f.Mode().Perm() != 0o755 {
				t.Fatalf("first zip entry %s %v", f.Name, f.Mode())
			}
			if _, err := verify.H1(bytes.NewReader(zb), int64(len(zb))); err != nil {
				t.Fatal(err)
			}

			// The archive's first byte, with its total size.
			req, err := http.NewRequest(http.MethodGet, p.DownloadURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Range", "bytes=0-0")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusPartialContent || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 0-0/%d", len(zb)) ||
				!bytes.Equal(first, zb[:1]) {
				t.Errorf("first byte: %s, Content-Range %q, body %q", resp.Status, resp.Header.Get("Content-Range"), first)
			}

			for _, k := range Kinds() {
				if got := o.Hits(k); got != 1 {
					t.Errorf("Hits(%s) = %d, want 1", k, got)
				}
			}
			if o.TotalHits() != 7 || o.ArchiveHits(ns, typ, ver, pl) != 1 || o.ArchiveHits(ns, typ, ver, "darwin_arm64") != 0 {
				t.Errorf("TotalHits %d ArchiveHits %d", o.TotalHits(), o.ArchiveHits(ns, typ, ver, pl))
			}
			o.ResetHits()
			if o.TotalHits() != 0 || o.ArchiveHits(ns, typ, ver, pl) != 0 || o.LastAuthHeaders(Archive) != nil {
				t.Error("ResetHits left counters")
			}
		})
	}
}

func TestSHA256SUMSCoversEveryPlatform(t *testing.T) {
	for _, manifest := range []bool{false, true} {
		o, c := start(t, Options{ReleaseManifest: manifest})
		p := download(t, o, c)
		sums, err := verify.ParseSHA256SUMS(get(t, c, p.ShasumsURL).body)
		if err != nil {
			t.Fatal(err)
		}
		// One line per platform, and with ReleaseManifest the release's
		// manifest, as real registries' SHA256SUMS have.
		want := len(platforms)
		if manifest {
			want++
		}
		if len(sums) != want || manifest != (sums["terraform-provider-"+typ+"_"+ver+"_manifest.json"] != "") {
			t.Fatalf("ReleaseManifest %v: SHA256SUMS has %d lines (%v), want %d", manifest, len(sums), sums, want)
		}
		for _, plat := range platforms {
			if got := sums[o.Filename(ns, typ, ver, plat)]; got != o.SHA256(ns, typ, ver, plat) {
				t.Errorf("%s: SHA256SUMS says %q, SHA256 %q", plat, got, o.SHA256(ns, typ, ver, plat))
			}
		}
	}
}

// With PackageHashes, the package JSON lists every platform's zh:, h1:
// and size, computed from the archives served; without it, nothing.
func TestPackageHashes(t *testing.T) {
	u := "/v1/providers/" + ns + "/" + typ + "/" + ver + "/download/linux/amd64"
	for _, on := range []bool{false, true} {
		o, c := start(t, Options{PackageHashes: on})
		var doc registryjson.Package
		getJSON(t, c, o.URL+u, &doc)
		if !on {
			if doc.Packages != nil {
				t.Errorf("without PackageHashes: packages %v", doc.Packages)
			}
			continue
		}
		if len(doc.Packages) != len(platforms) {
			t.Fatalf("packages %v, want one per platform %v", doc.Packages, platforms)
		}
		for _, plat := range platforms {
			data := o.Archive(ns, typ, ver, plat)
			h1, err := verify.H1(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			want := registryjson.PackageHashes{Hashes: []string{"zh:" + o.SHA256(ns, typ, ver, plat), h1}, PackageSize: int64(len(data))}
			if got := doc.Packages[plat]; !reflect.DeepEqual(got, want) {
				t.Errorf("%s: packages entry %+v, want %+v", plat, got, want)
			}
		}
	}
}

func TestNotFound(t *testing.T) {
	o, c := start(t, Options{SeparateDownloadHost: true})
	dl := "https://" + o.DownloadAddr
	tests := []struct{ name, url string }{
		{"unknown provider", o.URL + "/v1/providers/acme/none/versions"},
		{"unknown version", o.URL + "/v1/providers/" + ns + "/" + typ + "/9.9.9/download/linux/amd64"},
		{"unknown platform", o.URL + "/v1/providers/" + ns + "/" + typ + "/" + ver + "/download/plan9/amd64"},
		{"unknown archive", dl + "/releases/" + ns + "/" + typ + "/" + ver + "/terraform-provider-random_3.6.0_plan9_amd64.zip"},
		{"unknown SHA256SUMS", dl + "/releases/" + ns + "/" + typ + "/9.9.9/terraform-provider-random_9.9.9_SHA256SUMS"},
		{"unknown file", dl + "/releases/" + ns + "/" + typ + "/" + ver + "/README"},
		{"registry API on the download host", dl + "/v1/providers/" + ns + "/" + typ + "/versions"},
		{"releases on the registry host", o.URL + o.ArchivePath(ns, typ, ver, pl)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if r := get(t, c, tc.url); r.status != 404 || r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, Content-Type %q", r.status, r.header.Get("Content-Type"))
			}
		})
	}
	if o.Archive(ns, typ, ver, "plan9_amd64") != nil || o.SHA256(ns, "none", ver, pl) != "" {
		t.Error("accessors return data for unknown packages")
	}
}

func TestTLS(t *testing.T) {
	o, err := Start(Options{Hostnames: []string{"registry.terraform.io", "10.1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()

	path, err := o.CAFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(pemBytes, o.CACertPEM) {
		t.Fatalf("CAFile content differs from CACertPEM (err %v)", err)
	}
	fromFile := x509.NewCertPool()
	if !fromFile.AppendCertsFromPEM(pemBytes) {
		t.Fatal("CA file holds no certificate")
	}

	tests := []struct {
		name       string
		serverName string
		pool       *x509.CertPool
		wantErr    bool
	}{
		{"IPv4 loopback", "127.0.0.1", o.CertPool(), false},
		{"localhost", "localhost", fromFile, false},
		{"extra DNS name", "registry.terraform.io", o.CertPool(), false},
		{"extra IP", "10.1.2.3", fromFile, false},
		{"name not in the certificate", "example.com", o.CertPool(), true},
		{"untrusted without the CA", "127.0.0.1", x509.NewCertPool(), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", o.Addr, &tls.Config{ServerName: tc.serverName, RootCAs: tc.pool})
			if err == nil {
				conn.Close()
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("handshake error %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestInjections(t *testing.T) {
	versionsURL := func(o *Origin) string { return o.URL + "/v1/providers/" + ns + "/" + typ + "/versions" }
	discoURL := func(o *Origin) string { return o.URL + "/.well-known/terraform.json" }
	tests := []struct {
		name   string
		inject func(o *Origin, on bool)
		// check runs with the injection on; the walk must succeed once it is off.
		check func(t *testing.T, o *Origin, c *http.Client)
	}{
		{
			name:   "tampered archive",
			inject: func(o *Origin, on bool) { o.TamperArchive(ns, typ, ver, pl, on) },
			check: func(t *testing.T, o *Origin, c *http.Client) {
				p := download(t, o, c)
				b, err := authenticate(t, c, p)
				truth := o.Archive(ns, typ, ver, pl)
				if reasonOf(err) != verify.ReasonChecksum || len(b) != len(truth) || bytes.Equal(b, truth) {
					t.Fatalf("err %v, %d bytes (true archive %d)", err, len(b), len(truth))
				}
				if p.Shasum != sha(truth) || o.SHA256(ns, typ, ver, pl) != sha(truth) {
					t.Fatal("tampering changed the advertised sha256")
				}
				diff := 0
				for i := range b {
					if b[i] != truth[i] {
						diff++
					}
				}
				if diff != 1 {
					t.Fatalf("%d bytes differ, want 1", diff)
				}
			},
		},
		{
			name:   "wrong signing key",
			inject: func(o *Origin, on bool) { o.SetWrongSigningKey(on) },
			check: func(t *testing.T, o *Origin, c *http.Client) {
				p := download(t, o, c)
				if p.SigningKeys.GPGPublicKeys[0].ASCIIArmor != o.ArmoredPublicKey() {
					t.Fatal("advertised key changed")
				}
				if _, err := authenticate(t, c, p); reasonOf(err) != verify.ReasonSignature {
					t.Fatalf("got %v, want reason signature", err)
				}
			},
		},
		{
			name:   "line omitted from SHA256SUMS",
			inject: func(o *Origin, on bool) { o.OmitFromSums(ns, typ, ver, pl, on) },
			check: func(t *testing.T, o *Origin, c *http.Client) {
				if _, err := authenticate(t, c, download(t, o, c)); reasonOf(err) != verify.ReasonMissingChecksum {
					t.Fatalf("got %v, want reason missing_checksum", err)
				}
			},
		},
		{
			name: "registry shasum lies",
			inject: func(o *Origin, on bool) {
				v := ""
				if on {
					v = strings.Repeat("0", 64)
				}
				o.SetShasumOverride(ns, typ, ver, pl, v)
			},
			check: func(t *testing.T, o *Origin, c *http.Client) {
				p := download(t, o, c)
				if p.Shasum != strings.Repeat("0", 64) {
					t.Fatalf("shasum %s", p.Shasum)
				}
				if _, err := authenticate(t, c, p); reasonOf(err) != verify.ReasonChecksum {
					t.Fatalf("got %v, want reason checksum_mismatch", err)
				}
			},
		},
		{
			name: "one kind failing",
			inject: func(o *Origin, on bool) {
				o.SetKindStatus(Versions, map[bool]int{true: 503}[on])
			},
			check: func(t *testing.T, o *Origin, c *http.Client) {
				r := get(t, c, versionsURL(o))
				if r.status != 503 || r.header.Get("Content-Type") != "application/json" || !json.Valid(r.body) {
					t.Fatalf("versions: %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
				}
				if r := get(t, c, discoURL(o)); r.status != 200 {
					t.Fatalf("discovery affected: %d", r.status)
				}
			},
		},
		{
			name:   "everything down",
			inject: func(o *Origin, on bool) { o.SetDown(map[bool]int{true: 500}[on]) },
			check: func(t *testing.T, o *Origin, c *http.Client) {
				for _, u := range []string{discoURL(o), versionsURL(o), o.ArchiveURL(ns, typ, ver, pl)} {
					if r := get(t, c, u); r.status != 500 {
						t.Fatalf("%s: %d", u, r.status)
					}
				}
				if o.Hits(Archive) != 1 || o.ArchiveHits(ns, typ, ver, pl) != 1 {
					t.Fatal("failed requests are not counted")
				}
			},
		},
		{
			name: "garbage body",
			inject: func(o *Origin, on bool) {
				var b []byte
				if on {
					b = []byte("<html>not json</html>")
				}
				o.SetKindBody(Discovery, b, "text/html")
			},
			check: func(t *testing.T, o *Origin, c *http.Client) {
				r := get(t, c, discoURL(o))
				if r.status != 200 || string(r.body) != "<html>not json</html>" || r.header.Get("Content-Type") != "text/html" {
					t.Fatalf("discovery: %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
				}
			},
		},
		{
			name: "oversized archive body",
			inject: func(o *Origin, on bool) {
				var b []byte
				if on {
					b = bytes.Repeat([]byte{'z'}, 1<<20)
				}
				o.SetKindBody(Archive, b, "application/zip")
			},
			check: func(t *testing.T, o *Origin, c *http.Client) {
				if r := get(t, c, o.ArchiveURL(ns, typ, ver, pl)); len(r.body) != 1<<20 || r.header.Get("Content-Length") != "1048576" {
					t.Fatalf("archive: %d bytes, Content-Length %s", len(r.body), r.header.Get("Content-Length"))
				}
			},
		},
		{
			name: "fail next two with Retry-After",
			inject: func(o *Origin, on bool) {
				if on {
					o.SetRetryAfter("1")
					o.SetFailNextN(Versions, 2, 429)
				} else {
					o.SetRetryAfter("")
					o.SetFailNextN(Versions, 0, 0)
				}
			},
			check: func(t *testing.T, o *Origin, c *http.Client) {
				for i := range 2 {
					r := get(t, c, versionsURL(o))
					if r.status != 429 || r.header.Get("Retry-After") != "1" {
						t.Fatalf("request %d: %d, Retry-After %q", i, r.status, r.header.Get("Retry-After"))
					}
				}
				if r := get(t, c, versionsURL(o)); r.status != 200 || r.header.Get("Retry-After") != "" {
					t.Fatalf("third request: %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
				}
				if r := get(t, c, discoURL(o)); r.status != 200 {
					t.Fatalf("other kind affected: %d", r.status)
				}
			},
		},
		{
			name: "signed replacement bytes",
			inject: func(o *Origin, on bool) {
				var data []byte
				if on {
					data = []byte("not a zip, but signed")
				}
				o.SetArchiveBytes(ns, typ, ver, pl, data)
			},
			check: func(t *testing.T, o *Origin, c *http.Client) {
				want := []byte("not a zip, but signed")
				p := download(t, o, c)
				b, err := authenticate(t, c, p)
				if err != nil || !bytes.Equal(b, want) {
					t.Fatalf("err %v, archive %q, want the replacement authenticated", err, b)
				}
				if p.Shasum != sha(want) || o.SHA256(ns, typ, ver, pl) != sha(want) || !bytes.Equal(o.Archive(ns, typ, ver, pl), want) {
					t.Fatal("package JSON or accessors do not describe the replacement")
				}
				// Other platforms keep their generated archives.
				if _, err := zip.NewReader(bytes.NewReader(o.Archive(ns, typ, ver, "darwin_arm64")), int64(len(o.Archive(ns, typ, ver, "darwin_arm64")))); err != nil {
					t.Fatalf("other platform's archive: %v", err)
				}
			},
		},
		{
			name: "fail next is cancelled",
			inject: func(o *Origin, on bool) {
				if on {
					o.SetFailNextN(Download, 5, 502)
					o.SetFailNextN(Download, 0, 502) // cancels the count
				}
			},
			check: func(t *testing.T, o *Origin, c *http.Client) { download(t, o, c) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, c := start(t, Options{})
			tc.inject(o, true)
			tc.check(t, o, c)
			tc.inject(o, false)
			if _, err := authenticate(t, c, download(t, o, c)); err != nil {
				t.Fatalf("after turning the injection off: %v", err)
			}
		})
	}
}

func TestRequireToken(t *testing.T) {
	const token = "s3cret"
	o, c := start(t, Options{RequireToken: token, SeparateDownloadHost: true})
	bearer := []string{"Authorization", "Bearer " + token}
	versions := o.URL + "/v1/providers/" + ns + "/" + typ + "/versions"
	pkgURL := o.URL + "/v1/providers/" + ns + "/" + typ + "/" + ver + "/download/linux/amd64"

	tests := []struct {
		name   string
		url    string
		header []string
		want   int
	}{
		{"versions without token", versions, nil, 401},
		{"versions with wrong token", versions, []string{"Authorization", "Bearer nope"}, 401},
		{"package without token", pkgURL, nil, 401},
		{"versions with token", versions, bearer, 200},
		{"package with token", pkgURL, bearer, 200},
		{"discovery without token", o.URL + "/.well-known/terraform.json", nil, 200},
		{"archive without token", o.ArchiveURL(ns, typ, ver, pl), nil, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if r := get(t, c, tc.url, tc.header...); r.status != tc.want {
				t.Fatalf("status %d, want %d", r.status, tc.want)
			}
		})
	}
	if _, err := authenticate(t, c, download(t, o, c, bearer...)); err != nil {
		t.Fatal(err)
	}
	if got := o.LastAuthHeaders(Download); len(got) != 1 || got[0] != "Bearer "+token {
		t.Errorf("LastAuthHeaders(Download) = %q", got)
	}
	if got := o.LastAuthHeaders(Archive); got == nil || len(got) != 0 {
		t.Errorf("LastAuthHeaders(Archive) = %#v, want empty (request seen, no header)", got)
	}
	o.ResetHits()
	if got := o.LastAuthHeaders(Download); got != nil {
		t.Errorf("after ResetHits: %q", got)
	}
}

func TestGateArchives(t *testing.T) {
	o, c := start(t, Options{ArchiveSize: 256 << 10})
	truth := o.Archive(ns, typ, ver, pl)
	u := o.ArchiveURL(ns, typ, ver, pl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	release := o.GateArchives()
	started := o.ArchiveStarted()
	select {
	case <-started:
		t.Fatal("ArchiveStarted closed before any archive request")
	default:
	}
	const clients = 3
	resps := make([]*http.Response, clients)
	for i := range resps {
		r, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		if r.StatusCode != 200 || r.ContentLength != int64(len(truth)) {
			t.Fatalf("status %d, Content-Length %d, want %d", r.StatusCode, r.ContentLength, len(truth))
		}
		resps[i] = r
	}
	<-started
	o.WaitArchiveStarted()
	if err := o.WaitGated(ctx, clients); err != nil {
		t.Fatal(err)
	}
	half := len(truth) / 2
	first := make([][]byte, clients)
	for i, r := range resps {
		first[i] = make([]byte, half)
		if _, err := io.ReadFull(r.Body, first[i]); err != nil {
			t.Fatalf("reading the first half while gated: %v", err)
		}
	}
	release()
	release() // idempotent
	for i, r := range resps {
		rest, err := io.ReadAll(r.Body)
		if err != nil || !bytes.Equal(append(first[i], rest...), truth) {
			t.Fatalf("client %d: err %v, body differs from the archive", i, err)
		}
	}
	if r := get(t, c, u); !bytes.Equal(r.body, truth) {
		t.Fatal("archive after release differs")
	}
	if o.ArchiveHits(ns, typ, ver, pl) != clients+1 {
		t.Fatalf("ArchiveHits %d", o.ArchiveHits(ns, typ, ver, pl))
	}

	// A client that gives up while gated frees its slot.
	o.GateArchives()
	cctx, ccancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(cctx, http.MethodGet, u, nil)
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-o.ArchiveStarted()
	ccancel()
	io.Copy(io.Discard, r.Body) //nolint:errcheck // ends with the cancellation
	r.Body.Close()
	waitGatedUntil(ctx, t, o, 0)

	// Close aborts a gated response.
	r2, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Body.Close()
	if err := o.WaitGated(ctx, 1); err != nil {
		t.Fatal(err)
	}
	o.Close()
	if b, err := io.ReadAll(r2.Body); err == nil {
		t.Fatalf("read %d bytes and no error after Close", len(b))
	}
	if err := o.WaitGated(ctx, 100); err == nil {
		t.Fatal("WaitGated on a closed origin returned nil")
	}
}

func TestArchiveSize(t *testing.T) {
	tests := []struct {
		name string
		size int64
		want int // 0: minimal archive (no padding)
	}{
		{"default", 0, 0},
		{"below minimal", 100, 0},
		{"2 KiB", 2 << 10, 2 << 10},
		{"64 KiB", 64 << 10, 64 << 10},
		{"odd size", 100_003, 100_003},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := start(t, Options{ArchiveSize: tc.size})
			b := o.Archive(ns, typ, ver, pl)
			zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == 0 {
				if len(zr.File) != 1 || len(b) > 1024 {
					t.Fatalf("minimal archive: %d entries, %d bytes", len(zr.File), len(b))
				}
				return
			}
			if len(b) != tc.want {
				t.Fatalf("archive is %d bytes, want %d", len(b), tc.want)
			}
			if len(zr.File) != 2 || zr.File[0].Name != "terraform-provider-random_v3.6.0" {
				t.Fatalf("entries %v", zr.File)
			}
			// The padding does not compress: benchmarks move real bytes.
			var z bytes.Buffer
			fw, _ := flate.NewWriter(&z, flate.BestSpeed)
			fw.Write(b) //nolint:errcheck // memory
			fw.Close()
			if z.Len() < len(b)*9/10 {
				t.Fatalf("archive of %d bytes compresses to %d", len(b), z.Len())
			}
		})
	}

	t.Run("deterministic and unique", func(t *testing.T) {
		o1, _ := start(t, Options{ArchiveSize: 8 << 10})
		o2, _ := start(t, Options{ArchiveSize: 8 << 10})
		seen := map[string]string{}
		for _, v := range []string{"3.5.0", ver} {
			for _, plat := range platforms {
				a, b := o1.Archive(ns, typ, v, plat), o2.Archive(ns, typ, v, plat)
				if !bytes.Equal(a, b) {
					t.Fatalf("%s %s differs between origins", v, plat)
				}
				s := sha(a)
				if prev, dup := seen[s]; dup {
					t.Fatalf("%s %s has the same bytes as %s", v, plat, prev)
				}
				seen[s] = v + " " + plat
			}
		}
	})
}

func TestLatencyAndRate(t *testing.T) {
	o, c := start(t, Options{ArchiveSize: 32 << 10})
	truth := o.Archive(ns, typ, ver, pl)

	o.SetLatency(100 * time.Millisecond)
	begin := time.Now()
	get(t, c, o.URL+"/.well-known/terraform.json")
	if d := time.Since(begin); d < 100*time.Millisecond {
		t.Fatalf("request with 100ms latency took %v", d)
	}
	o.SetLatency(0)

	o.SetArchiveRate(256 << 10) // 32 KiB takes about 125ms
	begin = time.Now()
	r := get(t, c, o.ArchiveURL(ns, typ, ver, pl))
	if d := time.Since(begin); d < 80*time.Millisecond {
		t.Fatalf("throttled archive took %v", d)
	}
	if !bytes.Equal(r.body, truth) {
		t.Fatal("throttled body differs")
	}
}

func TestConcurrentClients(t *testing.T) {
	o, c := start(t, Options{ArchiveSize: 16 << 10})
	p := download(t, o, c)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				o.AddProvider(ns, "other", []string{"1.0.0"}, platforms) // mutations race with serving
				o.SetLatency(0)
			}
			sums, sig, arch := fetch(c, p.ShasumsURL), fetch(c, p.ShasumsSignatureURL), fetch(c, p.DownloadURL)
			if err := errors.Join(sums.err, sig.err, arch.err); err != nil {
				errs[i] = err
				return
			}
			if err := verify.CheckSignature(sums.body, sig.body, p.keys()); err != nil {
				errs[i] = err
				return
			}
			if sha(arch.body) != p.Shasum {
				errs[i] = errors.New("archive sha differs")
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := o.ArchiveHits(ns, typ, ver, pl); got != n {
		t.Fatalf("ArchiveHits %d, want %d", got, n)
	}
}

type fetched struct {
	body []byte
	err  error
}

// fetch is get for goroutines other than the test's.
func fetch(c *http.Client, u string) fetched {
	r, err := c.Get(u)
	if err != nil {
		return fetched{err: err}
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err == nil && r.StatusCode != 200 {
		err = errors.New(u + ": " + r.Status)
	}
	return fetched{b, err}
}

func TestStartValidates(t *testing.T) {
	if o, err := Start(Options{ArchiveSize: -1}); err == nil {
		o.Close()
		t.Fatal("negative ArchiveSize accepted")
	}
}

// waitGatedUntil waits until exactly n archive responses are gated.
func waitGatedUntil(ctx context.Context, t *testing.T, o *Origin, n int) {
	t.Helper()
	for {
		o.mu.Lock()
		got, changed := o.gated, o.gatedChanged
		o.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%d archive responses gated, want %d", got, n)
		}
	}
}

// TestSetSignedAt: a version's SHA256SUMS signature states the time
// chosen, and verifies with the advertised key; RemoveVersion unlists a
// version until it is added again.
func TestSetSignedAt(t *testing.T) {
	o, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.AddProvider("acme", "foo", []string{"1.0.0", "1.1.0"}, []string{"linux_amd64"})
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	o.SetSignedAt("acme", "foo", "1.0.0", at)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: o.CertPool()}}}
	get := func(path string) []byte {
		t.Helper()
		resp, err := c.Get(o.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return b
	}
	base := "/releases/acme/foo/1.0.0/terraform-provider-foo_1.0.0_SHA256SUMS"
	got, err := verify.SignatureTime(get(base), get(base+".sig"), []string{o.ArmoredPublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(at) {
		t.Fatalf("signed at %v, want %v", got, at)
	}
	o.RemoveVersion("acme", "foo", "1.1.0")
	if body := string(get("/v1/providers/acme/foo/versions")); strings.Contains(body, "1.1.0") {
		t.Fatalf("removed version still listed: %s", body)
	}
	o.AddProvider("acme", "foo", []string{"1.1.0"}, []string{"linux_amd64"})
	if body := string(get("/v1/providers/acme/foo/versions")); !strings.Contains(body, "1.1.0") {
		t.Fatalf("version added again not listed: %s", body)
	}
}

package fakeorigin

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
)

const (
	ns  = "hashicorp"
	typ = "random"
	ver = "3.6.0"
	pl  = "linux_amd64"
)

func start(t *testing.T, opts Options) (*Origin, *http.Client) {
	t.Helper()
	o, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	o.AddProvider(ns, typ, []string{"3.5.0", ver}, []string{pl, "darwin_arm64"})
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: o.CertPool()}}}
	t.Cleanup(c.CloseIdleConnections)
	return o, c
}

func get(t *testing.T, c *http.Client, u string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func getJSON(t *testing.T, c *http.Client, u string, v any) {
	t.Helper()
	status, h, b := get(t, c, u)
	if status != 200 {
		t.Fatalf("GET %s: %d %s", u, status, b)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q", u, ct)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

type dl struct {
	Filename            string `json:"filename"`
	DownloadURL         string `json:"download_url"`
	ShasumsURL          string `json:"shasums_url"`
	ShasumsSignatureURL string `json:"shasums_signature_url"`
	Shasum              string `json:"shasum"`
	SigningKeys         struct {
		GPGPublicKeys []struct {
			KeyID      string `json:"key_id"`
			ASCIIArmor string `json:"ascii_armor"`
		} `json:"gpg_public_keys"`
	} `json:"signing_keys"`
}

func download(t *testing.T, o *Origin, c *http.Client) dl {
	t.Helper()
	var d dl
	getJSON(t, c, o.URL+"/v1/providers/"+ns+"/"+typ+"/"+ver+"/download/linux/amd64", &d)
	return d
}

// checkSig reports whether the signature at d verifies the sums under the advertised key.
func checkSig(t *testing.T, c *http.Client, d dl) ([]byte, error) {
	t.Helper()
	_, _, sums := get(t, c, d.ShasumsURL)
	_, _, sig := get(t, c, d.ShasumsSignatureURL)
	keys, err := openpgp.ReadArmoredKeyRing(strings.NewReader(d.SigningKeys.GPGPublicKeys[0].ASCIIArmor))
	if err != nil {
		t.Fatal(err)
	}
	_, err = openpgp.CheckDetachedSignature(keys, bytes.NewReader(sums), bytes.NewReader(sig), nil)
	return sums, err
}

func TestWalk(t *testing.T) {
	o, c := start(t, Options{Hostnames: []string{"registry.example"}})

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
		vs.Versions[1].Platforms[0].OS != "linux" || vs.Versions[1].Platforms[0].Arch != "amd64" {
		t.Fatalf("versions = %+v", vs)
	}

	d := download(t, o, c)
	if d.Filename != "terraform-provider-random_3.6.0_linux_amd64.zip" || !strings.HasPrefix(d.DownloadURL, o.URL+"/releases/") {
		t.Fatalf("download = %+v", d)
	}
	key := d.SigningKeys.GPGPublicKeys[0].KeyID
	if len(key) != 16 || strings.ToUpper(key) != key {
		t.Fatalf("key_id %q", key)
	}
	sums, err := checkSig(t, c, d)
	if err != nil {
		t.Fatalf("signature: %v", err)
	}
	if want := d.Shasum + "  " + d.Filename + "\n"; !strings.Contains(string(sums), want) || strings.Count(string(sums), "\n") != 2 {
		t.Fatalf("SHA256SUMS %q lacks %q or has wrong line count", sums, want)
	}

	status, h, zb := get(t, c, d.DownloadURL)
	if status != 200 || h.Get("Content-Type") != "application/zip" || h.Get("Content-Length") == "" {
		t.Fatalf("archive: %d %v", status, h)
	}
	sum := sha256.Sum256(zb)
	if hex.EncodeToString(sum[:]) != d.Shasum || d.Shasum != o.SHA256(ns, typ, ver, pl) || !bytes.Equal(zb, o.Archive(ns, typ, ver, pl)) {
		t.Fatal("archive sha does not match download JSON / SHA256")
	}
	zr, err := zip.NewReader(bytes.NewReader(zb), int64(len(zb)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 1 || zr.File[0].Name != "terraform-provider-random_v3.6.0" || zr.File[0].Mode().Perm() != 0o755 {
		t.Fatalf("zip entries: %+v", zr.File)
	}
	if o.SHA256(ns, typ, ver, "darwin_arm64") == d.Shasum {
		t.Fatal("archives of different platforms are identical")
	}

	for k, want := range map[Kind]int{Discovery: 1, Versions: 1, Download: 1, Shasums: 1, Signature: 1, Archive: 1} {
		if got := o.Hits(k); got != want {
			t.Errorf("Hits(%s) = %d, want %d", k, got, want)
		}
	}
	if o.TotalHits() != 6 || o.ArchiveHits(ns, typ, ver, pl) != 1 {
		t.Errorf("TotalHits %d ArchiveHits %d", o.TotalHits(), o.ArchiveHits(ns, typ, ver, pl))
	}
}

func TestNotFound(t *testing.T) {
	o, c := start(t, Options{})
	for name, path := range map[string]string{
		"unknown provider": "/v1/providers/acme/none/versions",
		"unknown version":  "/v1/providers/" + ns + "/" + typ + "/9.9.9/download/linux/amd64",
		"unknown platform": "/v1/providers/" + ns + "/" + typ + "/" + ver + "/download/plan9/amd64",
		"unknown archive":  "/releases/" + ns + "/" + typ + "/" + ver + "/terraform-provider-random_3.6.0_plan9_amd64.zip",
	} {
		t.Run(name, func(t *testing.T) {
			if status, _, _ := get(t, c, o.URL+path); status != 404 {
				t.Fatalf("status %d", status)
			}
		})
	}
}

func TestSeparateDownloadHost(t *testing.T) {
	o, c := start(t, Options{SeparateDownloadHost: true})
	if o.DownloadAddr == o.Addr {
		t.Fatal("DownloadAddr equals Addr")
	}
	d := download(t, o, c)
	for _, u := range []string{d.DownloadURL, d.ShasumsURL, d.ShasumsSignatureURL} {
		pu, err := url.Parse(u)
		if err != nil || pu.Scheme != "https" || pu.Host != o.DownloadAddr {
			t.Fatalf("URL %q not on download host %s", u, o.DownloadAddr)
		}
	}
	if _, err := checkSig(t, c, d); err != nil {
		t.Fatal(err)
	}
	if status, _, b := get(t, c, d.DownloadURL); status != 200 || len(b) == 0 {
		t.Fatalf("archive from download host: %d", status)
	}
}

func TestInjections(t *testing.T) {
	o, c := start(t, Options{ArchiveSize: 64 << 10})
	d := download(t, o, c)
	truth := o.Archive(ns, typ, ver, pl)
	if len(truth) < 60<<10 || len(truth) > 70<<10 {
		t.Fatalf("padded archive is %d bytes", len(truth))
	}

	o.TamperArchive(ns, typ, ver, pl, true)
	_, _, b := get(t, c, d.DownloadURL)
	if len(b) != len(truth) || bytes.Equal(b, truth) || !bytes.Equal(b[:len(b)/2], truth[:len(b)/2]) {
		t.Fatal("tampered archive: want same length, same first half, different bytes")
	}
	if download(t, o, c).Shasum != o.SHA256(ns, typ, ver, pl) {
		t.Fatal("tampering changed advertised shasum")
	}
	o.TamperArchive(ns, typ, ver, pl, false)

	o.SetWrongSigningKey(true)
	if _, err := checkSig(t, c, d); err == nil {
		t.Fatal("signature verified with wrong signing key")
	}
	o.SetWrongSigningKey(false)

	o.OmitFromSums(ns, typ, ver, pl, true)
	if sums, err := checkSig(t, c, d); err != nil || strings.Contains(string(sums), d.Filename) {
		t.Fatalf("omitted line still present (err %v): %q", err, sums)
	}
	o.OmitFromSums(ns, typ, ver, pl, false)

	o.SetShasumOverride(ns, typ, ver, pl, strings.Repeat("0", 64))
	if got := download(t, o, c).Shasum; got != strings.Repeat("0", 64) {
		t.Fatalf("override ignored: %s", got)
	}
	o.SetShasumOverride(ns, typ, ver, pl, "")

	o.SetKindStatus(Versions, 503)
	if status, h, _ := get(t, c, o.URL+"/v1/providers/"+ns+"/"+typ+"/versions"); status != 503 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("SetKindStatus: %d", status)
	}
	if status, _, _ := get(t, c, o.URL+"/.well-known/terraform.json"); status != 200 {
		t.Fatalf("other kinds affected: %d", status)
	}
	o.SetKindStatus(Versions, 0)
	o.SetDown(500)
	if status, _, _ := get(t, c, o.URL+"/.well-known/terraform.json"); status != 500 {
		t.Fatalf("SetDown: %d", status)
	}
	o.SetDown(0)
	if got := o.Hits(Versions); got != 1 {
		t.Fatalf("failed request not counted: Hits(Versions) = %d", got)
	}
}

func TestGateArchives(t *testing.T) {
	o, c := start(t, Options{ArchiveSize: 256 << 10})
	d := download(t, o, c)
	truth := o.Archive(ns, typ, ver, pl)
	release := o.GateArchives()
	resp, err := c.Get(d.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength != int64(len(truth)) {
		t.Fatalf("Content-Length %d, want %d", resp.ContentLength, len(truth))
	}
	o.WaitArchiveStarted()
	half := len(truth) / 2
	first := make([]byte, half)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	release()
	release() // idempotent
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(first, rest...), truth) {
		t.Fatal("gated body differs from archive")
	}
	// After release, archives are no longer gated.
	if _, _, b := get(t, c, d.DownloadURL); !bytes.Equal(b, truth) {
		t.Fatal("ungated body differs")
	}
}

func TestArchiveRate(t *testing.T) {
	o, c := start(t, Options{ArchiveSize: 32 << 10})
	d := download(t, o, c)
	o.SetArchiveRate(1 << 20)
	if _, _, b := get(t, c, d.DownloadURL); !bytes.Equal(b, o.Archive(ns, typ, ver, pl)) {
		t.Fatal("throttled body differs")
	}
}

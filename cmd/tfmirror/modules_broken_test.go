package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestBrokenModuleSourcesAnswered502: a module whose source host sends
// what is no package (not gzip, cut short, an entry of a type modules
// cannot have, a name no file system takes, a Git tree Git refuses, a ref
// the repository does not have, a //SUBDIR the package does not have) is
// the origin's failure: its package and its zip are answered 502 naming
// why, not 500 "internal error", which says the mirror is at fault and
// tells the client nothing.
func TestBrokenModuleSourcesAnswered502(t *testing.T) {
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Skip(err)
	}
	e := newE2E(t, fakeorigin.Options{})
	e.stop()
	o := e.origin
	good := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte(strings.Repeat("# a module\n", 500))})
	var hardlink bytes.Buffer
	gz := gzip.NewWriter(&hardlink)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	gz.Close()
	tarballs := map[string][]byte{
		"notgzip":    []byte("<html>not an archive</html>"),
		"cutshort":   good[:len(good)/2],
		"hardlink":   hardlink.Bytes(),
		"longname":   fakeorigin.TarGzEntries([]fakeorigin.TarEntry{{Name: strings.Repeat("n", 300) + ".tf", Body: "# x\n"}}),
		"longtarget": fakeorigin.TarGzEntries([]fakeorigin.TarEntry{{Name: "main.tf", Body: "# x\n"}, {Name: "l", Type: tar.TypeSymlink, Target: strings.Repeat("./", 2046) + "main"}}),
	}
	for name, data := range tarballs {
		o.AddTarball(name+".tar.gz", data)
		o.AddModule("acme", name, "aws", "1.0.0", o.TarballURL(name+".tar.gz"))
	}
	o.AddTarball("good.tar.gz", good)
	o.AddModule("acme", "nosubdir", "aws", "1.0.0", o.TarballURL("good.tar.gz")+"//modules/vpc")
	if _, err := o.AddGitTree("dotgit", fakeorigin.GitTree{Files: map[string][]byte{"main.tf": []byte("# x\n"), ".GIT/config": []byte("[core]\n")}}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "gitdotgit", "aws", "1.0.0", "git::"+o.GitURL("dotgit")+"?ref=v1.0.0")
	// A link's target of 5,000 bytes: refused, not cut to its first 4,096.
	if _, err := o.AddGitTree("longtarget", fakeorigin.GitTree{Files: map[string][]byte{"main.tf": []byte("# x\n")},
		Links: map[string]string{"l": strings.Repeat("./", 2496) + "main.tf"}}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "gitlongtarget", "aws", "1.0.0", "git::"+o.GitURL("longtarget")+"?ref=v1.0.0")
	if _, err := o.AddGitRepo("plain", map[string][]byte{"main.tf": []byte("# x\n")}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "gitnoref", "aws", "1.0.0", "git::"+o.GitURL("plain")+"?ref=v9.9.9")
	e.startMirror(t.TempDir())
	ca, err := os.ReadFile(e.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer c.CloseIdleConnections()
	for name, why := range map[string]string{
		"notgzip":       "not a gzip archive",
		"cutshort":      "unexpected EOF",
		"hardlink":      "of a type modules cannot have",
		"longname":      "more than the 255 taken",
		"longtarget":    "longer than 4095 bytes",
		"nosubdir":      "no directory",
		"gitdotgit":     "invalid path",
		"gitlongtarget": "longer than 4095 bytes",
		"gitnoref":      "no tag, branch or commit",
	} {
		t.Run(name, func(t *testing.T) {
			base := e.url + "registry/" + tfRegistry + "/v1/modules/acme/" + name + "/aws/1.0.0/"
			resp, err := c.Get(base + "download")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc := resp.Header.Get("X-Terraform-Get")
			u, err := url.Parse(base)
			if err != nil || loc == "" {
				t.Fatalf("download answer %d, location %q", resp.StatusCode, loc)
			}
			rel, _, _ := strings.Cut(loc, "//")
			pkgURL, _ := u.Parse(strings.TrimPrefix(rel, "./"))
			if q := strings.SplitN(loc, "?", 2); len(q) == 2 {
				pkgURL.RawQuery = q[1]
			}
			resp, err = c.Get(pkgURL.String())
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway || !bytes.Contains(body, []byte(why)) {
				t.Errorf("answered %d %s, want 502 saying %q", resp.StatusCode, body, why)
			}
		})
	}
}

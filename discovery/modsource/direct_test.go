package modsource

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A package URL (OpenTofu's direct download answer) is a URL, not
// go-getter syntax: nothing of it is consumed, its package is the URL as
// it is, and it must be https, with a host, without credentials or a
// fragment.
func TestParseDirect(t *testing.T) {
	for _, in := range []string{
		"https://registry.example.test/v1/modules/acme/vpc/aws/1.0.0/package",
		"https://registry.example.test/pkg//x.tar.gz?archive=zip&sig=a%2Fb",
	} {
		a, err := ParseDirect(in)
		if err != nil || a.Kind != KindArchive || a.URL != in || a.Subdir != "" || a.Format != "" || a.Package() != in {
			t.Errorf("ParseDirect(%q) = %+v (package %q), %v; want the URL as it is", in, a, a.Package(), err)
		}
	}
	for _, in := range []string{
		"http://registry.example.test/pkg",
		"git::https://registry.example.test/pkg.git",
		"https://user:pw@registry.example.test/pkg",
		"https://registry.example.test/pkg#frag",
		"/pkg",
		"https:pkg",
	} {
		if a, err := ParseDirect(in); !errors.Is(err, ErrUnsupported) {
			t.Errorf("ParseDirect(%q) = %+v, %v; want it refused", in, a, err)
		}
	}
}

// A package URL's archive is what its bytes are, as OpenTofu reads it: a
// zip, a tar.gz or a tar.bz2 whatever its name; a tar.xz is refused as
// unsupported, anything else as no package.
func TestFetchPackageURLByItsBytes(t *testing.T) {
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	files := map[string][]byte{"main.tf": []byte("# m\n"), "sub/x.tf": []byte("# x\n")}
	o.AddTarball("a", fakeorigin.TarGz(files))
	o.AddTarball("b", fakeorigin.Zip(files))
	o.AddTarball("c.zip", fakeorigin.TarGz(files)) // the name says zip, the bytes tar.gz
	o.AddTarball("xz", []byte("\xfd7zXZ\x00\x00\x04rest"))
	o.AddTarball("text", []byte("<html>sign in</html>"))
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte("not a tar"))
	w.Close()
	o.AddTarball("gz", gz.Bytes())
	f := newFetcher(t, o, defaultLimits)
	var want []byte
	for _, name := range []string{"a", "b", "c.zip"} {
		a, err := ParseDirect(o.TarballURL(name))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := f.Fetch(context.Background(), a, &buf); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := readTarGz(t, buf.Bytes()); got["sub/x.tf"] != "# x\n" || got["main.tf"] != "# m\n" {
			t.Errorf("%s: %v", name, got)
		}
		if want == nil {
			want = buf.Bytes()
		} else if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s: one tree normalized to other bytes", name)
		}
	}
	for name, check := range map[string]func(error) bool{
		"xz":   func(err error) bool { return errors.Is(err, ErrUnsupported) && strings.Contains(err.Error(), "xz") },
		"text": func(err error) bool { return errors.Is(err, ErrBadPackage) },
		"gz":   func(err error) bool { return errors.Is(err, ErrBadPackage) },
	} {
		a, err := ParseDirect(o.TarballURL(name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Fetch(context.Background(), a, &bytes.Buffer{}); !check(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

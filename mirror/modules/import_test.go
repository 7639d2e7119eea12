package modules_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

func opener(b []byte) func(context.Context) (io.ReadCloser, int64, error) {
	return func(context.Context) (io.ReadCloser, int64, error) {
		return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// tarGzOf is a tar.gz of one entry h (with body for a file).
func tarGzOf(t *testing.T, h *tar.Header, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	io.WriteString(tw, body)
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// An import never changes what the mirror serves of a module version it
// has a record of: another location or other bytes are refused as an
// integrity failure; the same package is present.
func TestImportModuleJoinsTheCachedRecord(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}})
	loc := oneTarball(h, "0.1.0")
	pkg, err := h.Engine.Modules().OpenModule(context.Background(), harness.TarballModule, enginetest.MustModuleVersion(t, "0.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(pkg.Content())
	pkg.Close()
	other := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# two\n")})

	for _, tc := range []struct {
		name string
		in   modules.Imported
		want string
	}{
		{"other bytes", modules.Imported{Location: loc, SHA256: sha256Hex(other), Open: opener(other)}, "the cache holds"},
		{"other bytes, no sha256 vouched for", modules.Imported{Location: loc, Open: opener(other)}, "the cache holds"},
		{"another location", modules.Imported{Location: loc + "//sub", SHA256: sha256Hex(want), Open: opener(want)}, "the cache holds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Module, tc.in.Version = harness.TarballModule, "0.1.0"
			_, err := h.Engine.Modules().ImportModule(context.Background(), tc.in)
			if !errors.Is(err, verify.ErrIntegrity) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ImportModule: %v, want an integrity error saying %q", err, tc.want)
			}
			pkg, err := h.Engine.Modules().OpenModule(context.Background(), harness.TarballModule, enginetest.MustModuleVersion(t, "0.1.0"))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(pkg.Content())
			pkg.Close()
			if !bytes.Equal(got, want) || pkg.Source != records.Hit {
				t.Error("the mirror serves another package after a refused import")
			}
		})
	}
	// The same version in the other spelling joins the same record.
	for _, spelled := range []string{"0.1.0", "v0.1.0"} {
		res, err := h.Engine.Modules().ImportModule(context.Background(), modules.Imported{Module: harness.TarballModule, Version: spelled, Location: loc,
			SHA256: sha256Hex(want), Open: opener(want)})
		if err != nil || !res.Present || res.Size != int64(len(want)) {
			t.Errorf("importing the cached package as %s: %+v, %v", spelled, res, err)
		}
	}
	// A version that does not parse is refused, and leaves no record.
	for _, bad := range []string{"latest", "0.1.0-", "../0.1.0", ""} {
		if _, err := h.Engine.Modules().ImportModule(context.Background(), modules.Imported{Module: harness.TarballModule, Version: bad, Location: loc,
			SHA256: sha256Hex(want), Open: opener(want)}); err == nil {
			t.Errorf("ImportModule of version %q: accepted", bad)
		}
	}
	n := 0
	h.Engine.Modules().ListCachedModules(func(modules.Cached) error { n++; return nil })
	if n != 1 {
		t.Errorf("%d module records after the imports, want the one version's", n)
	}
}

// An imported package is bounded and checked as a fetched one: it must
// unpack within the module limits, with its entries inside it; a local
// module is never imported under an allowed origin's host. A refused
// import leaves nothing.
func TestImportModuleRefusesBadPackages(t *testing.T) {
	t.Parallel()
	limits := modsource.Limits{MaxDownloadBytes: 4 << 10, MaxTreeBytes: 8 << 10, MaxEntries: 10}
	scratchDir := t.TempDir()
	h := harness.New(t, harness.Options{Config: harness.Config{Offline: true, ScratchDir: scratchDir, ModuleLimits: limits}})
	bomb := tarGzOf(t, &tar.Header{Name: "zeros.tf", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 20}, strings.Repeat("\x00", 1<<20))
	escape := tarGzOf(t, &tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "../../etc/passwd"}, "")
	ok := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# ok\n")})
	local := addrs.Module{Hostname: "tf.corp.example", Namespace: "platform", Name: "net", System: "aws"}
	for _, tc := range []struct {
		name string
		in   modules.Imported
		want func(error) bool
	}{
		{"not a tar.gz", modules.Imported{Module: harness.TarballModule, Location: "https://example.test/m.tar.gz", Open: opener([]byte("#!/bin/sh\n"))},
			func(err error) bool { return errors.Is(err, verify.ErrIntegrity) }},
		{"a bomb", modules.Imported{Module: harness.TarballModule, Location: "https://example.test/m.tar.gz", Open: opener(bomb)},
			func(err error) bool { var le *modsource.LimitError; return errors.As(err, &le) }},
		{"a link out of the package", modules.Imported{Module: harness.TarballModule, Location: "https://example.test/m.tar.gz", Open: opener(escape)},
			func(err error) bool {
				return errors.Is(err, verify.ErrIntegrity) && strings.Contains(err.Error(), "points outside")
			}},
		// Under .git, which a fetch leaves out of a package and the check
		// skipped: the package imported is served as it is, link and all.
		{"a link out of the package under .git", modules.Imported{Module: harness.TarballModule, Location: "https://example.test/m.tar.gz",
			Open: opener(tarGzOf(t, &tar.Header{Name: ".git/link", Typeflag: tar.TypeSymlink, Linkname: "../../../etc/passwd"}, ""))},
			func(err error) bool {
				return errors.Is(err, verify.ErrIntegrity) && strings.Contains(err.Error(), ".git")
			}},
		// Checked in scratchDir/tfmirror-module-check-*: one level up is
		// scratchDir, where the chain would write victim.txt and more.
		{"the link chain", modules.Imported{Module: harness.TarballModule, Location: "https://example.test/m.tar.gz", Open: opener(fakeorigin.LinkChainTarGz(1))},
			func(err error) bool {
				return errors.Is(err, verify.ErrIntegrity) && strings.Contains(err.Error(), "lies under the link")
			}},
		{"a //SUBDIR the package lacks", modules.Imported{Module: harness.TarballModule, Location: "https://example.test/m.tar.gz//sub", Open: opener(ok)},
			func(err error) bool {
				return errors.Is(err, verify.ErrIntegrity) && strings.Contains(err.Error(), `no directory "sub"`)
			}},
		{"a location the mirror cannot fetch", modules.Imported{Module: harness.TarballModule, Location: "s3::https://bucket.example.test/m.zip", Open: opener(ok)},
			func(err error) bool { return errors.Is(err, modsource.ErrUnsupported) }},
		{"the bytes are not what the import vouches for", modules.Imported{Module: harness.TarballModule, Location: "https://example.test/m.tar.gz", SHA256: sha256Hex(bomb), Open: opener(ok)},
			func(err error) bool {
				return errors.Is(err, verify.ErrIntegrity) && strings.Contains(err.Error(), "the import vouches for")
			}},
		{"a local module under an allowed origin", modules.Imported{Module: harness.TarballModule, Local: true, Open: opener(ok)},
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "is an allowed origin") }},
		{"a local module under another host, too large", modules.Imported{Module: local, Local: true, Open: opener(bomb)},
			func(err error) bool { var le *modsource.LimitError; return errors.As(err, &le) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Version = "0.1.0"
			if _, err := h.Engine.Modules().ImportModule(context.Background(), tc.in); !tc.want(err) {
				t.Fatalf("ImportModule: %v", err)
			}
			if _, _, err := h.Engine.Modules().ModuleVersions(context.Background(), tc.in.Module); err == nil {
				t.Error("the refused module is listed")
			}
			n := 0
			h.Engine.Modules().ListCachedModules(func(modules.Cached) error { n++; return nil })
			if n != 0 {
				t.Errorf("%d module records after a refused import", n)
			}
			if ents, _ := os.ReadDir(scratchDir); len(ents) > 0 {
				t.Errorf("the refused import left or wrote %v in the scratch directory", ents)
			}
		})
	}
}

// An export carries a module's location without its secrets (a
// pre-signed URL's signature): imported into a mirror whose record has
// the whole location, it joins that record, which keeps the whole one.
func TestImportModuleRedactedLocationJoinsTheRecord(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}})
	o := h.Origin
	data := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")})
	o.AddTarball("m.tar.gz", data)
	o.AddTarball("n.tar.gz", data)
	ctx := context.Background()
	location := func(v string) string {
		if v == "0.2.0" {
			return o.TarballURL("n.tar.gz") + "?X-Amz-Signature=" + strings.Repeat("cd", 32)
		}
		return o.TarballURL("m.tar.gz") + "?X-Amz-Signature=" + strings.Repeat("ab", 32) + "&X-Amz-Credential=AKIAEXAMPLE" + v
	}
	// Both listed from the start: a version the list the origin answered
	// a moment ago lacks is not found.
	for _, v := range []string{"0.1.0", "0.2.0"} {
		o.AddModule("acme", "tarball", "aws", v, location(v))
	}
	for _, v := range []string{"0.1.0", "0.2.0"} {
		full := location(v)
		if v == "0.1.0" {
			pkg, err := h.Engine.Modules().OpenModule(ctx, harness.TarballModule, enginetest.MustModuleVersion(t, v)) // the record and the package
			if err != nil {
				t.Fatal(err)
			}
			data, err = io.ReadAll(pkg.Content()) // as normalized
			pkg.Close()
			if err != nil {
				t.Fatal(err)
			}
		} else if _, err := h.Engine.Modules().ModuleLocation(ctx, harness.TarballModule, enginetest.MustModuleVersion(t, v)); err != nil { // the record only
			t.Fatal(err)
		}
		shown := redact.Location(full)
		if strings.Contains(shown, "X-Amz") {
			t.Fatalf("redact.Location kept the signature: %s", shown)
		}
		res, err := h.Engine.Modules().ImportModule(ctx, modules.Imported{Module: harness.TarballModule, Version: v, Location: shown,
			SHA256: sha256Hex(data), Open: opener(data)})
		if err != nil {
			t.Fatalf("%s: importing with the location as exported: %v", v, err)
		}
		if v == "0.1.0" && !res.Present {
			t.Errorf("%s: the cached package is not present", v)
		}
		rec, err := h.Engine.Modules().ModuleLocation(ctx, harness.TarballModule, enginetest.MustModuleVersion(t, v))
		if err != nil {
			t.Fatal(err)
		}
		if rec.Location != full || rec.SHA256 != sha256Hex(data) {
			t.Errorf("%s: the record is %+v, want the whole location %s and the package's sha256", v, rec, full)
		}
	}
}

// An import of a module version forgets what is remembered of the
// module (mirror.Config.NotFoundTTL): the next request for it asks the
// origin again.
func TestImportModuleForgetsNotFound(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir(), NotFoundTTL: time.Hour}})
	m := harness.TarballModule
	for range 2 {
		if _, _, err := h.Engine.Modules().ModuleVersions(context.Background(), m); !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("before the import: %v, want not found", err)
		}
	}
	if n := h.Origin.Hits(fakeorigin.ModuleVersions); n != 1 {
		t.Fatalf("before the import the origin was asked %d times, want 1", n)
	}
	pkg := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")})
	if _, err := h.Engine.Modules().ImportModule(context.Background(), modules.Imported{Module: m, Version: "0.1.0",
		Location: h.Origin.TarballURL("m.tar.gz"), SHA256: sha256Hex(pkg), Open: opener(pkg)}); err != nil {
		t.Fatalf("ImportModule: %v", err)
	}
	if e := h.Engine.NotFound().Entries(m.Hostname); e != 0 {
		t.Fatalf("%d answers remembered after the import, want 0", e)
	}
	h.Engine.Modules().ModuleVersions(context.Background(), m)
	if n := h.Origin.Hits(fakeorigin.ModuleVersions); n != 2 {
		t.Fatalf("after the import the origin was asked %d times in all, want 2", n)
	}
}

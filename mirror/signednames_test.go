package mirror

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// An origin's package answer is believed for nothing a signature does not
// cover: the archive's name is derived from the type, the version and the
// platform asked, and the answer must give that filename, and that
// platform's os and arch, and point at the SHA256SUMS of that version. An
// answer that does not is refused like any verification failure (counted,
// 502 at the front door), and nothing of it is cached or served.
func TestOriginAnswersMustNameTheRelease(t *testing.T) {
	t.Parallel()
	const version, asked = "3.5.0", "linux_amd64"
	tests := []struct {
		name    string
		rewrite func(h *harness, pkg *discovery.Package)
		reason  verify.Reason // "": served
	}{
		{name: "the origin's own answer"},
		{name: "the filename of another platform", reason: verify.ReasonName, rewrite: func(h *harness, pkg *discovery.Package) {
			pkg.Filename = h.origin.Filename(ns, typ, version, "darwin_arm64")
		}},
		{name: "another platform's package", reason: verify.ReasonName, rewrite: func(h *harness, pkg *discovery.Package) {
			pkg.Filename = h.origin.Filename(ns, typ, version, "darwin_arm64")
			pkg.SHASum = h.origin.SHA256(ns, typ, version, "darwin_arm64")
			pkg.DownloadURL = h.origin.ArchiveURL(ns, typ, version, "darwin_arm64")
		}},
		{name: "the os and arch of another platform", reason: verify.ReasonName, rewrite: func(h *harness, pkg *discovery.Package) {
			pkg.OS, pkg.Arch = "darwin", "arm64"
		}},
		{name: "the filename of another version", reason: verify.ReasonName, rewrite: func(h *harness, pkg *discovery.Package) {
			pkg.Filename = h.origin.Filename(ns, typ, "3.4.0", asked)
		}},
		{name: "another version's package and SHA256SUMS", reason: verify.ReasonName, rewrite: func(h *harness, pkg *discovery.Package) {
			pkg.Filename = h.origin.Filename(ns, typ, "3.4.0", asked)
			pkg.SHASum = h.origin.SHA256(ns, typ, "3.4.0", asked)
			pkg.DownloadURL = h.origin.ArchiveURL(ns, typ, "3.4.0", asked)
			pkg.SHASumsURL = strings.ReplaceAll(pkg.SHASumsURL, version, "3.4.0")
			pkg.SHASumsSignatureURL = strings.ReplaceAll(pkg.SHASumsSignatureURL, version, "3.4.0")
		}},
		{name: "a filename with a directory", reason: verify.ReasonName, rewrite: func(h *harness, pkg *discovery.Package) {
			pkg.Filename = "../" + pkg.Filename
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			met := &refusalMetrics{}
			var h *harness
			h = newHarness(t, harnessOptions{cfg: Config{Metrics: met}, origin: fakeorigin.Options{ReleaseManifest: true}, wrapOrigin: func(o Origin) Origin {
				return packageRewriter{Origin: o, rewrite: func(pl string, pkg *discovery.Package) {
					if tc.rewrite != nil && pl == asked {
						tc.rewrite(h, pkg)
					}
				}}
			}})
			h.origin.AddProvider(ns, typ, []string{"3.4.0", version}, platforms)
			pkg, err := h.packages(version, asked)
			got := h.read(t.Context(), version, asked)
			if tc.reason == "" {
				if err != nil || got.err != nil || !bytes.Equal(got.body, h.origin.Archive(ns, typ, version, asked)) {
					t.Fatalf("package metadata: %v; archive: %v", err, got.err)
				}
				if len(pkg.Archives) != 1 || pkg.Archives[0].Filename != addrs.ArchiveName(typ, version, asked) {
					t.Errorf("served %+v, want the archive named %s", pkg.Archives, addrs.ArchiveName(typ, version, asked))
				}
				return
			}
			var verr *verify.Error
			if !errors.As(err, &verr) || verr.Reason != tc.reason {
				t.Fatalf("package metadata: %v, want a %s failure", err, tc.reason)
			}
			if want := h.provider().String() + " " + version + " " + asked; !strings.Contains(err.Error(), want) {
				t.Errorf("the error %q does not name the package asked for, %s", err, want)
			}
			if n := met.count(string(tc.reason)); n < 1 {
				t.Errorf("%s failures counted: %d", tc.reason, n)
			}
			if got.err == nil || got.opened {
				t.Errorf("the archive was served (%d bytes)", len(got.body))
			}
			if _, err := h.engine.AirGap().Stored(h.provider(), mustVersion(t, version)); !errors.Is(err, records.ErrNotCached) {
				t.Errorf("Stored after the refusal: %v, want ErrNotCached", err)
			}
			if n := h.origin.Hits(fakeorigin.Archive); n != 0 {
				t.Errorf("%d archives downloaded", n)
			}
		})
	}
}

// What an import says around the signed SHA256SUMS is believed for nothing
// a signature does not cover, whatever vouched for the input: a signed
// release imported as another version, another platform or another type
// of provider is refused, naming the document or package at fault and
// what it was given as, and nothing of it is stored or served.
func TestImportMustNameTheRelease(t *testing.T) {
	t.Parallel()
	src := newHarness(t, harnessOptions{origin: fakeorigin.Options{ReleaseManifest: true}})
	src.origin.AddProvider(ns, typ, []string{"3.5.0"}, platforms)
	src.origin.AddProvider(ns, "null", []string{"3.5.0"}, platforms)
	evidence := func(p addrs.Provider) *records.Evidence {
		ev, err := src.engine.Evidence(t.Context(), p, mustVersion(t, "3.5.0"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	random := evidence(src.provider())
	null := evidence(addrs.Provider{Hostname: originHost, Namespace: ns, Type: "null"})
	body := func(typ string) func(pl string) []byte {
		return func(pl string) []byte { return src.origin.Archive(ns, typ, "3.5.0", pl) }
	}
	darwin, _ := random.Platform("darwin_arm64")
	// asLinux gives the linux_amd64 package darwin_arm64's archive, with
	// edit applied to what the input says of it.
	asLinux := func(edit func(pkg *imports.Package)) func(in *imports.Imported) {
		return func(in *imports.Imported) {
			for i := range in.Packages {
				if in.Packages[i].Platform != "linux_amd64" {
					continue
				}
				pkg := &in.Packages[i]
				pkg.Filename, pkg.OS, pkg.Arch, pkg.Shasum = darwin.Filename, darwin.OS, darwin.Arch, darwin.Shasum
				data := src.origin.Archive(ns, typ, "3.5.0", "darwin_arm64")
				pkg.Open = func(context.Context) (io.ReadCloser, int64, error) {
					return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
				}
				if edit != nil {
					edit(pkg)
				}
			}
			in.Packages = in.Packages[1:2] // linux_amd64 only
		}
	}
	linuxName := addrs.ArchiveName(typ, "3.5.0", "linux_amd64")
	tests := []struct {
		name    string
		ev      *records.Evidence
		body    func(pl string) []byte
		claims  string // the version it is imported as
		edit    func(in *imports.Imported)
		reason  verify.Reason // "": imported
		doc     bool          // the error is the document's, else linux_amd64's package
		message string
	}{
		{name: "the signed release", ev: random, body: body(typ), claims: "3.5.0"},
		{name: "another version", ev: random, body: body(typ), claims: "9.9.9", reason: verify.ReasonName, doc: true,
			message: "SHA256SUMS is of terraform-provider-random 3.5.0 (it lists terraform-provider-random_3.5.0_darwin_arm64.zip), not of version 9.9.9"},
		{name: "another platform", ev: random, body: body(typ), claims: "3.5.0", edit: asLinux(nil), reason: verify.ReasonName,
			message: darwin.Filename + " is given as the package of linux_amd64; the signed name of that package is " + linuxName},
		{name: "another platform, its os and arch edited", ev: random, body: body(typ), claims: "3.5.0", reason: verify.ReasonName,
			edit:    asLinux(func(pkg *imports.Package) { pkg.OS, pkg.Arch = "linux", "amd64" }),
			message: darwin.Filename + " is given as the package of linux_amd64"},
		{name: "another platform, its names edited", ev: random, body: body(typ), claims: "3.5.0", reason: verify.ReasonChecksum,
			edit:    asLinux(func(pkg *imports.Package) { pkg.Filename, pkg.OS, pkg.Arch = linuxName, "linux", "amd64" }),
			message: "SHA256SUMS says " + src.origin.SHA256(ns, typ, "3.5.0", "linux_amd64")},
		{name: "another platform, its names and shasum edited", ev: random, body: body(typ), claims: "3.5.0", reason: verify.ReasonChecksum,
			edit: asLinux(func(pkg *imports.Package) {
				pkg.Filename, pkg.OS, pkg.Arch, pkg.Shasum = linuxName, "linux", "amd64", src.origin.SHA256(ns, typ, "3.5.0", "linux_amd64")
			}),
			message: src.origin.SHA256(ns, typ, "3.5.0", "darwin_arm64")},
		{name: "another type", ev: null, body: body("null"), claims: "3.5.0", reason: verify.ReasonName, doc: true,
			message: "SHA256SUMS lists terraform-provider-null_3.5.0_darwin_arm64.zip, which is no file of a release of terraform-provider-random"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			met := &refusalMetrics{}
			dst := newHarness(t, harnessOptions{cfg: Config{Offline: true, Metrics: met}})
			in := enginetest.ImportedFrom(tc.ev, tc.body)
			in.Provider, in.Version = src.provider(), mustVersion(t, tc.claims)
			if tc.edit != nil {
				tc.edit(&in)
			}
			_, err := dst.engine.AirGap().Import(t.Context(), in)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Import: %v", err)
				}
				for _, pl := range platforms {
					if err := dst.engine.Verify(t.Context(), dst.provider(), in.Version, mustPlatform(t, pl)); err != nil {
						t.Errorf("Verify %s: %v", pl, err)
					}
				}
				return
			}
			var (
				verr *verify.Error
				ierr *imports.Error
			)
			if !errors.As(err, &verr) || verr.Reason != tc.reason || !errors.As(err, &ierr) {
				t.Fatalf("Import: %v, want a %s failure", err, tc.reason)
			}
			if tc.doc && ierr.Document != 0 || !tc.doc && (ierr.Package < 0 || in.Packages[ierr.Package].Platform != "linux_amd64") {
				t.Errorf("the error is of document %d, package %d; want the %s", ierr.Document, ierr.Package, map[bool]string{true: "document", false: "linux_amd64 package"}[tc.doc])
			}
			want := dst.provider().String() + " " + tc.claims
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("Import: %v\nwant it to name %q and say %q", err, want, tc.message)
			}
			if n := met.count(string(tc.reason)); n != 1 {
				t.Errorf("%s failures counted: %d, want 1", tc.reason, n)
			}
			if _, _, err := dst.engine.Versions(t.Context(), dst.provider()); err == nil {
				t.Error("the refused version is listed")
			}
			if _, err := dst.engine.OpenArchive(t.Context(), dst.provider(), in.Version, mustPlatform(t, "linux_amd64")); err == nil {
				t.Error("the refused archive is served")
			}
			if _, err := dst.engine.AirGap().Stored(dst.provider(), in.Version); !errors.Is(err, records.ErrNotCached) {
				t.Errorf("Stored: %v, want ErrNotCached", err)
			}
		})
	}
}

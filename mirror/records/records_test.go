package records

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/verify"
)

func mustVersion(t *testing.T, s string) versions.Version {
	t.Helper()
	v, err := addrs.ParseSemver(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The rule for a SHA256SUMS document: every line names a file of one
// release of the provider type, "terraform-provider-TYPE_VERSION_...",
// with one VERSION that is a spelling of the record's version.
func TestReleaseOf(t *testing.T) {
	t.Parallel()
	sha := strings.Repeat("ab", 32)
	lines := func(names ...string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m[n] = sha
		}
		return m
	}
	const zip, darwin = "terraform-provider-random_3.5.0_linux_amd64.zip", "terraform-provider-random_3.5.0_darwin_arm64.zip"
	tests := []struct {
		name    string
		version string
		lines   map[string]string
		reason  verify.Reason // "": accepted
		only    []string      // accepted: the release's files, when not every line
	}{
		{name: "the release's archives", version: "3.5.0", lines: lines(zip, darwin)},
		{name: "and its manifest, as real registries list it", version: "3.5.0", lines: lines(zip, "terraform-provider-random_3.5.0_manifest.json")},
		{name: "the origin's spelling of the version", version: "1.0.0", lines: lines("terraform-provider-random_1.0_linux_amd64.zip")},
		{name: "build metadata kept", version: "1.0.0+b", lines: lines("terraform-provider-random_1.0.0+b_linux_amd64.zip")},
		{name: "another version", version: "9.9.9", lines: lines(zip, darwin), reason: verify.ReasonName},
		{name: "other build metadata", version: "1.0.0+a", lines: lines("terraform-provider-random_1.0.0+b_linux_amd64.zip"), reason: verify.ReasonName},
		{name: "a line of another version", version: "3.5.0", lines: lines(zip, "terraform-provider-random_9.9.9_linux_amd64.zip"), reason: verify.ReasonName},
		{name: "two spellings of the version", version: "1.0.0", lines: lines("terraform-provider-random_1.0.0_linux_amd64.zip", "terraform-provider-random_1.0_darwin_arm64.zip"), reason: verify.ReasonName},
		{name: "another type", version: "3.5.0", lines: lines("terraform-provider-null_3.5.0_linux_amd64.zip"), reason: verify.ReasonName},
		{name: "a type the asked one is the prefix of", version: "3.5.0", lines: lines("terraform-provider-random-x_3.5.0_linux_amd64.zip"), reason: verify.ReasonName},
		{name: "a line of another type", version: "3.5.0", lines: lines(zip, "terraform-provider-null_3.5.0_linux_amd64.zip"), reason: verify.ReasonName},
		// Files of no release's shape are left out: Terraform installs
		// such a release directly, and no derived name has their shape.
		{name: "a file of no release", version: "3.5.0", lines: lines(zip, "SHA256SUMS"), only: []string{zip}},
		{name: "a release tool's source archive", version: "3.5.0", lines: lines(zip, "terraform-provider-random-3.5.0.tar.gz"), only: []string{zip}},
		{name: "an SBOM of the release", version: "3.5.0", lines: lines(zip, darwin, "terraform-provider-random_3.5.0.sbom.json"), only: []string{zip, darwin}},
		{name: "a version and nothing after", version: "3.5.0", lines: lines(zip, "terraform-provider-random_3.5.0_"), only: []string{zip}},
		{name: "no version", version: "3.5.0", lines: lines("terraform-provider-random__linux_amd64.zip"), reason: verify.ReasonMissingChecksum},
		{name: "files of no release alone", version: "3.5.0", lines: lines("terraform-provider-random-3.5.0.tar.gz", "terraform-provider-random_3.5.0.sbom.json"), reason: verify.ReasonMissingChecksum},
		{name: "another type's source archive beside it", version: "3.5.0", lines: lines(zip, "terraform-provider-null_3.5.0_linux_amd64.zip", "terraform-provider-random-3.5.0.tar.gz"), reason: verify.ReasonName},
		{name: "a version that does not parse", version: "3.5.0", lines: lines("terraform-provider-random_v3.5.0_linux_amd64.zip"), reason: verify.ReasonName},
		{name: "no line", version: "3.5.0", lines: lines(), reason: verify.ReasonMissingChecksum},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rel, err := ReleaseOf("random", mustVersion(t, tc.version), tc.lines)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				want := tc.only
				if want == nil {
					want = slices.Collect(maps.Keys(tc.lines))
				}
				for name := range tc.lines {
					_, listed := rel.lines[name]
					if listed != slices.Contains(want, name) {
						t.Errorf("%s in the release: %v, want %v", name, listed, !listed)
					}
				}
				return
			}
			var verr *verify.Error
			if !errors.As(err, &verr) || verr.Reason != tc.reason {
				t.Fatalf("releaseOf = %+v, %v; want a %s failure", rel, err, tc.reason)
			}
		})
	}
}

func TestTranslateVersionsSpellings(t *testing.T) {
	t.Parallel()
	info := func(v string, pls ...string) discovery.VersionInfo {
		vi := discovery.VersionInfo{Version: v}
		for _, pl := range pls {
			goos, arch, _ := strings.Cut(pl, "_")
			vi.Platforms = append(vi.Platforms, addrs.Platform{OS: goos, Arch: arch})
		}
		return vi
	}
	tests := []struct {
		name  string
		infos []discovery.VersionInfo
		want  VersionEntry
	}{
		{"canonical only", []discovery.VersionInfo{info("1.0.0", "linux_amd64")},
			VersionEntry{Version: "1.0.0", Platforms: []string{"linux_amd64"}}},
		{"short only", []discovery.VersionInfo{info("1.0", "linux_amd64")},
			VersionEntry{Version: "1.0.0", Origin: "1.0", Platforms: []string{"linux_amd64"}}},
		{"short first", []discovery.VersionInfo{info("1.0", "windows_amd64"), info("1.0.0", "linux_amd64")},
			VersionEntry{Version: "1.0.0", Aliases: []string{"1.0"}, Platforms: []string{"linux_amd64", "windows_amd64"}}},
		{"canonical first", []discovery.VersionInfo{info("1.0.0", "linux_amd64"), info("1", "linux_amd64"), info("1.0")},
			VersionEntry{Version: "1.0.0", Aliases: []string{"1", "1.0"}, Platforms: []string{"linux_amd64"}}},
		{"two short ones, listed twice", []discovery.VersionInfo{info("1.0"), info("1", "linux_arm64"), info("1.0", "linux_amd64")},
			VersionEntry{Version: "1.0.0", Origin: "1.0", Aliases: []string{"1"}, Platforms: []string{"linux_amd64", "linux_arm64"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			list := TranslateVersions(tc.infos, func(raw string, err error) { t.Errorf("skipped %q: %v", raw, err) })
			if len(list.Versions) != 1 {
				t.Fatalf("versions %+v, want one", list.Versions)
			}
			got := list.Versions[0]
			if got.Version != tc.want.Version || got.Origin != tc.want.Origin ||
				!slices.Equal(got.Aliases, tc.want.Aliases) || !slices.Equal(got.Platforms, tc.want.Platforms) {
				t.Errorf("entry %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The keys a request spells once are the records' keys.
func TestVersionKeysAreTheRecordsKeys(t *testing.T) {
	p, err := addrs.NewProvider("registry.example.com", "acme", "thing")
	if err != nil {
		t.Fatal(err)
	}
	v := mustVersion(t, "1.2.3")
	k := KeysOf(p).Of(v)
	if k.Name != p.String() || k.Versions != VersionsKey(p) || k.Package != PackageKey(p, v) || k.Provider != p || !k.Version.Same(v) {
		t.Fatalf("keys %+v, want %s, %s, %s", k, p, VersionsKey(p), PackageKey(p, v))
	}
}

// TestSignedPackageQuotesWithinBound: what a package answer or an
// evidence file gives of a package (a file name, os, arch or shasum of
// megabytes) is quoted in the refusal's message within a bound, not
// whole: the message reaches the log, a client's answer and an import's
// report.
func TestSignedPackageQuotesWithinBound(t *testing.T) {
	t.Parallel()
	const zip = "terraform-provider-random_3.5.0_linux_amd64.zip"
	rel, err := ReleaseOf("random", mustVersion(t, "3.5.0"), map[string]string{zip: strings.Repeat("ab", 32)})
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 4<<20)
	for name, given := range map[string][4]string{
		"file name": {huge, "linux", "amd64", strings.Repeat("ab", 32)},
		"os":        {zip, huge, "amd64", strings.Repeat("ab", 32)},
		"arch":      {zip, "linux", huge, strings.Repeat("ab", 32)},
		"shasum":    {zip, "linux", "amd64", huge},
	} {
		_, _, err := rel.SignedPackage("linux_amd64", given[0], given[1], given[2], given[3])
		if err == nil {
			t.Fatalf("%s of 4 MiB: accepted", name)
		}
		if n := len(err.Error()); n > 4<<10 || !strings.Contains(err.Error(), "bytes more") {
			t.Errorf("%s of 4 MiB: a message of %d bytes, want at most 4 KiB saying how much more", name, n)
		}
	}
}

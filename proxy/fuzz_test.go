package proxy

// Fuzz tests of what the mirror takes from outside: request paths from
// clients, version lists from origins, and archive URL signatures. The
// seed corpora are in testdata/fuzz/; run one fuzzer with, for example,
// go test -run '^$' -fuzz '^FuzzParseRequestPath$' -fuzztime 10s ./proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// FuzzParseRequestPath feeds raw (percent-encoded) path segments to the
// request parser. Anything accepted is canonical (re-encoding it parses to
// the same address and file), contains no dot segment or separator, and
// keeps to the length limits; anything refused is a 4xx RequestError.
func FuzzParseRequestPath(f *testing.F) {
	f.Add("registry.terraform.io", "hashicorp", "random", "index.json")
	f.Add("registry.terraform.io", "hashicorp", "random", "3.6.0.json")
	f.Add("example.com:8443", "caf%C3%A9", "foo", "terraform-provider-foo_1.0.0-beta.1_linux_amd64.zip")
	f.Add("xn--caf-dma.example", "a", "b", "terraform-provider-b_0.0.1_windows_arm64.zip")
	f.Add("registry.terraform.io", "%2e%2e", "random", "..%2F..%2Fx.zip")
	f.Add("Registry.Terraform.IO:443", "a%2Fb", "c", "1.0.json")
	f.Fuzz(func(t *testing.T, host, namespace, typ, file string) {
		p, err := parseProvider(host, namespace, typ)
		if err != nil {
			wantRequestError(t, err)
			return
		}
		if len(p.Hostname.String()) > maxHostLen || len(p.Namespace) > maxPartLen || len(p.Type) > maxPartLen {
			t.Fatalf("accepted overlong parts %q", p)
		}
		if want, err := svchost.ForComparison(svchost.ForDisplay(p.Hostname.String())); err != nil || want != p.Hostname {
			t.Fatalf("accepted host %q is not in svchost's comparison form (%q, %v)", p.Hostname, want, err)
		}
		for _, part := range []string{p.Hostname.String(), p.Namespace, p.Type} {
			if part == "" || strings.Contains(part, "..") || strings.ContainsAny(part, "/\\%?#") {
				t.Fatalf("accepted part %q of %q", part, p)
			}
		}
		again, err := parseProvider(url.PathEscape(p.Hostname.String()), url.PathEscape(p.Namespace), url.PathEscape(p.Type))
		if err != nil || again != p {
			t.Fatalf("re-encoded %q parses to %q, %v", p, again, err)
		}

		name, err := unescapePart("file name", file, 2*maxVersionLen+maxPartLen)
		if err != nil {
			wantRequestError(t, err)
			return
		}
		switch {
		case strings.HasSuffix(name, ".zip"):
			v, pl, err := parseArchiveName(p.Type, name)
			if err != nil {
				wantRequestError(t, err)
				return
			}
			if got := addrs.ArchiveName(p.Type, v.String(), pl.String()); got != name {
				t.Fatalf("archive %q accepted but its canonical name is %q", name, got)
			}
		case strings.HasSuffix(name, ".json"):
			v, err := parseVersion(strings.TrimSuffix(name, ".json"))
			if err != nil {
				wantRequestError(t, err)
				return
			}
			if v.String()+".json" != name {
				t.Fatalf("version file %q accepted, canonical %q", name, v.String()+".json")
			}
		default:
			return
		}
		if strings.Contains(name, "..") || strings.ContainsAny(name, "/\\") {
			t.Fatalf("accepted file %q", name)
		}
	})
}

func wantRequestError(t *testing.T, err error) {
	t.Helper()
	var reqErr *httperr.RequestError
	if !errors.As(err, &reqErr) {
		t.Fatalf("refusal %v (%T) is not a RequestError", err, err)
	}
	if s := httperr.Status(err); s < 400 || s > 499 {
		t.Fatalf("refusal %v has status %d, want 4xx", err, s)
	}
}

// FuzzTranslateVersions feeds an origin's versions document (the provider
// registry protocol's JSON) through the translation into the mirror's
// index.json and VERSION.json. Every version the origin lists that parses
// is served in canonical form, sorted and once; every platform is a valid
// os_arch; the documents are valid JSON; every archive URL is a plain file
// name that parses back to its version and platform. The spellings the
// origin used for a version are all kept, the canonical one first when it
// is among them.
func FuzzTranslateVersions(f *testing.F) {
	f.Add([]byte(`{"versions":[{"version":"2.0.0","protocols":["5.0"],"platforms":[{"os":"linux","arch":"amd64"},{"os":"darwin","arch":"arm64"}]}]}`))
	f.Add([]byte(`{"versions":[{"version":"1.2","platforms":[{"os":"linux","arch":"amd64"}]},{"version":"1.2.0","platforms":[{"os":"linux","arch":"arm64"}]},{"version":"v1","platforms":[]}]}`))
	f.Add([]byte(`{"versions":[{"version":"1.0.0-beta.1+build","platforms":[{"os":"../..","arch":"x"},{"os":"Linux","arch":"AMD64"},{"os":"linux","arch":"amd64"},{"os":"linux","arch":"amd64"}]}]}`))
	f.Add([]byte(`{"versions":[{"version":"0.0.0"},{"version":"10.0.0"},{"version":"9.0.0"}],"warnings":["x"]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var body struct {
			Versions []struct {
				Version   string `json:"version"`
				Platforms []struct {
					OS   string `json:"os"`
					Arch string `json:"arch"`
				} `json:"platforms"`
			} `json:"versions"`
		}
		if json.Unmarshal(doc, &body) != nil {
			return
		}
		var infos []discovery.VersionInfo
		want := map[string]bool{}
		spelt := map[string][]string{} // canonical -> the origin's spellings
		for _, v := range body.Versions {
			vi := discovery.VersionInfo{Version: v.Version}
			for _, pl := range v.Platforms {
				vi.Platforms = append(vi.Platforms, addrs.Platform{OS: pl.OS, Arch: pl.Arch})
			}
			infos = append(infos, vi)
			if pv, err := addrs.ParseSemver(v.Version); err == nil {
				want[pv.String()] = true
				if !slices.Contains(spelt[pv.String()], v.Version) {
					spelt[pv.String()] = append(spelt[pv.String()], v.Version)
				}
			}
		}
		list := records.TranslateVersions(infos, func(string, error) {})

		var prev *versions.Version
		for _, e := range list.Versions {
			v, err := parseVersion(e.Version)
			if err != nil {
				t.Fatalf("served version %q is not canonical: %v", e.Version, err)
			}
			if prev != nil && !prev.LessThan(v) && !(prev.Same(v) && prev.String() < v.String()) {
				t.Fatalf("versions not strictly ascending: %s then %s", prev, v)
			}
			prev = &v
			if !want[e.Version] {
				t.Fatalf("served version %q the origin did not list", e.Version)
			}
			delete(want, e.Version)
			asked := e.Origin // the spelling the origin is asked for
			if asked == "" {
				asked = e.Version
			}
			got := append([]string{asked}, e.Aliases...)
			wantSpelt := slices.Sorted(slices.Values(spelt[e.Version]))
			if !slices.Equal(slices.Sorted(slices.Values(got)), wantSpelt) {
				t.Fatalf("spellings of %s kept: %q, the origin listed %q", e.Version, got, wantSpelt)
			}
			if e.Origin != "" && slices.Contains(wantSpelt, e.Version) {
				t.Fatalf("%s is asked for as %q although the origin lists it canonically", e.Version, e.Origin)
			}
			if !slices.IsSorted(e.Platforms) || len(slices.Compact(slices.Clone(e.Platforms))) != len(e.Platforms) {
				t.Fatalf("platforms of %s not sorted and unique: %q", e.Version, e.Platforms)
			}
			for _, name := range e.Platforms {
				if pl, err := parsePlatform(name); err != nil || pl.String() != name {
					t.Fatalf("served platform %q: %v", name, err)
				}
			}
		}
		if len(want) > 0 {
			t.Fatalf("versions the origin listed are not served: %v", want)
		}

		index, err := json.Marshal(newIndexDocument(list))
		if err != nil || !json.Valid(index) {
			t.Fatalf("index.json %s: %v", index, err)
		}
		var back indexDocument
		if err := json.Unmarshal(index, &back); err != nil || len(back.Versions) != len(list.Versions) {
			t.Fatalf("index.json %s lists %d versions, want %d (%v)", index, len(back.Versions), len(list.Versions), err)
		}

		const typ = "random"
		base, _ := url.Parse("https://mirror.example/registry.terraform.io/hashicorp/random/x.json")
		for _, e := range list.Versions {
			v, _ := parseVersion(e.Version)
			var archives []mirror.PlatformArchive
			for _, pl := range e.Platforms {
				archives = append(archives, mirror.PlatformArchive{Platform: pl, ArchiveRecord: records.ArchiveRecord{SHA256: strings.Repeat("ab", 32)}})
			}
			vd := newVersionDocument(typ, v, archives)
			raw, err := json.Marshal(vd)
			if err != nil || !json.Valid(raw) || bytes.Contains(raw, []byte(`"archives":null`)) {
				t.Fatalf("VERSION.json %s: %v", raw, err)
			}
			if len(vd.Archives) != len(e.Platforms) {
				t.Fatalf("VERSION.json of %s has %d archives, want %d", e.Version, len(vd.Archives), len(e.Platforms))
			}
			for name, a := range vd.Archives {
				ref, err := url.Parse(a.URL)
				if err != nil || ref.IsAbs() || strings.ContainsAny(a.URL, "/\\?#") || strings.Contains(a.URL, "..") {
					t.Fatalf("archive URL %q of %s %s is not a plain file name (%v)", a.URL, e.Version, name, err)
				}
				if resolved := base.ResolveReference(ref); resolved.Path != "/registry.terraform.io/hashicorp/random/"+a.URL {
					t.Fatalf("archive URL %q resolves to %q", a.URL, resolved)
				}
				gv, gpl, err := parseArchiveName(typ, a.URL)
				if err != nil || !gv.Same(v) || gpl.String() != name {
					t.Fatalf("archive URL %q parses to %s %s (%v), want %s %s", a.URL, gv, gpl, err, v, name)
				}
				if len(a.Hashes) != 1 || a.Hashes[0] != "zh:"+strings.Repeat("ab", 32) {
					t.Fatalf("hashes %q", a.Hashes)
				}
			}
		}
	})
}

// FuzzArchiveSignature checks that no query string other than the one
// the mirror signed authorizes an archive, and that a signature is bound
// to its file.
func FuzzArchiveSignature(f *testing.F) {
	f.Add("terraform-provider-random_1.0.0_linux_amd64.zip", "exp=1&sig=AAAA")
	f.Add("terraform-provider-random_1.0.0_linux_amd64.zip", "")
	f.Add("terraform-provider-random_1.0.0_darwin_arm64.zip", "exp=99999999999&sig=%00")
	now := time.Unix(1_800_000_000, 0)
	a, err := NewAuth(AuthConfig{
		TokenHashes: [][32]byte{{1}},
		SigningKey:  bytes.Repeat([]byte{42}, 32),
		Now:         func() time.Time { return now },
	})
	if err != nil {
		f.Fatal(err)
	}
	p := addrs.Provider{Hostname: "registry.terraform.io", Namespace: "hashicorp", Type: "random"}
	// validSignature: the signature is the mirror's, and unexpired.
	validSignature := func(p addrs.Provider, file, exp, sig string) bool {
		authentic, fresh := a.signature(p, file, exp, sig)
		return authentic && fresh
	}
	f.Fuzz(func(t *testing.T, file, rawQuery string) {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		signed := a.sign(p, file)
		sq, _ := url.ParseQuery(signed)
		if !validSignature(p, file, sq.Get("exp"), sq.Get("sig")) {
			t.Fatalf("the mirror's own signature %q for %q does not verify", signed, file)
		}
		if validSignature(p, file+"x", sq.Get("exp"), sq.Get("sig")) || validSignature(addrs.Provider{Hostname: p.Hostname, Namespace: "other", Type: p.Type}, file, sq.Get("exp"), sq.Get("sig")) {
			t.Fatalf("signature %q for %q verifies for another file", signed, file)
		}
		if validSignature(p, file, q.Get("exp"), q.Get("sig")) && (q.Get("exp") != sq.Get("exp") || q.Get("sig") != sq.Get("sig")) {
			t.Fatalf("forged query %q verifies for %q", rawQuery, file)
		}
	})
}

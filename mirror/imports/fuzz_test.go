package imports

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// fuzzRelease is one SHA256SUMS document FuzzSignedImport may be given:
// its lines, signed by the fuzz key.
type fuzzRelease struct {
	lines map[string]string
	doc   records.SumsDocument
}

// FuzzSignedImport feeds arbitrary evidence (what an import bundle's
// evidence file says of each package: platform, filename, os, arch,
// shasum, document, "packages", the sha256 an anchor vouches for) and an
// arbitrary version, with a choice among fixed signed SHA256SUMS
// documents, to the import's check of signed metadata: whatever it
// accepts is covered by a signature, each archive named exactly
// addrs.ArchiveName(type, version, platform) in the version's own signed
// document, with that line's sha256, and its os and arch the platform's.
func FuzzSignedImport(f *testing.F) {
	key, err := openpgp.NewEntity("publisher", "fuzz only", "publisher@example.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		f.Fatal(err)
	}
	signingKeys := []registryjson.GPGPublicKey{{KeyID: key.PrimaryKey.KeyIdString(), ASCIIArmor: verifytest.ArmoredPublic(f, key)}}
	release := func(names ...string) fuzzRelease {
		r := fuzzRelease{lines: map[string]string{}}
		var content strings.Builder
		for i, name := range names {
			sha := strings.Repeat(string("0123456789abcdef"[i%16]), 64)
			r.lines[name] = sha
			content.WriteString(sha + "  " + name + "\n")
		}
		var sig bytes.Buffer
		if err := openpgp.DetachSign(&sig, key, strings.NewReader(content.String()), nil); err != nil {
			f.Fatal(err)
		}
		r.doc = records.SumsDocument{Content: []byte(content.String()), Signature: sig.Bytes(), SigningKeys: signingKeys}
		return r
	}
	releases := []fuzzRelease{
		release("terraform-provider-random_3.5.0_darwin_arm64.zip", "terraform-provider-random_3.5.0_linux_amd64.zip", "terraform-provider-random_3.5.0_manifest.json"),
		release("terraform-provider-random_3.4.0_linux_amd64.zip", "terraform-provider-random_3.4.0_darwin_arm64.zip"),
		release("terraform-provider-null_3.5.0_linux_amd64.zip"),
		release("terraform-provider-random_3.5.0_linux_amd64.zip", "terraform-provider-random_9.9.9_linux_amd64.zip"),
		release("terraform-provider-random_1.0_linux_amd64.zip"),
	}
	p := addrs.Provider{Hostname: "registry.terraform.io", Namespace: "hashicorp", Type: "random"}
	lin, dar := releases[0].lines["terraform-provider-random_3.5.0_linux_amd64.zip"], releases[0].lines["terraform-provider-random_3.5.0_darwin_arm64.zip"]
	good := `[{"platform":"linux_amd64","filename":"terraform-provider-random_3.5.0_linux_amd64.zip","os":"linux","arch":"amd64","shasum":"` + lin + `","document":0},` +
		`{"platform":"darwin_arm64","filename":"terraform-provider-random_3.5.0_darwin_arm64.zip","os":"darwin","arch":"arm64","shasum":"` + dar + `","document":0,` +
		`"packages":{"linux_amd64":{"hashes":["zh:` + lin + `"]}}}]`
	f.Add("3.5.0", []byte(good), uint8(1))
	f.Add("9.9.9", []byte(good), uint8(1))
	f.Add("3.5.0", []byte(strings.ReplaceAll(good, `"platform":"darwin_arm64"`, `"platform":"linux_arm64"`)), uint8(1))
	f.Add("3.5.0", []byte(strings.ReplaceAll(good, "_3.5.0_darwin_arm64.zip", "_3.5.0_linux_amd64.zip")), uint8(1))
	f.Add("3.4.0", []byte(strings.ReplaceAll(good, "3.5.0", "3.4.0")), uint8(2))
	f.Add("3.5.0", []byte(good), uint8(4|1))
	f.Add("3.5.0", []byte(good), uint8(8))
	f.Add("1.0.0", []byte(`[{"platform":"linux_amd64","filename":"terraform-provider-random_1.0_linux_amd64.zip","os":"linux","arch":"amd64","shasum":"`+releases[4].lines["terraform-provider-random_1.0_linux_amd64.zip"]+`","document":0}]`), uint8(16))
	f.Fuzz(func(t *testing.T, version string, evidence []byte, docs uint8) {
		v, err := addrs.ParseSemver(version)
		if err != nil {
			return // airgap refuses the version first
		}
		var pkgs []struct {
			Platform, Filename, OS, Arch, Shasum, SHA256 string
			Document                                     int
			Packages                                     map[string]registryjson.PackageHashes
		}
		if json.Unmarshal(evidence, &pkgs) != nil || len(pkgs) > 8 {
			return
		}
		in := Imported{Provider: p, Version: v}
		var given []fuzzRelease // in.Documents' releases
		for i, r := range releases {
			if docs&(1<<i) != 0 {
				in.Documents = append(in.Documents, r.doc)
				given = append(given, r)
			}
		}
		for _, pkg := range pkgs {
			in.Packages = append(in.Packages, Package{Platform: pkg.Platform, Filename: pkg.Filename, OS: pkg.OS, Arch: pkg.Arch,
				Shasum: pkg.Shasum, SHA256: pkg.SHA256, Document: pkg.Document, Packages: pkg.Packages})
		}
		archives, _, err := signedArchives(in, nil)
		if err != nil {
			return
		}
		// Every document accepted is of version v of random, in one
		// spelling; every archive is named as derived and signed so.
		for _, r := range given {
			spelling := ""
			for name := range r.lines {
				rest, ok := strings.CutPrefix(name, "terraform-provider-random_")
				s, _, _ := strings.Cut(rest, "_")
				if !ok || spelling != "" && s != spelling {
					t.Fatalf("accepted a document listing %s beside other releases' files", name)
				}
				spelling = s
			}
			if sv, err := addrs.ParseSemver(spelling); err != nil || sv.String() != v.String() {
				t.Fatalf("accepted a SHA256SUMS of version %q as version %s", spelling, v)
			}
		}
		if len(archives) != len(in.Packages) {
			t.Fatalf("%d archives for %d packages", len(archives), len(in.Packages))
		}
		for i, a := range archives {
			pkg := in.Packages[i]
			r := given[pkg.Document]
			var spelling string
			for name := range r.lines {
				spelling, _, _ = strings.Cut(strings.TrimPrefix(name, "terraform-provider-random_"), "_")
			}
			pl, err := addrs.ParsePlatform(pkg.Platform)
			if err != nil {
				t.Fatalf("accepted platform %q: %v", pkg.Platform, err)
			}
			want := addrs.ArchiveName("random", spelling, pkg.Platform)
			switch {
			case a.Filename != want || pkg.Filename != want:
				t.Fatalf("%s of version %s accepted as %q (given %q), want %q", pkg.Platform, v, a.Filename, pkg.Filename, want)
			case a.SHA256 != r.lines[want] || !strings.EqualFold(pkg.Shasum, r.lines[want]):
				t.Fatalf("%s accepted with sha256 %s (shasum %s), the signed line is %q", want, a.SHA256, pkg.Shasum, r.lines[want])
			case pkg.SHA256 != "" && !strings.EqualFold(pkg.SHA256, a.SHA256):
				t.Fatalf("%s accepted with sha256 %s, vouched for as %s", want, a.SHA256, pkg.SHA256)
			case a.Evidence == nil || a.Evidence.OS != pl.OS || a.Evidence.Arch != pl.Arch:
				t.Fatalf("%s accepted with evidence %+v", want, a.Evidence)
			}
			for other, hashes := range pkg.Packages {
				for _, h := range hashes.Hashes {
					if zh, ok := strings.CutPrefix(h, "zh:"); ok && !strings.EqualFold(zh, r.lines[addrs.ArchiveName("random", spelling, other)]) {
						t.Fatalf("%s accepted with %s for %s, not its signed line", want, h, other)
					}
				}
			}
		}
	})
}

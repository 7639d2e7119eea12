package discovery

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
)

// FuzzParseVersions feeds arbitrary bodies to the parser of a registry's
// versions response: it must not panic, and what it accepts must be every
// entry of a "versions" array that has a version string, in order.
func FuzzParseVersions(f *testing.F) {
	f.Add([]byte(`{"versions":[{"version":"1.0.0","protocols":["5.0"],"platforms":[{"os":"linux","arch":"amd64"}]}]}`))
	f.Add([]byte(`{"versions":[{"version":""},{"version":"2"}],"warnings":["deprecated"]}`))
	f.Add([]byte(`{"versions":null}`))
	f.Add([]byte(` [{"version":"1.0.0"}]`))
	f.Add([]byte(`{"versions":[{"version":1}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, warnings, skipped, err := parseVersions(data)
		// The oracle decodes the protocol's shape with encoding/json
		// directly, declared here independently of registryjson: an entry
		// whose protocols or platforms have the wrong type makes the whole
		// response malformed, as it does for Terraform's client.
		var want struct {
			Versions *[]struct {
				Version   string   `json:"version"`
				Protocols []string `json:"protocols"`
				Platforms []struct {
					OS   string `json:"os"`
					Arch string `json:"arch"`
				} `json:"platforms"`
			} `json:"versions"`
			Warnings []string `json:"warnings"`
		}
		decodes := json.Unmarshal(data, &want) == nil
		trimmed := strings.TrimLeft(string(data), " \t\r\n")
		isObject := strings.HasPrefix(trimmed, "{")
		if err != nil {
			if decodes && isObject && want.Versions != nil {
				t.Fatalf("refused a well-formed versions response %q: %v", data, err)
			}
			return
		}
		if !decodes || !isObject || want.Versions == nil {
			t.Fatalf("accepted %q, which is not an object with a versions array", data)
		}
		var names []string
		for _, v := range *want.Versions {
			if v.Version != "" {
				names = append(names, v.Version)
			}
		}
		if len(got) != len(names) || skipped != len(*want.Versions)-len(names) || len(warnings) > min(len(want.Warnings), maxWarnings) {
			t.Fatalf("%q: %d versions, %d skipped, %d warnings; want %d, %d, at most %d",
				data, len(got), skipped, len(warnings), len(names), len(*want.Versions)-len(names), min(len(want.Warnings), maxWarnings))
		}
		for _, w := range warnings {
			if w == "" || len(w) > maxWarningBytes || !utf8.ValidString(w) || strings.IndexFunc(w, func(r rune) bool {
				return r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r))
			}) >= 0 {
				t.Fatalf("warning %q taken from %q", w, data)
			}
		}
		for i, v := range got {
			if v.Version != names[i] {
				t.Fatalf("version %d is %q, want %q", i, v.Version, names[i])
			}
		}
	})
}

// FuzzParsePackage feeds arbitrary bodies and response URLs to the parser
// of a registry's package response: whatever it accepts is for the platform
// asked, has a file name and shasum, only absolute https URLs, however the
// response spelled them, and every signing key the response gave with a
// key in it, all five fields as given and in order.
func FuzzParsePackage(f *testing.F) {
	pkg := `{"protocols":["5.0"],"os":"linux","arch":"amd64","filename":"terraform-provider-random_1.0.0_linux_amd64.zip",` +
		`"download_url":"/dl/terraform-provider-random_1.0.0_linux_amd64.zip","shasums_url":"SHA256SUMS",` +
		`"shasums_signature_url":"https://example.com/SHA256SUMS.sig","shasum":"` + strings.Repeat("ab", 32) + `",` +
		`"signing_keys":{"gpg_public_keys":[{"key_id":"X","ascii_armor":"-----BEGIN PGP PUBLIC KEY BLOCK-----",` +
		`"trust_signature":"","source":"HashiCorp","source_url":"https://www.hashicorp.com/security.html"},{"key_id":"Y","ascii_armor":""}]}}`
	const final = "https://registry.example/v1/providers/hashicorp/random/1.0.0/download/linux/amd64"
	f.Add([]byte(pkg), final)
	f.Add([]byte(strings.Replace(pkg, `"/dl/`, `"http://127.0.0.1/dl/`, 1)), final)
	f.Add([]byte(strings.Replace(pkg, `"arch":"amd64"`, `"arch":"arm64"`, 1)), final)
	f.Add([]byte(strings.Replace(pkg, `"SHA256SUMS"`, `"%zz"`, 1)), final)
	f.Add([]byte(strings.Replace(pkg, `"SHA256SUMS"`, `"//other.example/x"`, 1)), "http://registry.example/")
	f.Add([]byte(strings.Replace(pkg, `"SHA256SUMS"`, `"https:x"`, 1)), final)
	f.Add([]byte(`{"os":"linux","arch":"amd64"}`), final)
	f.Fuzz(func(t *testing.T, data []byte, finalURL string) {
		base, err := url.Parse(finalURL)
		if err != nil || base.Scheme != "https" || base.Host == "" {
			return // getJSON only ever returns the URL of an https response
		}
		pl := addrs.Platform{OS: "linux", Arch: "amd64"}
		got, err := parsePackage(data, base, pl)
		if err != nil {
			if got != nil {
				t.Fatalf("error %v with a package", err)
			}
			return
		}
		if got.OS != pl.OS || got.Arch != pl.Arch || got.Filename == "" || got.SHASum == "" {
			t.Fatalf("accepted package %+v for %s", got, pl)
		}
		for _, raw := range []string{got.DownloadURL, got.SHASumsURL, got.SHASumsSignatureURL} {
			u, err := url.Parse(raw)
			if err != nil || u.Scheme != "https" || u.Host == "" {
				t.Fatalf("accepted package URL %q is not an absolute https URL (%v)", raw, err)
			}
		}
		// The oracle decodes the keys with encoding/json directly, declared
		// here independently of registryjson.
		var want struct {
			SigningKeys struct {
				GPGPublicKeys []struct {
					KeyID          string `json:"key_id"`
					ASCIIArmor     string `json:"ascii_armor"`
					TrustSignature string `json:"trust_signature"`
					Source         string `json:"source"`
					SourceURL      string `json:"source_url"`
				} `json:"gpg_public_keys"`
			} `json:"signing_keys"`
		}
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", data, err)
		}
		var keys []registryjson.GPGPublicKey
		for _, k := range want.SigningKeys.GPGPublicKeys {
			if k.ASCIIArmor != "" {
				keys = append(keys, registryjson.GPGPublicKey(k))
			}
		}
		if !reflect.DeepEqual(got.SigningKeys, keys) {
			t.Fatalf("%q: signing keys\n%+v\nwant\n%+v", data, got.SigningKeys, keys)
		}
	})
}

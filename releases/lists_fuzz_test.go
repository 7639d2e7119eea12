package releases

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseLists: whatever version list an origin sends (HashiCorp's
// index.json, OpenTofu's api.json), what is taken of it is versions in
// their canonical spelling, each once, newest first, within the bounds a
// stored list keeps, with only the builds and files the publishers'
// layouts name; the rest is left out, never a panic.
func FuzzParseLists(f *testing.F) {
	f.Add([]byte(`{"name":"terraform","versions":{"1.6.0":{"builds":[{"os":"linux","arch":"amd64","filename":"terraform_1.6.0_linux_amd64.zip"}]},"v1.5.0":{},"1.7.0-rc1":{"builds":[{"os":"../x","arch":"amd64","filename":"terraform_1.7.0-rc1_../x_amd64.zip"}]}}}`), false)
	f.Add([]byte(`{"versions":[{"id":"1.8.0","files":["tofu_1.8.0_linux_amd64.zip","tofu_1.8.0_SHA256SUMS","x.zip"]},{"id":"1.8.0"},{"id":"18446744073709551616.0.0"},{"id":"1.9.0-beta1+b","files":["tofu_1.9.0-beta1+b_a?b"]}]}`), true)
	f.Add([]byte(`{"versions":{"1.0.0+a":{},"1.0.0+b":{},"1.0.0":{}}}`), false)
	f.Fuzz(func(t *testing.T, data []byte, tofu bool) {
		var list *List
		var err error
		if tofu {
			list, err = parseTofuList(data)
		} else {
			list, err = parseHashiCorpList("terraform", data)
		}
		if err != nil {
			return
		}
		if len(list.Versions) > maxListedVersions {
			t.Fatalf("%d versions kept, more than %d", len(list.Versions), maxListedVersions)
		}
		if b, err := json.Marshal(list); err != nil || len(b) > maxStoredListBytes {
			t.Fatalf("the list is %d bytes as stored (%v), more than %d", len(b), err, maxStoredListBytes)
		}
		seen := map[string]bool{}
		for i, l := range list.Versions {
			if v, err := CanonicalVersion(l.Version); err != nil || v != l.Version {
				t.Fatalf("version %q kept, not canonical: %v", l.Version, err)
			}
			if seen[l.Version] {
				t.Fatalf("version %q kept twice", l.Version)
			}
			seen[l.Version] = true
			if i > 0 && CompareVersions(list.Versions[i-1].Version, l.Version) < 0 {
				t.Fatalf("%q before %q: not newest first", list.Versions[i-1].Version, l.Version)
			}
			for _, b := range l.Builds {
				if !platformPart(b.OS) || !platformPart(b.Arch) || b.Filename != "terraform_"+l.Version+"_"+b.OS+"_"+b.Arch+".zip" {
					t.Fatalf("build %+v of %s kept", b, l.Version)
				}
			}
			for _, name := range l.Files {
				if !tofuFileName(l.Version, name) || strings.ContainsAny(name, "/?#%<>\\") {
					t.Fatalf("file %q of %s kept", name, l.Version)
				}
			}
		}
	})
}

package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// OpenTofu's "packages" of the origin's download answers come across the
// air gap: the registry download answer of a mirror that imported an
// export is the origin's but for its three URLs, "packages" byte for byte.
func TestImportedMirrorServesTheOriginsPackages(t *testing.T) {
	pls := []string{"linux_amd64", "darwin_arm64", "windows_amd64"}
	origin := newOrigin(t, fakeorigin.Options{PackageHashes: true})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, pls)
	data := filepath.Join(t.TempDir(), "data")
	m := startMirror(t, origin, data, nil)
	for _, pl := range pls[:2] {
		warm(t, m, "random", "3.6.0", pl)
	}
	m.stop()

	export := filepath.Join(t.TempDir(), "export")
	if code, stdout, stderr := runCommand("export", "--data-dir", data, export); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, stderr)
	}
	exporter := exporterKey(t, data)
	fresh := filepath.Join(t.TempDir(), "fresh")
	if code, stdout, stderr := runCommand("import", "--data-dir", fresh, "--trusted-export-keys", exporter, export); code != 0 || !strings.Contains(stdout, "imported 2 packages") {
		t.Fatalf("import: exit %d\n%s%s", code, stdout, stderr)
	}
	sealed := startMirror(t, origin, fresh, nil, "--offline")

	originClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: origin.CertPool()}}}
	for _, pl := range pls[:2] {
		osName, arch, _ := strings.Cut(pl, "_")
		rest := "hashicorp/random/3.6.0/download/" + osName + "/" + arch
		resp, body, err := sealed.get(proxy.RegistryPath(tfRegistry) + rest)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("imported mirror's download answer for %s: %v %v %s", pl, resp, err, body)
		}
		oresp, err := originClient.Get(origin.URL + "/v1/providers/" + rest)
		if err != nil {
			t.Fatal(err)
		}
		obody, err := io.ReadAll(oresp.Body)
		oresp.Body.Close()
		if err != nil || oresp.StatusCode != 200 {
			t.Fatalf("origin's download answer for %s: %d %v", pl, oresp.StatusCode, err)
		}

		var got, want registryjson.Package
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(obody, &want); err != nil {
			t.Fatal(err)
		}
		if len(want.Packages) != len(pls) {
			t.Fatalf("the origin's answer has packages %v, want one per platform: the test proves little", want.Packages)
		}
		got.DownloadURL, got.SHASumsURL, got.SHASumsSignatureURL = want.DownloadURL, want.SHASumsURL, want.SHASumsSignatureURL
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the imported mirror's download answer but for the URLs\n%+v\nthe origin's\n%+v", pl, got, want)
		}
		var gotRaw, wantRaw map[string]json.RawMessage
		if err := json.Unmarshal(body, &gotRaw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(obody, &wantRaw); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotRaw["packages"], wantRaw["packages"]) {
			t.Errorf("%s: packages\n%s\nthe origin's\n%s", pl, gotRaw["packages"], wantRaw["packages"])
		}
	}

	sealed.stop()

	// "packages" in the evidence file are checked on import as the
	// origin's are: a wrong zh: of any platform, or a wrong h1: of an
	// imported archive, refuses the version. The exporter's manifest
	// would refuse the changed evidence file first: the bundle here has
	// none, and the origin's key is pinned for the namespace instead.
	random := filepath.Join(export, "registry.terraform.io", "hashicorp", "random")
	publisher := filepath.Join(t.TempDir(), "hashicorp.asc")
	if err := os.WriteFile(publisher, []byte(origin.ArmoredPublicKey()), 0o644); err != nil {
		t.Fatal(err)
	}
	pinned := "registry.terraform.io/hashicorp=" + publisher
	evidence := "terraform-provider-random_3.6.0_evidence.json"
	for _, tc := range []struct{ name, platform, hash string }{
		{"wrong zh of a platform not exported", "windows_amd64", "zh:" + strings.Repeat("ab", 32)},
		{"wrong h1 of an imported archive", "darwin_arm64", "h1:wrongwrongwrongwrongwrongwrongwrongwrongwro="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "export")
			copyTree(t, export, bad)
			path := filepath.Join(bad, "registry.terraform.io", "hashicorp", "random", evidence)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var ev map[string]any
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatal(err)
			}
			prefix, _, _ := strings.Cut(tc.hash, ":")
			replaced := 0
			for _, pkg := range ev["packages"].(map[string]any) {
				hashes := pkg.(map[string]any)["packages"].(map[string]any)[tc.platform].(map[string]any)["hashes"].([]any)
				for i, h := range hashes {
					if strings.HasPrefix(h.(string), prefix+":") {
						hashes[i] = tc.hash
						replaced++
					}
				}
			}
			if replaced != 2 {
				t.Fatalf("replaced %d %s: hashes of %s in %s, want one in each of 2 packages", replaced, prefix, tc.platform, random)
			}
			if raw, err = json.Marshal(ev); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"tfmirror-manifest.json", "tfmirror-manifest.json.sig"} {
				if err := os.Remove(filepath.Join(bad, name)); err != nil {
					t.Fatal(err)
				}
			}
			fresh := filepath.Join(t.TempDir(), "fresh")
			code, stdout, stderr := runCommand("import", "--data-dir", fresh, "--trusted-publisher-keys", pinned, bad)
			if code != 1 || !strings.Contains(stderr, "checksum_mismatch") {
				t.Errorf("import: exit %d, want 1 and a checksum mismatch:\n%s%s", code, stdout, stderr)
			}
			t.Logf("import said: %s", stderr)
			for _, v := range cachedVersions(t, fresh) {
				if strings.HasPrefix(v, "registry.terraform.io/hashicorp/random 3.6.0") {
					t.Errorf("the version with wrong packages hashes is in the cache: %s", v)
				}
			}
		})
	}
}

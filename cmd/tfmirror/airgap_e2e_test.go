package main

// End-to-end tests of export and import with the real terraform: a cache
// filled through the mirror is exported, served by a plain static file
// server and as a filesystem_mirror, imported into a fresh data directory
// and served sealed with the origin gone; tampered exports are refused;
// an in-house provider is imported without signature and installed.

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// tfRun runs terraform in dir with the CLI configuration conf and the CA
// certificates in caFile trusted.
func tfRun(t *testing.T, dir, conf, caFile string, args ...string) (string, error) {
	t.Helper()
	return runCLI(terraformBinary(t), dir, conf, caFile, args...)
}

// cliConfig writes a CLI configuration whose only installation method is
// block.
func cliConfig(t *testing.T, block string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(path, []byte("provider_installation {\n"+block+"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func networkMirror(t *testing.T, url string) string {
	return cliConfig(t, fmt.Sprintf("  network_mirror {\n    url = %q\n  }", url))
}

// runCommand runs a subcommand as main does and returns its exit status
// and output.
func runCommand(args ...string) (int, string, string) {
	var stdout, stderr logbuf.Buffer // written from the command's goroutines too
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// copyTree copies the directory from into to.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// cachedVersions lists what the cache in dataDir holds, as "provider version".
func cachedVersions(t *testing.T, dataDir string) []string {
	t.Helper()
	parts, _ := openOffline(t, "--data-dir", dataDir)
	defer parts.shutdown(context.Background())
	var out []string
	err := parts.engine.ListCachedAfter("", "", func(cv mirror.CachedVersion) error {
		out = append(out, cv.Provider+" "+cv.Version)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExportImportAirGap(t *testing.T) {
	terraformBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.5.0", "3.6.0"}, []string{"linux_amd64", "darwin_arm64", "windows_amd64"})
	origin.AddProvider("hashicorp", "null", []string{"3.2.0"}, []string{"linux_amd64", "darwin_arm64"})
	providers := map[string]string{"random": "hashicorp/random@3.6.0", "null": "hashicorp/null@3.2.0"}
	data := filepath.Join(t.TempDir(), "data")

	// What `terraform providers mirror` writes, from the origin itself
	// (its service discovery set in the CLI configuration).
	originConf := cliConfig(t, "")
	hostBlock := fmt.Sprintf("host \"registry.terraform.io\" {\n  services = {\n    \"providers.v1\" = \"https://%s/v1/providers/\"\n  }\n}\n", origin.Addr)
	if err := os.WriteFile(originConf, []byte(hostBlock), 0o644); err != nil {
		t.Fatal(err)
	}
	originCA, err := origin.CAFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// A direct install from the origin: the lock file the host block of
	// the imported, sealed mirror must write too.
	directDir := writeConfig(t, providers)
	directOut, err := tfRun(t, directDir, originConf, originCA, "init", "-no-color")
	if err != nil {
		t.Fatalf("terraform init from the origin: %v\n%s", err, directOut)
	}
	directLock := readLock(t, directDir)
	if n := zhCount(directLock); n != 5 {
		t.Fatalf("a direct install recorded %d zh: hashes, want 5 (the set-up is broken):\n%s", n, directLock)
	}
	tfMirror := t.TempDir()
	if out, err := tfRun(t, writeConfig(t, providers), originConf, originCA, "providers", "mirror",
		"-platform=linux_amd64", "-platform=darwin_arm64", tfMirror); err != nil {
		t.Fatalf("terraform providers mirror: %v\n%s", err, out)
	}

	// The same fetched through the mirror fills its cache.
	m := startMirror(t, origin, data, nil)
	conf := networkMirror(t, m.url)
	for _, pl := range []string{"linux_amd64", "darwin_arm64"} {
		warm(t, m, "random", "3.6.0", pl)
		warm(t, m, "null", "3.2.0", pl)
	}
	connected := writeConfig(t, providers)
	if out, err := tfRun(t, connected, conf, m.m.caFile, "init", "-no-color"); err != nil {
		t.Fatalf("terraform init through the connected mirror: %v\n%s", err, out)
	}
	connectedLock := readLock(t, connected)
	m.idle()

	// While serve holds the data directory, export works through it.
	export := filepath.Join(t.TempDir(), "export")
	code, stdout, stderr := runCommand("export", "--data-dir", data, export)
	if code != 0 || !strings.Contains(stdout, "exported 4 packages") {
		t.Fatalf("export through the running mirror: exit %d\n%s%s", code, stdout, stderr)
	}
	m.stop()
	// The exporting mirror's public key, carried across the gap out of
	// band: the one whose fingerprint the export printed.
	exporter := exporterKey(t, data)
	_, _, keyOut := runCommand("export-key", "--data-dir", data)
	fingerprint := strings.TrimPrefix(stdout[strings.Index(stdout, "export key "):], "export key ")
	fingerprint = strings.TrimSpace(fingerprint)
	if len(fingerprint) != 40 || !strings.Contains(keyOut, "key "+fingerprint) {
		t.Errorf("export printed the key %q, export-key says %s", fingerprint, keyOut)
	}

	// Every file `terraform providers mirror` wrote is in the export with
	// the same bytes: the zips, index.json and VERSION.json.
	compared := 0
	err = filepath.WalkDir(tfMirror, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(tfMirror, path)
		want, _ := os.ReadFile(path)
		got, err := os.ReadFile(filepath.Join(export, rel))
		switch {
		case err != nil:
			t.Errorf("export lacks %s: %v", rel, err)
		case !bytes.Equal(got, want):
			t.Errorf("export's %s differs from terraform providers mirror's:\n got %s\nwant %s", rel, got, want)
		}
		compared++
		return nil
	})
	if err != nil || compared != 8 {
		t.Fatalf("compared %d files of terraform providers mirror's output (%v), want 8", compared, err)
	}
	for _, name := range []string{"terraform-provider-random_3.6.0_SHA256SUMS", "terraform-provider-random_3.6.0_SHA256SUMS.sig", "terraform-provider-random_3.6.0_evidence.json"} {
		if _, err := os.Stat(filepath.Join(export, "registry.terraform.io", "hashicorp", "random", name)); err != nil {
			t.Errorf("evidence file missing: %v", err)
		}
	}

	// A second export, with no server, finds everything present.
	code, stdout, stderr = runCommand("export", "--data-dir", data, export)
	if code != 0 || !strings.Contains(stdout, "exported 0 packages (0 bytes), 4 already present") {
		t.Errorf("second export: exit %d\n%s%s", code, stdout, stderr)
	}

	// Sealed, the connected mirror's data directory lists only the
	// versions it can install: the origin listed 3.5.0 too.
	sealed := startMirror(t, origin, data, nil, "--offline")
	if _, body, err := sealed.get("registry.terraform.io/hashicorp/random/index.json"); err != nil ||
		strings.Contains(string(body), "3.5.0") || !strings.Contains(string(body), "3.6.0") {
		t.Errorf("sealed index.json: %s, %v; want 3.6.0 only", body, err)
	}
	sealed.stop()

	t.Run("static network mirror and filesystem mirror", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.FileServer(http.Dir(export)))
		defer srv.Close()
		caFile := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := tfRun(t, writeConfig(t, providers), networkMirror(t, srv.URL+"/"), caFile, "init", "-no-color"); err != nil {
			t.Errorf("terraform init from the export on a static file server: %v\n%s", err, out)
		}
		fsConf := cliConfig(t, fmt.Sprintf("  filesystem_mirror {\n    path = %q\n  }", export))
		if out, err := tfRun(t, writeConfig(t, providers), fsConf, caFile, "init", "-no-color"); err != nil {
			t.Errorf("terraform init from the export as a filesystem_mirror: %v\n%s", err, out)
		}
	})

	t.Run("tar round trip, sealed serving with the origin gone", func(t *testing.T) {
		tarFile := filepath.Join(t.TempDir(), "export.tar.gz")
		if code, stdout, stderr := runCommand("export", "--data-dir", data, tarFile); code != 0 {
			t.Fatalf("export to a tar file: exit %d\n%s%s", code, stdout, stderr)
		}
		fresh := filepath.Join(t.TempDir(), "fresh")
		code, stdout, stderr := runCommand("import", "--data-dir", fresh, tarFile)
		if code != 1 || !strings.Contains(stderr, "--trusted-export-keys") || !strings.Contains(stdout, "imported 0 packages") {
			t.Errorf("import without trusted keys: exit %d, want 1, nothing imported and a hint\n%s%s", code, stdout, stderr)
		}
		code, stdout, stderr = runCommand("import", "--data-dir", fresh, "--trusted-export-keys", exporter, tarFile)
		if code != 0 || !strings.Contains(stdout, "imported 4 packages") {
			t.Fatalf("import: exit %d\n%s%s", code, stdout, stderr)
		}
		origin.Close()
		m2 := startMirror(t, origin, fresh, nil, "--offline")
		dir := writeConfig(t, providers)
		out, err := tfRun(t, dir, networkMirror(t, m2.url), m2.m.caFile, "init", "-no-color")
		if err != nil {
			t.Fatalf("terraform init from the imported, sealed mirror: %v\n%s", err, out)
		}
		if lock := readLock(t, dir); !bytes.Equal(lock, connectedLock) {
			t.Errorf("network mirror lock file differs from the connected mirror's:\n got %s\nwant %s", lock, connectedLock)
		}
		// Through the host block, the lock file is a direct install's:
		// the origin's signed SHA256SUMS came across the gap.
		dir = writeConfig(t, providers)
		out, err = tfRun(t, dir, statusHostBlock(t, m2), m2.m.caFile, "init", "-no-color")
		if err != nil {
			t.Fatalf("terraform init through the host block of the imported, sealed mirror: %v\n%s", err, out)
		}
		checkSameInstall(t, "host block of the imported, sealed mirror", directLock, readLock(t, dir), directOut, out)
		// 3.5.0 was never cached: the sealed mirror does not list it.
		_, body, err := m2.get("registry.terraform.io/hashicorp/random/index.json")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(body), "3.5.0") || !strings.Contains(string(body), "3.6.0") {
			t.Errorf("sealed index.json lists %s, want 3.6.0 only", body)
		}
		// A second import finds everything present.
		m2.stop()
		code, stdout, stderr = runCommand("import", "--data-dir", fresh, "--trusted-export-keys", exporter, tarFile)
		if code != 0 || !strings.Contains(stdout, "imported 0 packages (0 bytes), 4 already present") {
			t.Errorf("second import: exit %d\n%s%s", code, stdout, stderr)
		}
	})

	t.Run("tampered exports are refused", func(t *testing.T) {
		random := filepath.Join("registry.terraform.io", "hashicorp", "random")
		other, err := openpgp.NewEntity("other", "", "other@example.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, file string
			tamper     func(path string)
		}{
			{"one zip byte", "terraform-provider-random_3.6.0_linux_amd64.zip", flipByte},
			{"one SHA256SUMS byte", "terraform-provider-random_3.6.0_SHA256SUMS", flipByte},
			{"a signature from another key", "terraform-provider-random_3.6.0_SHA256SUMS.sig", func(path string) {
				sums, err := os.ReadFile(filepath.Join(filepath.Dir(path), "terraform-provider-random_3.6.0_SHA256SUMS"))
				if err != nil {
					t.Fatal(err)
				}
				var sig bytes.Buffer
				if err := openpgp.DetachSign(&sig, other, bytes.NewReader(sums), nil); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, sig.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				bad := filepath.Join(t.TempDir(), "export")
				copyTree(t, export, bad)
				tc.tamper(filepath.Join(bad, random, tc.file))
				fresh := filepath.Join(t.TempDir(), "fresh")
				code, stdout, stderr := runCommand("import", "--data-dir", fresh, "--trusted-export-keys", exporter, bad)
				if code != 1 || !strings.Contains(stderr, filepath.Join(bad, random, tc.file)) {
					t.Errorf("import: exit %d, want 1 and a message naming %s:\n%s%s", code, tc.file, stdout, stderr)
				}
				t.Logf("import said: %s", stderr)
				for _, v := range cachedVersions(t, fresh) {
					if strings.HasPrefix(v, "registry.terraform.io/hashicorp/random 3.6.0") {
						t.Errorf("the tampered version is in the cache: %s", v)
					}
				}
			})
		}
	})

	t.Run("forged bundles are refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			mode forgery
			// want is in the message besides the provider and the
			// forger's key.
			want string
		}{
			{"the exporter's manifest kept", keepManifest, "differs from the manifest"},
			{"the manifest signed by the forger", resignManifest, "which is not among the trusted export keys (--trusted-export-keys)"},
			{"no manifest, as from tfmirror 1.x", dropManifest, "a bundle made by tfmirror 1.x"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				bad, forger := forgeBundle(t, export, "registry.terraform.io/hashicorp/random", "3.6.0", tc.mode)
				for _, trust := range [][]string{{"--trusted-export-keys", exporter}, nil} {
					fresh := filepath.Join(t.TempDir(), "fresh")
					args := append(append([]string{"import", "--data-dir", fresh}, trust...), bad)
					code, stdout, stderr := runCommand(args...)
					t.Logf("import %v said: %s%s", trust, stdout, stderr)
					if code != 1 || !strings.Contains(stderr, "registry.terraform.io/hashicorp/random 3.6.0 refused") ||
						!strings.Contains(stderr, "signed by key "+testKeyID(forger)) {
						t.Errorf("import %v: exit %d, want 1 and a refusal naming the provider and the forger's key %s", trust, code, testKeyID(forger))
					}
					if trust != nil && !strings.Contains(stderr, tc.want) {
						t.Errorf("import %v: the refusal does not say %q", trust, tc.want)
					}
					for _, v := range cachedVersions(t, fresh) {
						if strings.HasPrefix(v, "registry.terraform.io/hashicorp/random 3.6.0") {
							t.Errorf("the forged version is in the cache: %s", v)
						}
					}
					if trust == nil || tc.mode != keepManifest {
						continue
					}
					// The other provider of the bundle is untouched, and
					// imported; the sealed mirror serves it, not the forgery.
					sealed := startMirror(t, origin, fresh, nil, "--offline")
					if resp, body, err := sealed.get("registry.terraform.io/hashicorp/null/index.json"); err != nil || resp.StatusCode != 200 {
						t.Errorf("sealed mirror's null index.json: %v %v %s", resp, err, body)
					}
					for _, path := range []string{"registry.terraform.io/hashicorp/random/index.json", "registry.terraform.io/hashicorp/random/3.6.0.json"} {
						resp, body, err := sealed.get(path)
						if err != nil || resp.StatusCode == 200 {
							t.Errorf("sealed mirror's %s: %v %v %s, want it not served", path, resp, err, body)
						}
					}
					sealed.stop()
				}
			})
		}
	})

	t.Run("through a running sealed serve", func(t *testing.T) {
		fresh := filepath.Join(t.TempDir(), "fresh")
		sealed := startMirror(t, origin, fresh, nil, "--offline", "--trusted-export-keys", exporter)
		defer sealed.stop()
		// Keys are the serving process's setting, never the caller's.
		code, stdout, stderr := runCommand("import", "--data-dir", fresh, "--trusted-export-keys", exporter, export)
		if code != 2 || !strings.Contains(stderr, "--trusted-export-keys given, but the tfmirror serving this data directory does the import") {
			t.Errorf("import with trust flags through the serve: exit %d, want 2 and why\n%s%s", code, stdout, stderr)
		}
		code, stdout, stderr = runCommand("export", "--data-dir", fresh, "--export-key", filepath.Join(data, settings.ExportKeyName), filepath.Join(t.TempDir(), "out"))
		if code != 2 || !strings.Contains(stderr, "--export-key given, but the tfmirror serving this data directory does the export") {
			t.Errorf("export with --export-key through the serve: exit %d, want 2 and why\n%s%s", code, stdout, stderr)
		}

		bad, forger := forgeBundle(t, export, "registry.terraform.io/hashicorp/random", "3.6.0", keepManifest)
		code, stdout, stderr = runCommand("import", "--data-dir", fresh, bad)
		if code != 1 || !strings.Contains(stderr, "registry.terraform.io/hashicorp/random 3.6.0 refused") ||
			!strings.Contains(stderr, "signed by key "+testKeyID(forger)) || !strings.Contains(stdout, "imported 2 packages") {
			t.Errorf("import of the forged bundle through the serve: exit %d, want 1, null imported and random refused naming the forger's key\n%s%s", code, stdout, stderr)
		}
		for _, path := range []string{"registry.terraform.io/hashicorp/random/index.json", "registry.terraform.io/hashicorp/random/3.6.0.json"} {
			if resp, body, err := sealed.get(path); err != nil || resp.StatusCode == 200 {
				t.Errorf("after the forged import, the serve's %s: %v %v %s, want it not served", path, resp, err, body)
			}
		}

		code, stdout, stderr = runCommand("import", "--data-dir", fresh, export)
		if code != 0 || !strings.Contains(stdout, "imported 2 packages") || !strings.Contains(stdout, "2 already present") {
			t.Fatalf("import of the genuine bundle through the serve: exit %d\n%s%s", code, stdout, stderr)
		}
		dir := writeConfig(t, providers)
		out, err := tfRun(t, dir, statusHostBlock(t, sealed), sealed.m.caFile, "init", "-no-color")
		if err != nil {
			t.Fatalf("terraform init through the host block of the serve that imported: %v\n%s", err, out)
		}
		checkSameInstall(t, "host block of the serve that imported", directLock, readLock(t, dir), directOut, out)
	})
}

// statusHostBlock writes a CLI configuration holding the host block that
// tm's status page gives for registry.terraform.io, and returns its path.
func statusHostBlock(t *testing.T, tm *testMirror) string {
	t.Helper()
	_, body, err := tm.get("?format=json")
	if err != nil {
		t.Fatal(err)
	}
	var st proxy.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, body)
	}
	block := st.HostBlocks[tfRegistry]
	if !strings.Contains(block, `"providers.v1" = "`+tm.url+proxy.RegistryPath(tfRegistry)+`"`) {
		t.Fatalf("the status page's host block for %s does not point at the mirror:\n%s", tfRegistry, block)
	}
	path := filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(path, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// flipByte changes the middle byte of the file at path.
func flipByte(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(path, data, 0o644); err != nil {
		panic(err)
	}
}

// An in-house provider, built here and laid out as `terraform providers
// mirror` would (no evidence), is refused by import without
// --allow-unsigned, and with it is served under a host that is no origin,
// marked as imported without signature, and installed by terraform init.
func TestImportInHouseProvider(t *testing.T) {
	terraformBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	dir := filepath.Join(t.TempDir(), "in", "tf.corp.example", "platform", "thing")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	h := &zip.FileHeader{Name: "terraform-provider-thing_v1.0.0", Method: zip.Deflate}
	h.SetMode(0o755)
	f, err := zw.CreateHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "#!/bin/sh\necho in-house provider\nexit 1\n")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "terraform-provider-thing_1.0.0_linux_amd64.zip"), zbuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Dir(filepath.Dir(filepath.Dir(dir)))
	data := filepath.Join(t.TempDir(), "data")

	code, stdout, stderr := runCommand("import", "--data-dir", data, in)
	if code != 1 || !strings.Contains(stderr, "--allow-unsigned") {
		t.Errorf("import without --allow-unsigned: exit %d, want 1 and a hint:\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCommand("import", "--data-dir", data, "--allow-unsigned", in)
	if code != 0 || !strings.Contains(stdout, "imported 1 packages") {
		t.Fatalf("import --allow-unsigned: exit %d\n%s%s", code, stdout, stderr)
	}

	// The mirror serves registry.terraform.io only, and never contacts
	// the in-house host (which does not resolve anyway).
	m := startMirror(t, origin, data, nil)
	cfgDir := writeConfig(t, map[string]string{"thing": "tf.corp.example/platform/thing@1.0.0"})
	out, err := tfRun(t, cfgDir, networkMirror(t, m.url), m.m.caFile, "init", "-no-color")
	if err != nil {
		t.Fatalf("terraform init of the in-house provider: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(cfgDir, ".terraform", "providers", "tf.corp.example", "platform", "thing", "1.0.0", "linux_amd64", "terraform-provider-thing_v1.0.0")); err != nil {
		t.Errorf("provider not installed: %v", err)
	}
	if n := origin.TotalHits(); n != 0 {
		t.Errorf("the origin was asked %d times", n)
	}
	_, body, err := m.get("?format=json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Providers []struct {
			Address  string
			Versions []struct{ Version, Provenance string }
		}
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, body)
	}
	if len(st.Providers) != 1 || st.Providers[0].Address != "tf.corp.example/platform/thing" ||
		len(st.Providers[0].Versions) != 1 || st.Providers[0].Versions[0].Provenance != "imported without signature" {
		t.Errorf("status lists %+v, want the in-house provider imported without signature", st.Providers)
	}

	// Exported again, it says it has no signature: importing it needs the
	// flag again.
	m.stop()
	export := filepath.Join(t.TempDir(), "export")
	if code, stdout, stderr := runCommand("export", "--data-dir", data, export); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, stderr)
	}
	// Exported again, the exporting mirror's signed manifest vouches for
	// it: it is imported with that mirror's key, and only so;
	// --allow-unsigned does not take what a bundle's manifest does not
	// vouch for.
	fresh := filepath.Join(t.TempDir(), "fresh")
	for _, args := range [][]string{nil, {"--allow-unsigned"}, {"--trusted-export-keys", writeKeyFile(t, newTestKey(t, "other mirror"))}} {
		code, stdout, stderr = runCommand(append(append([]string{"import", "--data-dir", fresh}, args...), export)...)
		if code != 1 || !strings.Contains(stderr, "tf.corp.example/platform/thing 1.0.0 refused") || !strings.Contains(stderr, "--trusted-export-keys") {
			t.Errorf("import %v of the exported in-house provider: exit %d, want it refused\n%s%s", args, code, stdout, stderr)
		}
	}
	if n := len(cachedVersions(t, fresh)); n != 0 {
		t.Errorf("the refused imports cached %d versions", n)
	}
	if code, stdout, stderr := runCommand("import", "--data-dir", fresh, "--trusted-export-keys", exporterKey(t, data), export); code != 0 || !strings.Contains(stdout, "imported 1 packages") {
		t.Errorf("import of the exported in-house provider with its exporter's key: exit %d\n%s%s", code, stdout, stderr)
	}
	if got := cachedVersions(t, fresh); !slices.Equal(got, []string{"tf.corp.example/platform/thing 1.0.0"}) {
		t.Errorf("after the import, the cache holds %v", got)
	}
}

// In-house providers imported without signature under an allowed origin
// that --allow-unsigned-hosts names are installed by terraform init
// through the network mirror of an online mirror, beside the origin's
// own providers: one the origin lacks altogether, and a version of one
// it has that it does not list. Both had been served only until the
// mirror listed the origin (at once, online), then answered 404.
func TestInHouseProvidersUnderAnOriginHost(t *testing.T) {
	terraformBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.5.0"}, []string{"linux_amd64"})
	in := t.TempDir()
	for _, pv := range [][3]string{{"platform", "thing", "1.0.0"}, {"hashicorp", "random", "9.9.0"}} {
		dir := filepath.Join(in, tfRegistry, pv[0], pv[1])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "terraform-provider-"+pv[1]+"_"+pv[2]+"_linux_amd64.zip"), enginetest.InHouseZip(t, pv[1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(t.TempDir(), "data")
	if code, stdout, stderr := runCommand("import", "--data-dir", data, "--allow-unsigned", "--allow-unsigned-hosts", tfRegistry, in); code != 0 || !strings.Contains(stdout, "imported 2 packages") {
		t.Fatalf("import --allow-unsigned --allow-unsigned-hosts %s: exit %d\n%s%s", tfRegistry, code, stdout, stderr)
	}

	m := startMirror(t, origin, data, nil, "--allow-unsigned-hosts", tfRegistry)
	cfgDir := writeConfig(t, map[string]string{"thing": tfRegistry + "/platform/thing@1.0.0", "random": tfRegistry + "/hashicorp/random@9.9.0"})
	out, err := tfRun(t, cfgDir, networkMirror(t, m.url), m.m.caFile, "init", "-no-color")
	if err != nil {
		t.Fatalf("terraform init of the in-house providers: %v\n%s", err, out)
	}
	for _, pv := range [][3]string{{"platform", "thing", "1.0.0"}, {"hashicorp", "random", "9.9.0"}} {
		if _, err := os.Stat(filepath.Join(cfgDir, ".terraform", "providers", tfRegistry, pv[0], pv[1], pv[2], "linux_amd64", "terraform-provider-"+pv[1])); err != nil {
			t.Errorf("%s/%s %s not installed: %v", pv[0], pv[1], pv[2], err)
		}
	}
	if origin.Hits(fakeorigin.Versions) == 0 {
		t.Errorf("the origin was never listed: the test shows nothing of an online mirror")
	}
	// The origin's own version is served beside them.
	_, body, err := m.get("/" + tfRegistry + "/hashicorp/random/index.json")
	if err != nil || !strings.Contains(string(body), `"3.5.0"`) || !strings.Contains(string(body), `"9.9.0"`) {
		t.Errorf("hashicorp/random index.json: %s %v, want the origin's 3.5.0 and the in-house 9.9.0", body, err)
	}
}

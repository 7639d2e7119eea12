package main

// Helpers of the tests of the import's trust anchor: the exporting
// mirror's public key as `tfmirror export-key` prints it, and a bundle
// forged as an attacker on the way across the gap would forge it.

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/verify"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// exporterKey runs `tfmirror export-key` on dataDir and writes the public
// key it prints to a file, whose path it returns.
func exporterKey(t *testing.T, dataDir string) string {
	t.Helper()
	code, stdout, stderr := runCommand("export-key", "--data-dir", dataDir)
	if code != 0 || !strings.HasPrefix(stdout, "-----BEGIN PGP PUBLIC KEY BLOCK-----") {
		t.Fatalf("export-key: exit %d\n%s%s", code, stdout, stderr)
	}
	path := filepath.Join(t.TempDir(), "EXPORTER.asc")
	if err := os.WriteFile(path, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// newTestKey makes an OpenPGP key named name.
func newTestKey(t *testing.T, name string) *openpgp.Entity {
	t.Helper()
	e, err := openpgp.NewEntity(name, "test only", name+"@example.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// armoredPublic is e's public key, ASCII-armored.
func armoredPublic(t *testing.T, e *openpgp.Entity) string {
	t.Helper()
	return verifytest.ArmoredPublic(t, e)
}

// writeKeyFile writes the public keys of es into one file.
func writeKeyFile(t *testing.T, es ...*openpgp.Entity) string {
	t.Helper()
	var all strings.Builder
	for _, e := range es {
		all.WriteString(armoredPublic(t, e) + "\n")
	}
	path := filepath.Join(t.TempDir(), "keys.asc")
	if err := os.WriteFile(path, []byte(all.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func testKeyID(e *openpgp.Entity) string { return fmt.Sprintf("%016X", e.PrimaryKey.KeyId) }

// What a forger does with the export's manifest.
type forgery int

const (
	keepManifest   forgery = iota // left as the exporting mirror signed it
	resignManifest                // rewritten for the forged files and signed by the forger
	dropManifest                  // removed, as if the bundle were made by tfmirror 1.x
)

// forgeBundle copies the export directory export and forges version of
// HOST/NS/TYPE (provider) in the copy as issue #19 tells it: every zip
// replaced by one holding a shell script, SHA256SUMS rewritten for them
// and signed by a new key, that key put into the evidence file instead of
// the origin's, the evidence's and VERSION.json's hashes rewritten. It
// returns the copy and the forger's key.
func forgeBundle(t *testing.T, export, provider, version string, mode forgery) (string, *openpgp.Entity) {
	t.Helper()
	forger := newTestKey(t, "forger")
	bad := filepath.Join(t.TempDir(), "forged")
	copyTree(t, export, bad)
	dir := filepath.Join(bad, filepath.FromSlash(provider))
	typ := filepath.Base(dir)
	prefix := "terraform-provider-" + typ + "_" + version + "_"

	evPath := filepath.Join(dir, prefix+"evidence.json")
	var ev map[string]any
	readJSON(t, evPath, &ev)
	sumsPath := filepath.Join(dir, prefix+"SHA256SUMS")
	sums, err := os.ReadFile(sumsPath)
	if err != nil {
		t.Fatal(err)
	}
	versionPath := filepath.Join(dir, version+".json")
	var versionJSON map[string]map[string]map[string]any
	readJSON(t, versionPath, &versionJSON)

	for pl, pkg := range ev["packages"].(map[string]any) {
		pkg := pkg.(map[string]any)
		var zbuf bytes.Buffer
		zw := zip.NewWriter(&zbuf)
		h := &zip.FileHeader{Name: "terraform-provider-" + typ + "_v" + version, Method: zip.Deflate}
		h.SetMode(0o755)
		f, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "#!/bin/sh\necho forged %s\nexit 1\n", pl)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		data := zbuf.Bytes()
		sum := sha256.Sum256(data)
		sha := hex.EncodeToString(sum[:])
		if err := os.WriteFile(filepath.Join(dir, prefix+pl+".zip"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		old := pkg["sha256"].(string)
		if !bytes.Contains(sums, []byte(old)) {
			t.Fatalf("SHA256SUMS lacks %s's %s", pl, old)
		}
		sums = bytes.ReplaceAll(sums, []byte(old), []byte(sha))
		pkg["sha256"], pkg["shasum"] = sha, sha
		h1, err := verify.H1(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		versionJSON["archives"][pl]["hashes"] = []string{h1}
	}
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, forger, bytes.NewReader(sums), nil); err != nil {
		t.Fatal(err)
	}
	writeFile(t, sumsPath, sums)
	writeFile(t, sumsPath+".sig", sig.Bytes())
	for _, doc := range ev["documents"].([]any) {
		doc.(map[string]any)["signing_keys"] = []map[string]string{{"key_id": testKeyID(forger), "ascii_armor": armoredPublic(t, forger)}}
	}
	writeJSON(t, evPath, ev)
	writeJSON(t, versionPath, versionJSON)

	manifest := filepath.Join(bad, "tfmirror-manifest.json")
	switch mode {
	case dropManifest:
		for _, p := range []string{manifest, manifest + ".sig"} {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	case resignManifest:
		signManifest(t, bad, forger)
	}
	return bad, forger
}

// signManifest writes dir's manifest for every file in it and signs it
// with signer, as an exporting mirror whose key signer is signs its
// export.
func signManifest(t *testing.T, dir string, signer *openpgp.Entity) {
	t.Helper()
	type entry struct {
		Path   string `json:"path"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	}
	var files []entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), "tfmirror-manifest.json") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		sum := sha256.Sum256(data)
		files = append(files, entry{filepath.ToSlash(rel), int64(len(data)), hex.EncodeToString(sum[:])})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(files, func(a, b entry) int { return strings.Compare(a.Path, b.Path) })
	data, _ := json.MarshalIndent(map[string]any{"format": 1, "signer": fmt.Sprintf("%X", signer.PrimaryKey.Fingerprint), "files": files}, "", "  ")
	var sig bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&sig, signer, bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "tfmirror-manifest.json")
	writeFile(t, manifest, data)
	writeFile(t, manifest+".sig", sig.Bytes())
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, data)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A publisher key vouches for its own namespace's SHA256SUMS only: pinned
// for registry.terraform.io/hashicorp, the origin's key brings in
// hashicorp's versions from a bundle whose exporter is not trusted, or
// that has no manifest, but not acme's, which the very same key signs; it
// does not vouch for a forged version of its namespace, nor for an
// unsigned one the bundle carries; a mirror key does not vouch for a
// version of a namespace its manifest does not list.
func TestPublisherKeysVouchForTheirNamespaceOnly(t *testing.T) {
	origin := syncOrigin(t)
	from := filepath.Join(t.TempDir(), "from")
	if _, _, code := syncInProcess(t, origin, from, syncManifest(t, tfRegistry, "")); code != 0 {
		t.Fatalf("sync exited %d", code)
	}
	export := filepath.Join(t.TempDir(), "export")
	if code, stdout, stderr := runCommand("export", "--data-dir", from, export); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, stderr)
	}
	publisher := filepath.Join(t.TempDir(), "hashicorp.asc")
	writeFile(t, publisher, []byte(origin.ArmoredPublicKey()))
	pinned := "registry.terraform.io/hashicorp=" + publisher
	random := []string{"registry.terraform.io/hashicorp/random 3.5.0", "registry.terraform.io/hashicorp/random 3.6.0"}
	noManifest := filepath.Join(t.TempDir(), "1.x")
	copyTree(t, export, noManifest)
	for _, name := range []string{"tfmirror-manifest.json", "tfmirror-manifest.json.sig"} {
		if err := os.Remove(filepath.Join(noManifest, name)); err != nil {
			t.Fatal(err)
		}
	}
	forged, forger := forgeBundle(t, export, "registry.terraform.io/hashicorp/random", "3.6.0", dropManifest)

	for _, tc := range []struct {
		name   string
		in     string
		args   []string
		want   []string // cached afterwards
		refuse []string // in the messages
	}{
		{"a bundle whose exporter is not trusted", export, []string{"--trusted-publisher-keys", pinned}, random,
			[]string{"registry.terraform.io/acme/widget 0.2.0 refused", "no publisher key is pinned for registry.terraform.io/acme", "no export key is trusted"}},
		{"a bundle of tfmirror 1.x", noManifest, []string{"--trusted-publisher-keys", pinned}, random,
			[]string{"registry.terraform.io/acme/widget 0.2.0 refused", "a bundle made by tfmirror 1.x", "no publisher key is pinned for registry.terraform.io/acme"}},
		{"the key pinned for another namespace", noManifest, []string{"--trusted-publisher-keys", "registry.terraform.io/acme=" + publisher},
			[]string{"registry.terraform.io/acme/widget 0.2.0"},
			[]string{"registry.terraform.io/hashicorp/random 3.6.0 refused", "no publisher key is pinned for registry.terraform.io/hashicorp"}},
		{"the key given as an export key", export, []string{"--trusted-export-keys", publisher}, nil,
			[]string{"registry.terraform.io/hashicorp/random 3.6.0 refused", "which is not among the trusted export keys"}},
		{"a forged version of the pinned namespace", forged, []string{"--trusted-publisher-keys", pinned},
			[]string{"registry.terraform.io/hashicorp/random 3.5.0"},
			[]string{"registry.terraform.io/hashicorp/random 3.6.0 refused", "signed by key " + testKeyID(forger) + ", which is not among the keys pinned for registry.terraform.io/hashicorp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fresh := filepath.Join(t.TempDir(), "fresh")
			code, stdout, stderr := runCommand(append(append([]string{"import", "--data-dir", fresh}, tc.args...), tc.in)...)
			t.Logf("import said: %s%s", stdout, stderr)
			if code != 1 {
				t.Errorf("import: exit %d, want 1", code)
			}
			for _, msg := range tc.refuse {
				if !strings.Contains(stderr, msg) {
					t.Errorf("import does not say %q", msg)
				}
			}
			if got := cachedVersions(t, fresh); !slices.Equal(got, tc.want) {
				t.Errorf("cached afterwards: %v, want %v", got, tc.want)
			}
		})
	}

	// An unsigned version the exporter's manifest covers is not vouched
	// for by a publisher key.
	inHouse := filepath.Join(export, "tf.corp.example", "platform", "thing")
	if err := os.MkdirAll(inHouse, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(inHouse, "terraform-provider-thing_1.0.0_linux_amd64.zip"), enginetest.InHouseZip(t, "thing"))
	code, stdout, stderr := runCommand("import", "--data-dir", filepath.Join(t.TempDir(), "fresh"), "--trusted-publisher-keys", pinned, "--allow-unsigned", export)
	if code != 1 || !strings.Contains(stderr, "tf.corp.example/platform/thing 1.0.0 refused") || !strings.Contains(stderr, "--allow-unsigned is for plain directories") {
		t.Errorf("import of an unsigned version added to a bundle: exit %d, want it refused\n%s%s", code, stdout, stderr)
	}
	// Nor by the exporter's key: its manifest does not list it.
	code, stdout, stderr = runCommand("import", "--data-dir", filepath.Join(t.TempDir(), "fresh"), "--trusted-export-keys", exporterKey(t, from), export)
	if code != 1 || !strings.Contains(stderr, "terraform-provider-thing_1.0.0_linux_amd64.zip is not in the manifest") || !strings.Contains(stdout, "imported 9 packages") {
		t.Errorf("import of a bundle with a file added: exit %d, want the rest imported and the added one refused\n%s%s", code, stdout, stderr)
	}
}

// The trust settings come from flags or TFMIRROR_ variables; a publisher
// key entry must name its namespace; key files are read when the admin
// options are made, and a bad one fails there, saying which.
func TestTrustFlags(t *testing.T) {
	env := map[string]string{
		"TFMIRROR_TRUSTED_EXPORT_KEYS":    "a.asc,b.asc",
		"TFMIRROR_TRUSTED_PUBLISHER_KEYS": "registry.terraform.io/hashicorp=h.asc",
		"TFMIRROR_EXPORT_KEY":             "/secret/key.asc",
	}
	cfg, err := parseServeFlags(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.TrustedExportKeys, []string{"a.asc", "b.asc"}) || !slices.Equal(cfg.TrustedPublisherKeys, []string{"registry.terraform.io/hashicorp=h.asc"}) || cfg.ExportKeyFile != "/secret/key.asc" {
		t.Errorf("from the environment: %q %q %q", cfg.TrustedExportKeys, cfg.TrustedPublisherKeys, cfg.ExportKeyFile)
	}
	for _, bad := range []string{"hashicorp=h.asc", "registry.terraform.io/hashicorp", "registry.terraform.io/hashicorp="} {
		if _, err := parseServeFlags([]string{"--trusted-publisher-keys", bad}, func(string) (string, bool) { return "", false }, io.Discard); err == nil {
			t.Errorf("--trusted-publisher-keys %s accepted", bad)
		}
	}

	dir := t.TempDir()
	good := writeKeyFile(t, newTestKey(t, "exporter"))
	for _, tc := range []struct {
		name string
		cfg  settings.Config
		want string
	}{
		{"missing export key file", settings.Config{DataDir: dir, TrustedExportKeys: []string{good, filepath.Join(dir, "missing.asc")}}, "--trusted-export-keys: open " + filepath.Join(dir, "missing.asc")},
		{"a private key as a trusted key", settings.Config{DataDir: dir, TrustedPublisherKeys: []string{"registry.terraform.io/hashicorp=" + privateKeyFile(t)}}, "--trusted-publisher-keys registry.terraform.io/hashicorp: "},
		{"a public key as the export key", settings.Config{DataDir: dir, ExportKeyFile: good}, "--export-key: " + good + ": holds a public key only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := adminOptions(tc.cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("adminOptions: %v, want %q", err, tc.want)
			}
		})
	}
	opts, err := adminOptions(settings.Config{DataDir: dir, TrustedExportKeys: []string{good}}, slog.New(slog.DiscardHandler))
	if err != nil || len(opts.Trust.ExportKeys) != 1 {
		t.Fatalf("adminOptions: %+v, %v", opts.Trust, err)
	}
	// The data directory's key is made on first use, once, mode 0600.
	if _, err := os.Stat(filepath.Join(dir, settings.ExportKeyName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the export key exists before any export: %v", err)
	}
	k1, err := opts.ExportKey()
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, settings.ExportKeyName))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the export key file: %v, %v; want mode 0600", info, err)
	}
	k2, _, err := ensureDataDirKey(dir, slog.New(slog.DiscardHandler))
	if err != nil || k2.Fingerprint() != k1.Fingerprint() {
		t.Errorf("the data directory's key read again: %v, %v; want %s", k2, err, k1.Fingerprint())
	}
}

func privateKeyFile(t *testing.T) string {
	t.Helper()
	k, _, err := ensureDataDirKey(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := k.WritePrivate(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "private.asc")
	writeFile(t, path, buf.Bytes())
	return path
}

// TestExportKeyOfNoDataDirectory: `tfmirror export-key` on a data
// directory that is not there (a mistyped --data-dir, the default of
// another working directory) exits 1 saying so, prints no key and makes
// nothing: the key it would make signs no export of the mirror meant,
// and the importing side would learn it only at its first import. On a
// data directory without a key yet it makes one, as before; with
// --export-key it reads that file whatever the data directory.
func TestExportKeyOfNoDataDirectory(t *testing.T) {
	t.Parallel()
	typo := filepath.Join(t.TempDir(), "tfmirror-dta")
	code, stdout, stderr := runCommand("export-key", "--data-dir", typo)
	t.Logf("export-key: exit %d\n%s%s", code, stdout, stderr)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "data directory "+typo+" does not exist") {
		t.Errorf("export-key on a data directory not there: exit %d, stdout %q; want 1, no key, and why", code, stdout)
	}
	if _, err := os.Stat(typo); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("export-key made %s (%v)", typo, err)
	}

	fresh := t.TempDir()
	code, stdout, stderr = runCommand("export-key", "--data-dir", fresh)
	if code != 0 || !strings.HasPrefix(stdout, "-----BEGIN PGP PUBLIC KEY BLOCK-----") || !strings.Contains(stderr, "made a new export key") {
		t.Errorf("export-key on a data directory without a key: exit %d\n%s%s", code, stdout, stderr)
	}

	keyFile := filepath.Join(fresh, settings.ExportKeyName)
	code, stdout, stderr = runCommand("export-key", "--data-dir", typo, "--export-key", keyFile)
	if code != 0 || !strings.HasPrefix(stdout, "-----BEGIN PGP PUBLIC KEY BLOCK-----") {
		t.Errorf("export-key --export-key with no data directory: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestExportKeyOfARunningServe: `tfmirror export-key --data-dir DIR` while
// a serve runs there prints the key that serve signs its exports with:
// the one its --export-key names, not a key of the data directory's
// (which it made, and printed, before).
func TestExportKeyOfARunningServe(t *testing.T) {
	t.Parallel()
	key, err := airgap.GenerateExportKey("replicas' export key")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "export-key.asc")
	var priv bytes.Buffer
	if err := key.WritePrivate(&priv); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, priv.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newE2E(t, fakeorigin.Options{}, "--export-key", keyFile)
	// The serve opens its admin socket as it starts serving.
	for i := 0; ; i++ {
		c, err := admin.Dial(t.Context(), e.dataDir)
		if err == nil {
			c.Close()
			break
		}
		if i == 100 {
			t.Fatalf("the serve's admin socket: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, stdout, stderr := runCommand("export-key", "--data-dir", e.dataDir)
	if code != 0 || !strings.Contains(stderr, key.Fingerprint()) || !strings.Contains(stderr, keyFile) {
		t.Fatalf("export-key: exit %d, want the serve's key %s (%s)\n%s%s", code, key.Fingerprint(), keyFile, stdout, stderr)
	}
	var want strings.Builder
	if err := key.WritePublic(&want); err != nil {
		t.Fatal(err)
	}
	if stdout != want.String() {
		t.Errorf("export-key printed another public key:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, settings.ExportKeyName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a key was made in the data directory: %v", err)
	}
}

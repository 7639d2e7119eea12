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
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/tfmirror/tfmirror/verify"
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
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return b.String()
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
		type entry struct {
			Path   string `json:"path"`
			Size   int64  `json:"size"`
			SHA256 string `json:"sha256"`
		}
		var files []entry
		err := filepath.WalkDir(bad, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), "tfmirror-manifest.json") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(bad, path)
			sum := sha256.Sum256(data)
			files = append(files, entry{filepath.ToSlash(rel), int64(len(data)), hex.EncodeToString(sum[:])})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(files, func(a, b entry) int { return strings.Compare(a.Path, b.Path) })
		data, _ := json.MarshalIndent(map[string]any{"format": 1, "signer": fmt.Sprintf("%X", forger.PrimaryKey.Fingerprint), "files": files}, "", "  ")
		var msig bytes.Buffer
		if err := openpgp.ArmoredDetachSign(&msig, forger, bytes.NewReader(data), nil); err != nil {
			t.Fatal(err)
		}
		writeFile(t, manifest, data)
		writeFile(t, manifest+".sig", msig.Bytes())
	}
	return bad, forger
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

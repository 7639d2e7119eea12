package airgap

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
)

func newKey(t *testing.T, name string) *ExportKey {
	t.Helper()
	k, err := GenerateExportKey(name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// publicOf is k's public key as an importing side reads it.
func publicOf(t *testing.T, keys ...*ExportKey) openpgp.EntityList {
	t.Helper()
	var buf bytes.Buffer
	for _, k := range keys {
		if err := k.WritePublic(&buf); err != nil {
			t.Fatal(err)
		}
	}
	el, err := ReadPublicKeys(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return el
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func paths(m *manifest) []string {
	var out []string
	for _, f := range m.Files {
		out = append(out, f.Path)
	}
	return out
}

// The manifest lists what the export wrote or checked and, signed, reads
// back with the exporter's key only; any change to it, or a missing
// signature, makes it vouch for nothing, each saying why.
func TestManifestWriteAndVerify(t *testing.T) {
	out := t.TempDir()
	key := newKey(t, "exporter")
	files := newExportFiles(outFor(t, out), key)
	if err := os.MkdirAll(filepath.Join(out, "h", "n", "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := files.writeFile(filepath.Join(out, "h", "n", "t", "a.zip"), []byte("archive")); err != nil {
		t.Fatal(err)
	}
	if _, err := files.writeJSON(filepath.Join(out, "h", "n", "t", "index.json"), map[string]any{"versions": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(out, "h", "n", "t", "stranger.zip"), "not written nor checked")
	unlisted, err := writeManifest(key, files)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(unlisted, []string{"h/n/t/stranger.zip"}) {
		t.Errorf("unlisted: %v, want the file the export did not write", unlisted)
	}
	m, err := readManifest(out, publicOf(t, key))
	if err != nil {
		t.Fatalf("readManifest with the exporter's key: %v", err)
	}
	if got := paths(m); !slices.Equal(got, []string{"h/n/t/a.zip", "h/n/t/index.json"}) {
		t.Errorf("manifest lists %v", got)
	}
	if f, want := m.Files[0], sha256.Sum256([]byte("archive")); f.Size != 7 || f.SHA256 != hex.EncodeToString(want[:]) {
		t.Errorf("entry %+v, want 7 bytes of sha256 %x", f, want)
	}
	if !strings.HasSuffix(key.Fingerprint(), m.Signer) || len(m.Signer) != 16 {
		t.Errorf("signer %q, key %s", m.Signer, key.Fingerprint())
	}

	other := newKey(t, "other")
	data, err := os.ReadFile(filepath.Join(out, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(dir string)
		keys   openpgp.EntityList
		want   string
	}{
		{"another key trusted", nil, publicOf(t, other), "which is not among the trusted export keys"},
		{"no key trusted", nil, nil, "no export key is trusted"},
		{"one byte of the manifest changed", func(dir string) {
			write(t, filepath.Join(dir, manifestName), strings.Replace(string(data), `"size": 7`, `"size": 8`, 1))
		}, publicOf(t, other, key), "changed after it was signed"},
		{"the signature removed", func(dir string) { os.Remove(filepath.Join(dir, manifestSigName)) }, publicOf(t, key), "has no signature"},
		{"the manifest removed", func(dir string) { os.Remove(filepath.Join(dir, manifestName)) }, publicOf(t, key), "is missing"},
		{"signed by another key", func(dir string) {
			sig, err := other.sign(data)
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, manifestSigName), string(sig))
		}, publicOf(t, key), "is signed by key " + other.Fingerprint()[24:] + ", which is not among"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range []string{manifestName, manifestSigName} {
				b, err := os.ReadFile(filepath.Join(out, name))
				if err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(dir, name), string(b))
			}
			if tc.change != nil {
				tc.change(dir)
			}
			_, err := readManifest(dir, tc.keys)
			var merr *manifestError
			if !errors.As(err, &merr) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("readManifest: %v, want a manifestError saying %q", err, tc.want)
			}
		})
	}
	if _, err := readManifest(t.TempDir(), publicOf(t, key)); !errors.Is(err, errNoManifest) {
		t.Errorf("readManifest of a directory without manifest: %v, want errNoManifest", err)
	}
}

// An incremental export keeps listing what an earlier export by the same
// key listed and is unchanged, not what changed since, nor what another
// key's manifest listed.
func TestManifestIncremental(t *testing.T) {
	out := t.TempDir()
	key := newKey(t, "exporter")
	first := newExportFiles(outFor(t, out), key)
	if _, err := first.writeFile(filepath.Join(out, "kept.zip"), []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := first.writeFile(filepath.Join(out, "changed.zip"), []byte("before")); err != nil {
		t.Fatal(err)
	}
	if _, err := writeManifest(key, first); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(out, "changed.zip"), "after!")
	first.dir.Close() // one export at a time into a directory

	second := newExportFiles(outFor(t, out), key)
	if _, err := second.writeFile(filepath.Join(out, "new.zip"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	unlisted, err := writeManifest(key, second)
	if err != nil {
		t.Fatal(err)
	}
	m, err := readManifest(out, publicOf(t, key))
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(m); !slices.Equal(got, []string{"kept.zip", "new.zip"}) {
		t.Errorf("second manifest lists %v, want kept.zip and new.zip", got)
	}
	if !slices.Equal(unlisted, []string{"changed.zip"}) {
		t.Errorf("unlisted %v, want changed.zip", unlisted)
	}

	// Another key does not inherit what this one listed.
	second.dir.Close()
	third := newExportFiles(outFor(t, out), newKey(t, "other"))
	unlisted, err = writeManifest(newKey(t, "other"), third)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(unlisted, []string{"changed.zip", "kept.zip", "new.zip"}) {
		t.Errorf("another key's export left out %v, want every file", unlisted)
	}
}

// covers takes a version whose every file the manifest lists with the
// bytes found, and refuses one with a file not listed, differing, or
// listed but missing.
func TestBundleCovers(t *testing.T) {
	m := map[string]manifestFile{
		"h/n/t/terraform-provider-t_1.0.0_evidence.json":    {Path: "h/n/t/terraform-provider-t_1.0.0_evidence.json", Size: 2, SHA256: strings.Repeat("a", 64)},
		"h/n/t/terraform-provider-t_1.0.0_linux_amd64.zip":  {Path: "h/n/t/terraform-provider-t_1.0.0_linux_amd64.zip", Size: 10, SHA256: strings.Repeat("b", 64)},
		"h/n/t/terraform-provider-t_1.0.0_darwin_arm64.zip": {Path: "h/n/t/terraform-provider-t_1.0.0_darwin_arm64.zip", Size: 11, SHA256: strings.Repeat("c", 64)},
		"h/n/t/terraform-provider-t_1.0.1_linux_amd64.zip":  {Path: "h/n/t/terraform-provider-t_1.0.1_linux_amd64.zip", Size: 12, SHA256: strings.Repeat("d", 64)},
	}
	b := &bundle{dir: "/in", shown: "IN", manifest: m, signer: "0123456789ABCDEF"}
	prefix := "h/n/t/terraform-provider-t_1.0.0_"
	files := func() *versionFiles {
		return &versionFiles{b: b,
			read: map[string]manifestFile{"h/n/t/terraform-provider-t_1.0.0_evidence.json": m["h/n/t/terraform-provider-t_1.0.0_evidence.json"]},
			zips: map[string]int64{"h/n/t/terraform-provider-t_1.0.0_linux_amd64.zip": 10, "h/n/t/terraform-provider-t_1.0.0_darwin_arm64.zip": 11}}
	}
	shas, err := b.covers(files(), prefix, "h/n/t/1.0.0.json")
	if err != nil || shas["h/n/t/terraform-provider-t_1.0.0_darwin_arm64.zip"] != strings.Repeat("c", 64) || len(shas) != 2 {
		t.Fatalf("covers: %v, %v", shas, err)
	}
	for _, tc := range []struct {
		name   string
		change func(*versionFiles)
		want   string
	}{
		{"a file not listed", func(vf *versionFiles) { vf.zips["h/n/t/terraform-provider-t_1.0.0_windows_amd64.zip"] = 3 },
			"IN/h/n/t/terraform-provider-t_1.0.0_windows_amd64.zip is not in the manifest IN/tfmirror-manifest.json (signed by the trusted export key 0123456789ABCDEF)"},
		{"an archive of another size", func(vf *versionFiles) { vf.zips["h/n/t/terraform-provider-t_1.0.0_linux_amd64.zip"] = 9 },
			"terraform-provider-t_1.0.0_linux_amd64.zip differs from the manifest"},
		{"a file of other bytes", func(vf *versionFiles) {
			f := vf.read["h/n/t/terraform-provider-t_1.0.0_evidence.json"]
			f.SHA256 = strings.Repeat("e", 64)
			vf.read[f.Path] = f
		}, "terraform-provider-t_1.0.0_evidence.json differs from the manifest"},
		{"a listed file missing", func(vf *versionFiles) { delete(vf.zips, "h/n/t/terraform-provider-t_1.0.0_darwin_arm64.zip") },
			"terraform-provider-t_1.0.0_darwin_arm64.zip is listed in the manifest IN/tfmirror-manifest.json (signed by the trusted export key 0123456789ABCDEF) but missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vf := files()
			tc.change(vf)
			if _, err := b.covers(vf, prefix, "h/n/t/1.0.0.json"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("covers: %v, want %q", err, tc.want)
			}
		})
	}
}

// Key files: several public keys in one file; a private key is refused
// where public keys are trusted; an export key reads back as written.
func TestKeyFiles(t *testing.T) {
	a, b := newKey(t, "a"), newKey(t, "b")
	if got := publicOf(t, a, b); len(got) != 2 {
		t.Errorf("two keys in one file read as %d", len(got))
	}
	var priv bytes.Buffer
	if err := a.WritePrivate(&priv); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPublicKeys(bytes.NewReader(priv.Bytes())); err == nil || !strings.Contains(err.Error(), "private key") {
		t.Errorf("ReadPublicKeys of a private key: %v", err)
	}
	if _, err := ReadPublicKeys(strings.NewReader("not a key")); err == nil {
		t.Error("ReadPublicKeys of no key succeeded")
	}
	back, err := ReadExportKey(bytes.NewReader(priv.Bytes()))
	if err != nil || back.Fingerprint() != a.Fingerprint() {
		t.Fatalf("ReadExportKey: %v, %v", back, err)
	}
	var pub bytes.Buffer
	if err := a.WritePublic(&pub); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadExportKey(&pub); err == nil || !strings.Contains(err.Error(), "public key only") {
		t.Errorf("ReadExportKey of a public key: %v", err)
	}
	sig, err := back.sign([]byte("manifest"))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := checkDetached(publicOf(t, a), []byte("manifest"), sig); err != nil || !strings.HasSuffix(a.Fingerprint(), id) {
		t.Errorf("a signature of the key read back: %s, %v", id, err)
	}
	if id := signatureIssuer(sig); !strings.HasSuffix(a.Fingerprint(), id) || id == "" {
		t.Errorf("signatureIssuer: %q", id)
	}
	for _, tc := range []struct{ in, want string }{
		{"registry.terraform.io/hashicorp", "registry.terraform.io/hashicorp"},
		{"Registry.Terraform.IO/HashiCorp", "registry.terraform.io/hashicorp"},
		{"hashicorp", ""}, {"registry.terraform.io/hashicorp/aws", ""}, {"/x", ""},
	} {
		ns, err := ParseNamespace(tc.in)
		if got := ns.String(); tc.want == "" && err == nil || tc.want != "" && (err != nil || got != tc.want) {
			t.Errorf("ParseNamespace(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

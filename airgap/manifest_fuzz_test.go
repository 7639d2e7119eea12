package airgap

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
)

// fuzzKeys are the keys FuzzReadManifest signs with, made once: the
// trusted export key, and another key nobody trusts.
var fuzzKeys = sync.OnceValues(func() (*ExportKey, *ExportKey) {
	trusted, err := GenerateExportKey("trusted")
	if err != nil {
		panic(err)
	}
	stranger, err := GenerateExportKey("stranger")
	if err != nil {
		panic(err)
	}
	return trusted, stranger
})

// fuzzSigned is the one manifest the trusted key signed for
// FuzzReadManifest, and that signature.
const fuzzSigned = `{"format":1,"signer":"","files":[{"path":"registry.terraform.io/hashicorp/random/3.5.0.json","size":10,"sha256":"` +
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + `"}]}`

// FuzzReadManifest feeds the manifest reader manifests and signatures:
// the trusted key's signature of one fixed manifest beside other bytes
// (sig 0), the bytes signed by a key that is not trusted (1), the bytes
// signed by the trusted key (2), or signature bytes of the fuzzer's own
// (3). After every input it checks that nothing is accepted that the
// trusted key did not sign as it is read, and that whatever is accepted
// lists only files inside the bundle, once each, with a size and a
// sha256.
func FuzzReadManifest(f *testing.F) {
	f.Add([]byte(fuzzSigned), uint8(0), []byte(nil))
	f.Add([]byte(fuzzSigned+" "), uint8(0), []byte(nil))
	f.Add([]byte(strings.Replace(fuzzSigned, "3.5.0", "9.9.9", 1)), uint8(0), []byte(nil))
	f.Add([]byte(fuzzSigned), uint8(1), []byte(nil))
	f.Add([]byte(`{"format":1,"files":[{"path":"../x","size":1,"sha256":"`+strings.Repeat("a", 64)+`"}]}`), uint8(2), []byte(nil))
	f.Add([]byte(`{"format":1,"files":[{"path":"a","size":1,"sha256":"`+strings.Repeat("a", 64)+`"},{"path":"a","size":1,"sha256":"`+strings.Repeat("a", 64)+`"}]}`), uint8(2), []byte(nil))
	f.Add([]byte(`{"format":1,"files":[{"path":"a\\b","size":-1,"sha256":"x"}]}`), uint8(2), []byte(nil))
	f.Add([]byte(fuzzSigned), uint8(3), []byte("-----BEGIN PGP SIGNATURE-----\n\n-----END PGP SIGNATURE-----\n"))
	trusted, stranger := fuzzKeys()
	signedSig, err := trusted.sign([]byte(fuzzSigned))
	if err != nil {
		f.Fatal(err)
	}
	keyring := trusted.keyring()
	f.Fuzz(func(t *testing.T, data []byte, mode uint8, sig []byte) {
		var err error
		switch mode % 4 {
		case 0:
			sig = signedSig
		case 1:
			sig, err = stranger.sign(data)
		case 2:
			sig, err = trusted.sign(data)
		}
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, manifestName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, manifestSigName), sig, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := readManifest(dir, keyring)
		if err != nil {
			return
		}
		// Accepted: the trusted key signed exactly these bytes.
		switch mode % 4 {
		case 1:
			t.Fatalf("a manifest signed by a key nobody trusts was accepted: %q", data)
		case 0, 3:
			if !bytes.Equal(data, []byte(fuzzSigned)) {
				t.Fatalf("a manifest the trusted key did not sign was accepted: %q", data)
			}
		}
		seen := map[string]bool{}
		for _, file := range m.Files {
			if !filepath.IsLocal(filepath.FromSlash(file.Path)) || strings.Contains(file.Path, `\`) {
				t.Fatalf("accepted a manifest listing %q, outside the bundle", file.Path)
			}
			if seen[file.Path] {
				t.Fatalf("accepted a manifest listing %q twice", file.Path)
			}
			seen[file.Path] = true
			if file.Size < 0 || !sha256hex.Valid(file.SHA256) {
				t.Fatalf("accepted a manifest entry without size or sha256: %+v", file)
			}
		}
	})
}

package verify

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"golang.org/x/mod/sumdb/dirhash"

	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// FuzzParseSHA256SUMS: a SHA256SUMS document the origin sends is either
// refused whole or read into digests that are 64 lowercase hex digits
// under names with no surrounding space, which read back the same when
// written out again.
func FuzzParseSHA256SUMS(f *testing.F) {
	digest := strings.Repeat("ab", 32)
	for _, s := range []string{
		digest + "  terraform-provider-x_1.0.0_linux_amd64.zip\n",
		digest + " *terraform-provider-x_1.0.0_linux_amd64.zip\r\n\n" + strings.ToUpper(digest) + " b.zip",
		digest + "  a\n" + strings.Repeat("cd", 32) + "  a\n",
		digest + "\n",
		"  \n\t\n",
		digest + "   name with  spaces  \n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sums, err := ParseSHA256SUMS(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Reason != ReasonChecksum {
				t.Fatalf("refusal %v is not a ReasonChecksum *Error", err)
			}
			return
		}
		var again bytes.Buffer
		for _, name := range slices.Sorted(maps.Keys(sums)) {
			sum := sums[name]
			if !sha256hex.Valid(sum) || sum != strings.ToLower(sum) {
				t.Fatalf("digest %q of %q is not 64 lowercase hex digits", sum, name)
			}
			if name == "" || name != strings.TrimSpace(name) || strings.ContainsAny(name, "\n") {
				t.Fatalf("name %q is empty, has surrounding space or a line break", name)
			}
			fmt.Fprintf(&again, "%s  %s\n", sum, name)
		}
		back, err := ParseSHA256SUMS(again.Bytes())
		if err != nil || !maps.Equal(back, sums) {
			t.Fatalf("written out again, %q reads as %v, %v; want %v", again.Bytes(), back, err, sums)
		}
	})
}

// fuzzLimits keep one fuzzed archive's check small: a zip that declares
// or inflates more is refused as too large, which is what is fuzzed.
var fuzzLimits = Limits{MaxUnpackedBytes: 1 << 20, MaxEntries: 64}

// FuzzCheckArchive: whatever zip the origin sends, the checks refuse it
// with an *Error of a known reason or accept it; an archive accepted as a
// provider package has the h1: hash the clients compute for it
// (golang.org/x/mod/sumdb/dirhash, which Terraform and OpenTofu use) and a
// provider executable at its top level; one accepted as a CLI release
// has no entry that would unpack outside its directory.
func FuzzCheckArchive(f *testing.F) {
	seed := func(entries [][2]string) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, e := range entries {
			w, err := zw.Create(e[0])
			if err != nil {
				f.Fatal(err)
			}
			w.Write([]byte(e[1])) //nolint:errcheck // memory
		}
		if err := zw.Close(); err != nil {
			f.Fatal(err)
		}
		return buf.Bytes()
	}
	provider := seed([][2]string{{"terraform-provider-x_v1.0.0", "#!/bin/sh\n"}})
	f.Add(provider)
	f.Add(seed([][2]string{{"terraform-provider-x", "x"}, {"docs/", ""}, {"docs/a.md", "a"}, {"terraform", "t"}}))
	f.Add(seed([][2]string{{"terraform-provider-x.exe", "x"}, {"../terraform", "t"}}))
	f.Add(seed([][2]string{{"terraform", "t"}, {"terraform", "again"}}))
	f.Add(seed(nil))
	f.Add(verifytest.Zeros("terraform-provider-x", 2<<20))
	f.Add(verifytest.Overlapping("terraform-provider-x", 3, 1<<10))
	dir := f.TempDir()
	known := Reasons()
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		h1, err := CheckArchive(ctx, bytes.NewReader(data), int64(len(data)), "x", fuzzLimits)
		var e *Error
		if err != nil && (!errors.As(err, &e) || !slices.Contains(known, e.Reason)) {
			t.Fatalf("refusal %v is not an *Error of a known reason", err)
		}
		if err != nil && bytes.Equal(data, provider) {
			t.Fatalf("a plain provider package refused: %v", err)
		}
		if err == nil {
			zr, zerr := zip.NewReader(bytes.NewReader(data), int64(len(data)))
			if zerr != nil {
				t.Fatalf("accepted an archive the zip package cannot read: %v", zerr)
			}
			if !slices.ContainsFunc(zr.File, func(f *zip.File) bool { return isProviderExecutable(f, "x") }) {
				t.Fatal("accepted an archive without the provider's executable")
			}
			p := filepath.Join(dir, "p.zip")
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			want, derr := dirhash.HashZip(p, dirhash.Hash1)
			if derr != nil || h1 != want {
				t.Fatalf("h1 %s accepted, the clients' hash is %s (%v)", h1, want, derr)
			}
		}
		err = CheckCLIArchive(ctx, bytes.NewReader(data), int64(len(data)), "terraform", fuzzLimits)
		if err != nil && (!errors.As(err, &e) || !slices.Contains(known, e.Reason)) {
			t.Fatalf("CLI refusal %v is not an *Error of a known reason", err)
		}
		if err == nil {
			zr, zerr := zip.NewReader(bytes.NewReader(data), int64(len(data)))
			if zerr != nil {
				t.Fatalf("accepted a CLI archive the zip package cannot read: %v", zerr)
			}
			for _, f := range zr.File {
				if clean := path.Clean(f.Name); path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") ||
					strings.ContainsAny(f.Name, "\\:\x00") {
					t.Fatalf("accepted a CLI archive whose entry %q unpacks outside its directory", f.Name)
				}
			}
		}
	})
}

// FuzzSignature: a detached signature the origin sends over a SHA256SUMS
// verifies with the origin's key only when that key made it over that
// document: a signature altered in any way, over the document or over
// another, is refused with ReasonSignature, never with a panic.
func FuzzSignature(f *testing.F) {
	key, err := openpgp.NewEntity("origin", "", "origin@example.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		f.Fatal(err)
	}
	armoredKey := verifytest.ArmoredPublic(f, key)
	doc := []byte(strings.Repeat("ab", 32) + "  terraform-provider-x_1.0.0_linux_amd64.zip\n")
	var good bytes.Buffer
	if err := openpgp.DetachSign(&good, key, bytes.NewReader(doc), nil); err != nil {
		f.Fatal(err)
	}
	var armoredSig bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&armoredSig, key, bytes.NewReader(doc), nil); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes(), false)
	f.Add(armoredSig.Bytes(), false)
	f.Add(good.Bytes(), true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, sig []byte, otherDoc bool) {
		document := doc
		if otherDoc {
			document = append(slices.Clone(doc), '\n')
		}
		_, err := SignatureTime(document, sig, []string{armoredKey})
		if err != nil && !otherDoc && (bytes.Equal(sig, good.Bytes()) || bytes.Equal(sig, armoredSig.Bytes())) {
			t.Fatalf("the key's own signature over the document refused: %v", err)
		}
		if err == nil {
			if otherDoc {
				t.Fatal("a signature verified over a document its key did not sign")
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Reason != ReasonSignature {
			t.Fatalf("refusal %v is not a ReasonSignature *Error", err)
		}
	})
}

// FuzzSigningKeys: whatever key block the origin sends, reading it ends
// within the bounds (no more primary keys than MaxSigningKeys) or refuses
// it as a ReasonSignature *Error.
func FuzzSigningKeys(f *testing.F) {
	key, err := openpgp.NewEntity("origin", "", "origin@example.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(verifytest.ArmoredPublic(f, key))
	if b, err := os.ReadFile(filepath.Join("testdata", "hashicorp-2014-rsa2048.asc")); err == nil {
		f.Add(string(b))
	}
	f.Add(verifytest.SelfSignedKey(verifytest.RSAKey(2048), 3))
	f.Add("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n-----END PGP PUBLIC KEY BLOCK-----\n")
	f.Fuzz(func(t *testing.T, armored string) {
		keys, err := SigningKeys([]string{armored})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Reason != ReasonSignature {
				t.Fatalf("refusal %v is not a ReasonSignature *Error", err)
			}
			return
		}
		if len(keys) == 0 || len(keys) > MaxSigningKeys {
			t.Fatalf("%d keys read, want 1 to %d", len(keys), MaxSigningKeys)
		}
		for _, k := range keys {
			if k.PrivateKey != nil {
				t.Fatal("a secret key was read from an origin's key block")
			}
		}
	})
}

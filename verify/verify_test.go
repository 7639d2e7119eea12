package verify

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"golang.org/x/mod/sumdb/dirhash"
)

func newKey(t *testing.T, name string) *openpgp.Entity {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", name+"@example.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func armored(t *testing.T, e *openpgp.Entity) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return buf.String()
}

func sign(t *testing.T, e *openpgp.Entity, doc []byte) []byte {
	t.Helper()
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, e, bytes.NewReader(doc), nil); err != nil {
		t.Fatal(err)
	}
	return sig.Bytes()
}

func reasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func TestCheckSignature(t *testing.T) {
	good, other := newKey(t, "origin"), newKey(t, "someone else")
	doc := []byte(strings.Repeat("ab", 32) + "  terraform-provider-x_1.0.0_linux_amd64.zip\n")
	sig := sign(t, good, doc)
	var armoredSig bytes.Buffer
	aw, _ := armor.Encode(&armoredSig, "PGP SIGNATURE", nil)
	aw.Write(sig)
	aw.Close()
	corrupt := bytes.Clone(sig)
	corrupt[len(corrupt)-5] ^= 0xff

	tests := []struct {
		name    string
		doc     []byte
		sig     []byte
		keys    []string
		wantErr bool
	}{
		{name: "good key", doc: doc, sig: sig, keys: []string{armored(t, good)}},
		{name: "armored signature", doc: doc, sig: armoredSig.Bytes(), keys: []string{armored(t, good)}},
		{name: "second key matches", doc: doc, sig: sig, keys: []string{armored(t, other), armored(t, good)}},
		{name: "wrong key", doc: doc, sig: sig, keys: []string{armored(t, other)}, wantErr: true},
		{name: "corrupted signature", doc: doc, sig: corrupt, keys: []string{armored(t, good)}, wantErr: true},
		{name: "different document", doc: append(bytes.Clone(doc), 'x'), sig: sig, keys: []string{armored(t, good)}, wantErr: true},
		{name: "no keys", doc: doc, sig: sig, wantErr: true},
		{name: "garbage key", doc: doc, sig: sig, keys: []string{"not a key"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSignature(tc.doc, tc.sig, tc.keys)
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrIntegrity) || reasonOf(err) != ReasonSignature {
				t.Fatalf("got %v, want an integrity error with reason signature", err)
			}
		})
	}
}

func TestParseAndVerifySums(t *testing.T) {
	a, b := strings.Repeat("0a", 32), strings.Repeat("0B", 32)
	doc := a + "  pkg_linux_amd64.zip\n" + b + " *pkg_darwin_arm64.zip\r\n\n"
	sums, err := ParseSHA256SUMS([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if sums["pkg_linux_amd64.zip"] != a || sums["pkg_darwin_arm64.zip"] != strings.ToLower(b) {
		t.Fatalf("parsed %v", sums)
	}

	tests := []struct {
		name     string
		filename string
		shasum   string
		want     Reason
	}{
		{"match", "pkg_linux_amd64.zip", a, ""},
		{"match in other case", "pkg_darwin_arm64.zip", b, ""},
		{"file missing", "pkg_windows_amd64.zip", a, ReasonMissingChecksum},
		{"mismatch", "pkg_linux_amd64.zip", b, ReasonChecksum},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifySums(sums, tc.filename, tc.shasum)
			if reasonOf(err) != tc.want || (tc.want == "") != (err == nil) {
				t.Fatalf("got %v, want reason %q", err, tc.want)
			}
		})
	}

	for name, bad := range map[string]string{
		"short digest": "abc  file.zip\n",
		"no file name": a + "\n",
		"not hex":      strings.Repeat("zz", 32) + "  file.zip\n",
		"conflicting":  a + "  f.zip\n" + b + "  f.zip\n",
	} {
		t.Run("malformed/"+name, func(t *testing.T) {
			if _, err := ParseSHA256SUMS([]byte(bad)); !errors.Is(err, ErrIntegrity) {
				t.Fatalf("got %v, want an integrity error", err)
			}
		})
	}
}

func TestH1MatchesDirhash(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range map[string]string{
		"terraform-provider-x_v1.0.0": "#!/bin/sh\necho hi\n",
		"LICENSE":                     "MPL",
		"docs/readme.md":              "# x",
	} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	zw.Close()
	data := buf.Bytes()

	path := filepath.Join(t.TempDir(), "p.zip")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := dirhash.HashZip(path, dirhash.Hash1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := H1(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if got != want || !strings.HasPrefix(got, "h1:") {
		t.Fatalf("H1 = %s, dirhash.HashZip = %s", got, want)
	}

	garbage := []byte("this is not a zip file")
	if _, err := H1(bytes.NewReader(garbage), int64(len(garbage))); reasonOf(err) != ReasonBadArchive {
		t.Fatalf("H1 of garbage: %v, want reason bad_archive", err)
	}
}

func TestZH(t *testing.T) {
	sum := sha256.Sum256([]byte("archive"))
	if got, want := ZH(strings.ToUpper(hex.EncodeToString(sum[:]))), "zh:"+hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("ZH = %s, want %s", got, want)
	}
}

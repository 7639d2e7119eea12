package verify

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"golang.org/x/mod/sumdb/dirhash"

	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// newKey generates an EdDSA (Ed25519) key: fast enough for every test run.
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
	return verifytest.ArmoredPublic(t, e)
}

func sign(t *testing.T, e *openpgp.Entity, doc []byte) []byte {
	t.Helper()
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, e, bytes.NewReader(doc), nil); err != nil {
		t.Fatal(err)
	}
	return sig.Bytes()
}

// reasonOf extracts the Reason the way callers do: errors.As to *Error.
func reasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// checkReason fails unless err is nil for want == "", or an integrity
// error with reason want (also when wrapped).
func checkReason(t *testing.T, err error, want Reason) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	wrapped := fmt.Errorf("fetching package: %w", err)
	if !errors.Is(wrapped, ErrIntegrity) {
		t.Fatalf("errors.Is(%v, ErrIntegrity) = false", err)
	}
	if got := reasonOf(wrapped); got != want {
		t.Fatalf("reason %q (error %v), want %q", got, err, want)
	}
}

func TestCheckSignature(t *testing.T) {
	good, other := newKey(t, "origin"), newKey(t, "someone else")
	doc := []byte(strings.Repeat("ab", 32) + "  terraform-provider-x_1.0.0_linux_amd64.zip\n")
	sig := sign(t, good, doc)
	var armoredSig bytes.Buffer
	aw, err := armor.Encode(&armoredSig, "PGP SIGNATURE", nil)
	if err != nil {
		t.Fatal(err)
	}
	aw.Write(sig)
	aw.Close()
	corrupt := bytes.Clone(sig)
	corrupt[len(corrupt)-5] ^= 0xff
	goodKey, otherKey := armored(t, good), armored(t, other)
	// An answer that carries its signer's key with the signature: the
	// key's packets then the signature's, and the armored key block
	// then the armored signature. Only the keys given decide.
	var withKey bytes.Buffer
	if err := other.Serialize(&withKey); err != nil {
		t.Fatal(err)
	}
	withKey.Write(sign(t, other, doc))
	var armoredWithKey bytes.Buffer
	armoredWithKey.WriteString(otherKey)
	aw2, err := armor.Encode(&armoredWithKey, "PGP SIGNATURE", nil)
	if err != nil {
		t.Fatal(err)
	}
	aw2.Write(sign(t, other, doc))
	aw2.Close()

	tests := []struct {
		name string
		doc  []byte
		sig  []byte
		keys []string
		want Reason
	}{
		{name: "good key", doc: doc, sig: sig, keys: []string{goodKey}},
		{name: "armored signature", doc: doc, sig: armoredSig.Bytes(), keys: []string{goodKey}},
		{name: "second key matches", doc: doc, sig: sig, keys: []string{otherKey, goodKey}},
		{name: "unreadable key then matching key", doc: doc, sig: sig, keys: []string{"not a key", goodKey}},
		{name: "wrong key", doc: doc, sig: sig, keys: []string{otherKey}, want: ReasonSignature},
		{name: "signer's key carried before the signature", doc: doc, sig: withKey.Bytes(), keys: []string{goodKey}, want: ReasonSignature},
		{name: "signer's armored key carried before the signature", doc: doc, sig: armoredWithKey.Bytes(), keys: []string{goodKey}, want: ReasonSignature},
		{name: "corrupted signature", doc: doc, sig: corrupt, keys: []string{goodKey}, want: ReasonSignature},
		{name: "garbage signature", doc: doc, sig: []byte("not a signature"), keys: []string{goodKey}, want: ReasonSignature},
		{name: "empty signature", doc: doc, sig: nil, keys: []string{goodKey}, want: ReasonSignature},
		{name: "signature over a different document", doc: append(bytes.Clone(doc), 'x'), sig: sig, keys: []string{goodKey}, want: ReasonSignature},
		{name: "no keys", doc: doc, sig: sig, want: ReasonSignature},
		{name: "garbage key", doc: doc, sig: sig, keys: []string{"not a key"}, want: ReasonSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkReason(t, CheckSignature(tc.doc, tc.sig, tc.keys), tc.want)
		})
	}
}

func TestParseSHA256SUMS(t *testing.T) {
	a, b := strings.Repeat("0a", 32), strings.Repeat("0B", 32)
	tests := []struct {
		name string
		doc  string
		want map[string]string // nil: malformed
	}{
		{name: "two spaces", doc: a + "  pkg_linux_amd64.zip\n", want: map[string]string{"pkg_linux_amd64.zip": a}},
		{name: "binary marker, uppercase hex, CRLF, blank line",
			doc:  a + "  pkg_linux_amd64.zip\n" + b + " *pkg_darwin_arm64.zip\r\n\n",
			want: map[string]string{"pkg_linux_amd64.zip": a, "pkg_darwin_arm64.zip": strings.ToLower(b)}},
		{name: "single space", doc: a + " pkg.zip", want: map[string]string{"pkg.zip": a}},
		// The character after the digest's space is the mode: a name
		// that starts with "*" is read as it was signed.
		{name: "text mode, a name starting with a star", doc: a + "  *x.zip\n" + b + " **y.zip\n",
			want: map[string]string{"*x.zip": a, "*y.zip": strings.ToLower(b)}},
		{name: "same line twice", doc: a + "  f.zip\n" + a + "  f.zip\n", want: map[string]string{"f.zip": a}},
		{name: "empty document", doc: "", want: map[string]string{}},
		{name: "short digest", doc: "abc  file.zip\n"},
		{name: "long digest", doc: a + "00  file.zip\n"},
		{name: "no file name", doc: a + "\n"},
		{name: "only spaces after digest", doc: a + "    \n"},
		{name: "not hex", doc: strings.Repeat("zz", 32) + "  file.zip\n"},
		{name: "tab separator", doc: a + "\tfile.zip\n"},
		{name: "leading space", doc: " " + a + "  file.zip\n"},
		{name: "malformed second line", doc: a + "  f.zip\nhello world\n"},
		{name: "conflicting digests", doc: a + "  f.zip\n" + b + "  f.zip\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSHA256SUMS([]byte(tc.doc))
			if tc.want == nil {
				checkReason(t, err, ReasonChecksum)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("parsed %v, want %v", got, tc.want)
			}
		})
	}
}

func TestVerifySums(t *testing.T) {
	a, b := strings.Repeat("0a", 32), strings.Repeat("0b", 32)
	sums := map[string]string{"pkg_linux_amd64.zip": a, "pkg_darwin_arm64.zip": b}
	tests := []struct {
		name     string
		filename string
		shasum   string
		want     Reason
	}{
		{"match", "pkg_linux_amd64.zip", a, ""},
		{"match in upper case", "pkg_darwin_arm64.zip", strings.ToUpper(b), ""},
		{"SHA256SUMS without the file", "pkg_windows_amd64.zip", a, ReasonMissingChecksum},
		{"checksum mismatch", "pkg_linux_amd64.zip", b, ReasonChecksum},
		{"empty registry shasum", "pkg_linux_amd64.zip", "", ReasonChecksum},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkReason(t, VerifySums(sums, tc.filename, tc.shasum), tc.want)
		})
	}
}

// zipOf builds a zip from entries in order; names ending in "/" are
// directory entries.
func zipOf(t *testing.T, entries [][2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.Create(e[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestH1(t *testing.T) {
	tests := []struct {
		name    string
		entries [][2]string
	}{
		{name: "one executable", entries: [][2]string{{"terraform-provider-x_v1.0.0", "#!/bin/sh\necho hi\n"}}},
		{name: "several files in subdirectories, unsorted", entries: [][2]string{
			{"terraform-provider-x_v1.0.0", "#!/bin/sh\necho hi\n"},
			{"LICENSE", "MPL"},
			{"docs/", ""},
			{"docs/readme.md", "# x"},
			{"docs/deep/nested/a.txt", "a"},
			{"CHANGELOG.md", ""},
		}},
		{name: "empty zip", entries: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := zipOf(t, tc.entries)
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
		})
	}

	t.Run("content changes the hash", func(t *testing.T) {
		a := zipOf(t, [][2]string{{"f", "a"}})
		b := zipOf(t, [][2]string{{"f", "b"}})
		ha, _ := H1(bytes.NewReader(a), int64(len(a)))
		hb, _ := H1(bytes.NewReader(b), int64(len(b)))
		if ha == hb {
			t.Fatalf("different contents, same h1 %s", ha)
		}
	})

	good := zipOf(t, [][2]string{{"terraform-provider-x_v1.0.0", strings.Repeat("x", 4096)}})
	corruptEntry := bytes.Clone(good)
	// Damage the compressed data of the only entry, past its local header.
	corruptEntry[60] ^= 0xff
	corruptEntry[61] ^= 0xff
	bad := []struct {
		name string
		data []byte
	}{
		{name: "garbage", data: []byte("this is not a zip file")},
		{name: "empty", data: nil},
		{name: "truncated", data: good[:len(good)/2]},
		{name: "corrupted entry", data: corruptEntry},
	}
	for _, tc := range bad {
		t.Run("bad archive/"+tc.name, func(t *testing.T) {
			_, err := H1(bytes.NewReader(tc.data), int64(len(tc.data)))
			checkReason(t, err, ReasonBadArchive)
		})
	}
}

func TestCheckArchive(t *testing.T) {
	exe := "#!/bin/sh\necho hi\n"
	tests := []struct {
		name    string
		entries [][2]string
		link    bool   // the executable a link to /bin/sh (linkZip), not entries
		want    Reason // "" = accepted
	}{
		{name: "versioned executable", entries: [][2]string{{"LICENSE", "MPL"}, {"terraform-provider-x_v1.0.0", exe}}},
		{name: "bare executable", entries: [][2]string{{"terraform-provider-x", exe}}},
		{name: "windows executable", entries: [][2]string{{"terraform-provider-x.exe", exe}}},
		{name: "executable named with ./", entries: [][2]string{{"./terraform-provider-x_v1", exe}}},
		{name: "no executable", entries: [][2]string{{"README.md", "# x"}}, want: ReasonBadArchive},
		{name: "empty zip", entries: nil, want: ReasonBadArchive},
		{name: "another provider's executable", entries: [][2]string{{"terraform-provider-xy_v1.0.0", exe}}, want: ReasonBadArchive},
		{name: "executable in a subdirectory", entries: [][2]string{{"bin/terraform-provider-x", exe}}, want: ReasonBadArchive},
		{name: "directory named like the executable", entries: [][2]string{{"terraform-provider-x/", ""}}, want: ReasonBadArchive},
		{name: "executable a link", entries: nil, link: true, want: ReasonBadArchive},
		// Terraform refuses to unpack an entry with a ".." element, split
		// at "/" and "\": such an archive is no package it can install.
		{name: "entry climbing out", entries: [][2]string{{"terraform-provider-x", exe}, {"../../.bashrc", "x"}}, want: ReasonBadArchive},
		{name: "entry climbing out from a subdirectory", entries: [][2]string{{"terraform-provider-x", exe}, {"docs/../../x", "x"}}, want: ReasonBadArchive},
		{name: "entry climbing out with backslashes", entries: [][2]string{{"terraform-provider-x", exe}, {`..\..\x`, "x"}}, want: ReasonBadArchive},
		{name: "entry whose name holds dots", entries: [][2]string{{"terraform-provider-x", exe}, {"docs/..hidden/a..b", "x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := zipOf(t, tc.entries)
			if tc.link {
				data = linkZip("terraform-provider-x", "/bin/sh")
			}
			h1, err := CheckArchive(context.Background(), bytes.NewReader(data), int64(len(data)), "x", Limits{})
			checkReason(t, err, tc.want)
			if tc.want != "" {
				return
			}
			if want, _ := H1(bytes.NewReader(data), int64(len(data))); h1 != want {
				t.Fatalf("h1 %q, H1 says %q", h1, want)
			}
		})
	}

	good := zipOf(t, [][2]string{{"terraform-provider-x_v1.0.0", strings.Repeat("x", 4096)}})
	corruptEntry := bytes.Clone(good)
	corruptEntry[60] ^= 0xff // the entry's compressed data
	corruptEntry[61] ^= 0xff
	for name, data := range map[string][]byte{
		"garbage":         []byte("this is not a zip file"),
		"truncated":       good[:len(good)/2],
		"corrupted entry": corruptEntry,
	} {
		t.Run("bad archive/"+name, func(t *testing.T) {
			_, err := CheckArchive(context.Background(), bytes.NewReader(data), int64(len(data)), "x", Limits{})
			checkReason(t, err, ReasonBadArchive)
		})
	}

	// Bytes that cannot be read are not a verdict on the archive.
	t.Run("unreadable bytes", func(t *testing.T) {
		gone := errors.New("chunk dropped")
		r := failingReaderAt{r: bytes.NewReader(good), from: 30, err: gone}
		_, err := CheckArchive(context.Background(), r, int64(len(good)), "x", Limits{})
		if !errors.Is(err, gone) || errors.Is(err, ErrIntegrity) {
			t.Fatalf("error %v: want the read error, not an integrity error", err)
		}
	})
}

// failingReaderAt fails reads that reach offset from or beyond.
type failingReaderAt struct {
	r    io.ReaderAt
	from int64
	err  error
}

func (f failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.from {
		return 0, f.err
	}
	return f.r.ReadAt(p, off)
}

func TestZH(t *testing.T) {
	sum := sha256.Sum256([]byte("archive"))
	lower := hex.EncodeToString(sum[:])
	if got := ZH(strings.ToUpper(lower)); got != "zh:"+lower {
		t.Fatalf("ZH = %s, want zh:%s", got, lower)
	}
}

func TestErrorMessageAndUnwrap(t *testing.T) {
	cause := errors.New("openpgp: invalid signature")
	err := error(&Error{Reason: ReasonSignature, Detail: "SHA256SUMS signature", Err: cause})
	if !errors.Is(err, cause) || !errors.Is(err, ErrIntegrity) {
		t.Fatalf("errors.Is: cause %v, ErrIntegrity %v", errors.Is(err, cause), errors.Is(err, ErrIntegrity))
	}
	for _, part := range []string{"signature", "SHA256SUMS signature", cause.Error()} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("message %q lacks %q", err.Error(), part)
		}
	}
	if errors.Is(errors.New("other"), ErrIntegrity) {
		t.Fatal("an unrelated error is an integrity error")
	}
	if len(Reasons()) != 6 {
		t.Fatalf("Reasons() = %v", Reasons())
	}
}

// TestSignatureTime: the creation time a signature states is read once
// it verified, binary or armored, and nothing is read from one that does
// not verify.
func TestSignatureTime(t *testing.T) {
	keyCreated := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	key, err := openpgp.NewEntity("origin", "", "origin@example.test",
		&packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, Time: func() time.Time { return keyCreated }})
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(strings.Repeat("ab", 32) + "  terraform-provider-x_1.0.0_linux_amd64.zip\n")
	signedAt := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, key, bytes.NewReader(doc), &packet.Config{Time: func() time.Time { return signedAt }}); err != nil {
		t.Fatal(err)
	}
	var armoredSig bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&armoredSig, key, bytes.NewReader(doc), &packet.Config{Time: func() time.Time { return signedAt }}); err != nil {
		t.Fatal(err)
	}
	keys := []string{armored(t, key)}
	for name, s := range map[string][]byte{"binary": sig.Bytes(), "armored": armoredSig.Bytes()} {
		t.Run(name, func(t *testing.T) {
			got, err := SignatureTime(doc, s, keys)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(signedAt) {
				t.Fatalf("signature time %v, want %v", got, signedAt)
			}
			got, err = SignatureTime(append(bytes.Clone(doc), 'x'), s, keys)
			checkReason(t, err, ReasonSignature)
			if !got.IsZero() {
				t.Fatalf("a signature that does not verify gave time %v", got)
			}
		})
	}
}

// TestNewSignatureOutlivesTheKeysExpiry: a new verification (an origin's
// answer) accepts a signature made while its publisher's key was valid
// once the key has expired, as Terraform's and OpenTofu's installers
// install such a package (keys made with an expiry that their publishers
// let pass sign many real providers' releases); a signature made after
// the key expired, or ahead of the clock, is refused still.
func TestNewSignatureOutlivesTheKeysExpiry(t *testing.T) {
	now := time.Now()
	doc := []byte(strings.Repeat("cd", 32) + "  terraform-provider-x_1.0.0_linux_amd64.zip\n")
	key := verifytest.ExpiringKey(t, now.Add(-72*time.Hour), 48*time.Hour)
	keys := []string{armored(t, key)}
	signed := now.Add(-48 * time.Hour).Truncate(time.Second)
	whileValid := verifytest.SignedAt(t, key, doc, signed)
	at, err := SignatureTime(doc, whileValid, keys)
	if err != nil || !at.Equal(signed.UTC()) {
		t.Errorf("SignatureTime of a signature made while its key was valid, the key expired since = %v, %v; want %v", at, err, signed.UTC())
	}
	checkReason(t, CheckSignature(append(bytes.Clone(doc), 'x'), whileValid, keys), ReasonSignature)
	checkReason(t, CheckSignature(doc, verifytest.SignedAt(t, key, doc, now.Add(-12*time.Hour)), keys), ReasonSignature) // after it expired
	checkReason(t, CheckSignature(doc, verifytest.SignedAt(t, key, doc, now.Add(time.Hour)), keys), ReasonSignature)     // made in the future
}

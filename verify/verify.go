// Package verify owns the integrity rules for provider packages, applied
// as Terraform's own installer applies them: the detached OpenPGP signature
// over a version's SHA256SUMS document, the package's line in that
// document, the archive's hashes in the two forms clients check (zh:
// and h1:), and that the archive is a package the clients can install.
//
// It works on bytes and readers handed to it; it does no network or disk
// I/O and knows nothing of HTTP or the cache. It does not decide which
// keys are trusted: its callers hand it the keys to check against.
package verify

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
)

// Reason is why a package was refused. The set is fixed (it labels metrics).
type Reason string

const (
	// ReasonSignature: the SHA256SUMS signature does not verify with any given key.
	ReasonSignature Reason = "signature"
	// ReasonMissingChecksum: SHA256SUMS has no line for the package's file name.
	ReasonMissingChecksum Reason = "missing_checksum"
	// ReasonChecksum: a checksum disagrees (registry shasum vs SHA256SUMS, or archive bytes vs checksum).
	ReasonChecksum Reason = "checksum_mismatch"
	// ReasonBadArchive: the archive is not a readable zip, or not a
	// provider package (no provider executable in it), or its entries
	// overlap or repeat a name.
	ReasonBadArchive Reason = "bad_archive"
	// ReasonTooLarge: the archive unpacks to more bytes or more entries
	// than Limits allow.
	ReasonTooLarge Reason = "archive_too_large"
	// ReasonName: a package's file name, OS or arch is not that of the
	// provider version and platform it would be stored as, or its
	// SHA256SUMS lists files of another provider type or version.
	ReasonName Reason = "name_mismatch"
)

// Reasons returns every Reason, e.g. to initialise metric label values.
func Reasons() []Reason {
	return []Reason{ReasonSignature, ReasonMissingChecksum, ReasonChecksum, ReasonBadArchive, ReasonTooLarge, ReasonName}
}

// ErrIntegrity matches every *Error with errors.Is.
var ErrIntegrity = errors.New("integrity check failed")

// Error is a failed integrity check.
type Error struct {
	Reason Reason
	// Detail says what failed. It may quote what an origin or a bundle
	// gave (a file name, an os, a shasum), which only the bound of the
	// document it came in bounds: Error gives its first maxDetailBytes.
	Detail string
	Err    error
}

// maxDetailBytes bounds the Detail an Error's message gives, so that a
// value of megabytes that a stranger gave (an evidence file's file name,
// say) is not quoted whole into the log, a client's answer or a report.
const maxDetailBytes = 2 << 10

func (e *Error) Error() string {
	msg := "integrity check failed (" + string(e.Reason) + ")"
	if e.Detail != "" {
		msg += ": " + logbound.Cut(e.Detail, maxDetailBytes)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrIntegrity) true for every *Error.
func (e *Error) Is(target error) bool { return target == ErrIntegrity }

// ParseSHA256SUMS parses a document in the format of the sha256sum tool:
// one "<64 hex digits>  <file name>" line per file, the character after
// the digest's space being the mode, a space (text) or a "*" (binary), as
// the tool writes and reads it ("<digest>  *x" names the file "*x"); a
// single space before the name is accepted too. Digests are
// returned in lowercase, keyed by file name. Blank lines are skipped; any
// other line that does not fit, or a file listed twice with different
// digests, fails the whole document with ReasonChecksum (the document is
// signed, so a broken one is not trusted in part).
func ParseSHA256SUMS(data []byte) (map[string]string, error) {
	sums := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		// The digest, a space, then the mode: a space (text) or a "*"
		// (binary), and the name as it was signed: "<digest>  *x" is the
		// file "*x". A single space before the name is taken too.
		sum, name, ok := strings.Cut(line, " ")
		sum = strings.ToLower(sum)
		if strings.HasPrefix(name, " ") || strings.HasPrefix(name, "*") {
			name = name[1:]
		}
		name = strings.TrimSpace(name)
		if !ok || !sha256hex.Valid(sum) || name == "" {
			return nil, &Error{Reason: ReasonChecksum, Detail: fmt.Sprintf("SHA256SUMS line %d is malformed", n)}
		}
		if old, dup := sums[name]; dup && old != sum {
			return nil, &Error{Reason: ReasonChecksum, Detail: fmt.Sprintf("SHA256SUMS lists %s twice with different checksums", name)}
		}
		sums[name] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, &Error{Reason: ReasonChecksum, Detail: "reading SHA256SUMS", Err: err}
	}
	return sums, nil
}

// CheckSignature verifies the detached signature (binary or ASCII-armored)
// over document with the ASCII-armored public keys, succeeding if any one
// key verifies it.
func CheckSignature(document, signature []byte, armoredKeys []string) error {
	_, err := SignatureTime(document, signature, armoredKeys)
	return err
}

// SignatureTime is CheckSignature that also returns the creation time the
// signature states, read from its packet once the signature verified: the
// time its signer says it was made, which the signer alone vouches for.
//
// A key that has expired since the signature was made (or its signing
// subkey, or a self-signature of it) still verifies it: the signature is
// judged at the earliest time at which it, the key and the
// self-signatures that make it a signing key all existed
// (VerifyStoredDetached), as Terraform's and OpenTofu's installers install
// a package whose publisher's key has expired (with a warning), where
// many publishers let keys made with an expiry pass. A signature that was
// valid at no time up to now (made after its key expired, or ahead of the
// clock; a key revoked) fails.
//
// The keys are read within the bounds of ReadKeys' defaults, and together
// within MaxSigningKeys keys, MaxSigningKeyBytes and MaxKeySignatures
// self-signatures: more keys, bytes or self-signatures fail the check
// with ReasonSignature, saying so, before more is read or verified; a
// key block too large, or holding a key too costly to verify with
// (ErrKeyRefused), is left out as an unreadable one is, so that the check
// fails with ReasonSignature, naming the refusal, unless another key
// verifies the signature. A signature holding a secret key packet fails
// the check before go-crypto parses that packet (see walkPackets).
func SignatureTime(document, signature []byte, armoredKeys []string) (time.Time, error) {
	keyring, err := SigningKeys(armoredKeys)
	if err != nil {
		return time.Time{}, err
	}
	_, sig, err := VerifyStoredDetached(keyring, document, signature)
	if err != nil {
		return time.Time{}, &Error{Reason: ReasonSignature, Detail: "SHA256SUMS signature does not verify with the origin's signing keys", Err: err}
	}
	return sig.CreationTime.UTC(), nil
}

// SigningKeys reads one answer's armored signing keys as SignatureTime
// does: within MaxSigningKeys keys, MaxSigningKeyBytes and
// MaxKeySignatures self-signatures in all, past which it fails with
// ReasonSignature, saying which; a block that cannot be read, or is
// refused (ErrKeyRefused), is left out, and when none is left it fails
// with ReasonSignature ("no usable signing key"), naming the last
// block's error. Whoever holds keys to verify with again and again (a
// publisher's, configured) reads them through it once, so that keys
// every verification would refuse are refused at once.
func SigningKeys(armoredKeys []string) (openpgp.EntityList, error) {
	if len(armoredKeys) == 0 {
		return nil, &Error{Reason: ReasonSignature, Detail: "the origin gave no signing keys"}
	}
	tooMany := func(what string) (openpgp.EntityList, error) {
		return nil, &Error{Reason: ReasonSignature, Detail: "the origin's signing keys " + what}
	}
	if len(armoredKeys) > MaxSigningKeys {
		return tooMany(fmt.Sprintf("are %d, more than the %d read", len(armoredKeys), MaxSigningKeys))
	}
	total := 0
	for _, a := range armoredKeys {
		total += len(a)
	}
	if total > MaxSigningKeyBytes {
		return tooMany(fmt.Sprintf("are %d bytes, more than the %d read", total, MaxSigningKeyBytes))
	}
	var keyring openpgp.EntityList
	var lastErr error
	// Primary keys and self-signatures left to read, in all blocks.
	budget, signatures := MaxSigningKeys, MaxKeySignatures
	for i, armored := range armoredKeys {
		keys, w, err := readKeys([]byte(armored), KeyLimits{MaxKeys: max(budget, 1), MaxSignatures: max(signatures, 1)}.withDefaults())
		if w.primaries > budget {
			return tooMany(fmt.Sprintf("hold more than the %d keys read", MaxSigningKeys))
		}
		if w.signatures > signatures {
			return tooMany(fmt.Sprintf("have more than the %d self-signatures verified in all", MaxKeySignatures))
		}
		budget, signatures = budget-w.primaries, signatures-w.signatures
		if err != nil {
			lastErr = fmt.Errorf("signing key %d: %w", i+1, err)
			continue
		}
		keyring = append(keyring, keys...)
	}
	if len(keyring) == 0 {
		return nil, &Error{Reason: ReasonSignature, Detail: "no usable signing key", Err: lastErr}
	}
	return keyring, nil
}

// VerifySums checks that sums has a line for filename and that it equals
// shasum, the checksum the registry reported for the package.
func VerifySums(sums map[string]string, filename, shasum string) error {
	want, ok := sums[filename]
	if !ok {
		return &Error{Reason: ReasonMissingChecksum, Detail: fmt.Sprintf("SHA256SUMS has no line for %s", filename)}
	}
	if !strings.EqualFold(want, shasum) {
		return &Error{Reason: ReasonChecksum, Detail: fmt.Sprintf("registry reports sha256 %s for %s, SHA256SUMS says %s", shasum, filename, want)}
	}
	return nil
}

// ZH returns the zh: hash of an archive with the given hex sha256.
func ZH(shaHex string) string { return "zh:" + strings.ToLower(shaHex) }

// H1 returns the h1: hash of the zip archive read through r: the hash
// golang.org/x/mod/sumdb/dirhash.HashZip computes for the same bytes, which
// is what Terraform and OpenTofu record for an unpacked provider. Entries
// are listed and opened exactly as HashZip does (every entry by its name in
// the zip, directories included), so the two always agree. An unreadable
// zip or entry, or one that overlaps another or repeats its name, fails
// with ReasonBadArchive. H1 sets no limit on the bytes or entries it
// reads: it is for archives that were checked (CheckArchive) when they
// were cached, within limits an operator may have raised.
func H1(r io.ReaderAt, size int64) (string, error) {
	return hashArchive(context.Background(), r, size, Limits{MaxUnpackedBytes: math.MaxInt64, MaxEntries: math.MaxInt32}, nil)
}

// CheckArchive checks that the archive read through r (size bytes) is a
// package the clients can install as provider type providerType, and
// returns its h1: hash (see H1), which the check computes on the way. The
// clients unpack the zip and run the first top-level file named
// terraform-provider-TYPE, or that followed by "_" or "." and anything
// ("terraform-provider-random_v3.6.0", "terraform-provider-random.exe");
// an archive that is not a readable zip, has an entry that does not
// decompress, has entries that overlap or share a name, has an entry
// whose name holds a ".." element (split at "/" and "\", as the clients
// split it: they refuse to unpack it), or has no such file fails with
// ReasonBadArchive. One that would unpack to more bytes
// or entries than lim allows fails with ReasonTooLarge, as soon as that is
// known: from the sizes the zip declares, before anything is inflated,
// and from the bytes actually inflated, whatever the zip declares.
//
// The check runs under ctx: once ctx ends it stops within one chunk of
// reading and returns ctx's error (wrapped). When r itself fails (other
// than io.EOF), the archive could not be checked either: that error is
// returned wrapped. Neither is an *Error.
func CheckArchive(ctx context.Context, r io.ReaderAt, size int64, providerType string, lim Limits) (string, error) {
	return hashArchive(ctx, r, size, lim, func(zr *zip.Reader) error {
		for _, f := range zr.File {
			if climbsOut(f.Name) {
				return &Error{Reason: ReasonBadArchive,
					Detail: fmt.Sprintf("the zip's entry %q would unpack outside its directory", f.Name)}
			}
		}
		if !slices.ContainsFunc(zr.File, func(f *zip.File) bool { return isProviderExecutable(f, providerType) }) {
			return &Error{Reason: ReasonBadArchive,
				Detail: fmt.Sprintf("the zip has no terraform-provider-%s executable at its top level", providerType)}
		}
		return nil
	})
}

// isProviderExecutable reports whether f is a file the clients would take
// for the provider's executable once the zip is unpacked.
func isProviderExecutable(f *zip.File, providerType string) bool {
	if !f.Mode().IsRegular() || strings.HasSuffix(f.Name, "/") {
		return false // a directory, or a link: no program once unpacked
	}
	name := path.Clean(f.Name)
	if strings.ContainsAny(name, `/\`) {
		return false // not at the top level once unpacked
	}
	rest, ok := strings.CutPrefix(name, "terraform-provider-"+providerType)
	return ok && (rest == "" || rest[0] == '_' || rest[0] == '.')
}

// recordingReaderAt keeps the first error of the underlying reader (other
// than io.EOF), which the zip package may report only in its own words.
type recordingReaderAt struct {
	r   io.ReaderAt
	err error
}

func (rr *recordingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		// An offset the zip's own fields made (they overflow): the
		// archive's fault, not the reader's.
		return 0, errNegativeOffset
	}
	n, err := rr.r.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) && rr.err == nil {
		rr.err = err
	}
	return n, err
}

// errNegativeOffset is what recordingReaderAt answers a read before the
// archive's start.
var errNegativeOffset = errors.New("read before the start of the zip")

// localName says whether a zip entry's name stays inside the directory
// it is unpacked in, on every system the installers run on.
func localName(name string) bool {
	return name != "" && !strings.ContainsAny(name, "\\:\x00") && !path.IsAbs(name) && !climbsOut(name)
}

// climbsOut says whether a zip entry's name holds a ".." element, its
// elements split at "/" and "\" as the installers of Terraform and
// OpenTofu split them before they refuse such an entry.
func climbsOut(name string) bool {
	return slices.Contains(strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }), "..")
}

// CheckCLIArchive checks that the archive read through r (size bytes) is
// a release of a command-line program the installers can unpack: a
// readable zip, within lim as CheckArchive checks it, with a top-level
// file named executable or executable.exe ("terraform", "tofu.exe"),
// and no entry that would unpack outside the directory it is unpacked
// in (an absolute name, a ".." element, a backslash or a drive letter,
// which Windows takes as separators). Its errors are those of
// CheckArchive.
func CheckCLIArchive(ctx context.Context, r io.ReaderAt, size int64, executable string, lim Limits) error {
	_, err := hashArchive(ctx, r, size, lim, func(zr *zip.Reader) error {
		for _, f := range zr.File {
			if !localName(f.Name) {
				return &Error{Reason: ReasonBadArchive,
					Detail: fmt.Sprintf("the zip's entry %q would unpack outside its directory", f.Name)}
			}
		}
		if !slices.ContainsFunc(zr.File, func(f *zip.File) bool {
			if !f.Mode().IsRegular() {
				return false // a directory, or a link: no program once unpacked
			}
			name := path.Clean(f.Name)
			return name == executable || name == executable+".exe"
		}) {
			return &Error{Reason: ReasonBadArchive,
				Detail: fmt.Sprintf("the zip has no %s executable at its top level", executable)}
		}
		return nil
	})
	return err
}

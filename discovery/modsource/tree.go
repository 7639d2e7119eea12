package modsource

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strconv"
)

// TreePrefix starts every digest PackageTree returns, naming its form.
const TreePrefix = "t1:"

// PackageTree returns the digest of what a package as Fetch wrote it (a
// tar.gz) holds, read within limits: each entry's type, name, mode,
// owner, link target and the sha256 of its bytes, in the archive's
// order, and nothing of how the tar or its compression spelled them.
// Two packages of one tree are the same package, whatever their sha256:
// the compressor of another Go release (Go 1.27's, for one) writes other
// bytes for the same files, so the same package fetched again by a
// mirror built with it has another sha256 and the same tree.
// Fetch returns the digest of the package it writes (Result.Tree).
func PackageTree(ctx context.Context, r io.Reader, limits Limits) (string, error) {
	t, content := newTreeDigest(), sha256.New()
	err := eachEntry(ctx, r, limits, func(h *tar.Header, body io.Reader) error {
		content.Reset()
		if h.Typeflag == tar.TypeReg {
			if _, err := io.Copy(content, body); err != nil {
				return fmt.Errorf("reading the package's tar archive: %w", err)
			}
		}
		t.add(h, content)
		return nil
	})
	if err != nil {
		return "", err
	}
	return t.sum(), nil
}

// treeDigest is the digest PackageTree returns, made entry by entry.
type treeDigest struct{ h hash.Hash }

func newTreeDigest() *treeDigest { return &treeDigest{h: sha256.New()} }

// add takes in the entry h, whose bytes (a regular file's; nothing for
// another entry) content hashed: all of its mode (setuid, setgid and
// sticky bits included), owner and group as well, which an unpacker may
// apply, though Fetch writes none but the permissions; not its time,
// which Fetch fixes and no client is judged by, nor how the tar spelled
// it (its format, its PAX records).
func (t *treeDigest) add(h *tar.Header, content hash.Hash) {
	line := strconv.Itoa(int(h.Typeflag)) + " " + strconv.FormatInt(h.Mode, 8) + " " +
		strconv.Itoa(h.Uid) + " " + strconv.Itoa(h.Gid) + " " + strconv.Quote(h.Uname) + " " + strconv.Quote(h.Gname) + " " +
		strconv.Quote(h.Name) + " " + strconv.Quote(h.Linkname) + " " + hex.EncodeToString(content.Sum(nil)) + "\n"
	t.h.Write([]byte(line))
}

func (t *treeDigest) sum() string { return TreePrefix + hex.EncodeToString(t.h.Sum(nil)) }

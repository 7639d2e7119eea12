package modsource

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// packOverheadPerEntry is what a pack may hold per package entry besides
// the files' bytes: the entry's line in its tree object.
const packOverheadPerEntry = 1 << 10

// packLimit is the most bytes the objects of one Git pack may inflate to
// within limits (0: no limit): the files' bytes (a shallow pack holds each
// file's blob once at most), their trees and the commit.
func packLimit(limits Limits) int64 {
	if limits.MaxTreeBytes <= 0 {
		return 0
	}
	return limits.MaxTreeBytes + int64(max(limits.MaxEntries, 0))*packOverheadPerEntry + 1<<20
}

// packObjects is the most objects one Git pack may hold within limits
// (0: no limit): a shallow pack of one commit holds a tree per directory
// and a blob per file or link of the package (blobs of the same bytes
// once), the commit and the annotated tags on the way to it
// (peelToCommit follows 10 at most); 64 more allow for what a server may
// add besides (other tags on the commit).
func packObjects(limits Limits) uint32 {
	if limits.MaxEntries <= 0 {
		return 0
	}
	return uint32(min(limits.MaxEntries, 1<<30)) + 64
}

// checkPack reads the pack in r (a whole pack, received within the
// download limit) and refuses it with a *LimitError when its header
// declares more than maxObjects objects (0: no limit), before anything
// of them is read: go-git's indexing costs memory and time for each
// object, and 300,000 objects of a few bytes (a pack of 4 MiB) took it
// minutes of CPU, which no deadline stops. It refuses it too when its
// objects declare, in all, more than limit bytes inflated: go-git holds each
// object whole in memory while it indexes a pack, so a few MiB of pack
// holding a blob of many GiB of zeros must be refused from its headers.
// Each object is inflated only once the sum, its own declared size
// included, is known to be within the limit (go-git stops an object that
// inflates past its declared size); a delta counts its own size and the
// size of the object it makes.
func checkPack(ctx context.Context, r io.Reader, limit int64, maxObjects uint32) error {
	if limit <= 0 && maxObjects == 0 {
		return nil
	}
	s := packfile.NewScanner(r)
	_, count, err := s.Header()
	if err != nil {
		return fmt.Errorf("reading the Git pack: %w", err)
	}
	if maxObjects > 0 && count > maxObjects {
		return &LimitError{Detail: fmt.Sprintf("its Git pack holds %d objects, more than the %d a package of its files and directories allowed needs", count, maxObjects)}
	}
	if limit <= 0 {
		return nil
	}
	var total int64
	add := func(n int64) error {
		if n < 0 || n > limit || total+n > limit {
			return &LimitError{Detail: fmt.Sprintf("its Git objects unpack to more than %d bytes", limit)}
		}
		total += n
		return nil
	}
	for range count {
		if err := ctx.Err(); err != nil {
			return err
		}
		oh, err := s.NextObjectHeader()
		if err != nil {
			return fmt.Errorf("reading the Git pack: %w", err)
		}
		if err := add(oh.Length); err != nil {
			return err
		}
		var head deltaHead
		if _, _, err := s.NextObject(&head); err != nil {
			return fmt.Errorf("reading the Git pack: %w", err)
		}
		if oh.Type == plumbing.OFSDeltaObject || oh.Type == plumbing.REFDeltaObject {
			target, err := head.targetSize()
			if err != nil {
				return fmt.Errorf("reading the Git pack: %w", err)
			}
			if err := add(target); err != nil {
				return err
			}
		}
	}
	return nil
}

// deltaHead keeps the first bytes written to it: a delta's header.
type deltaHead struct {
	b []byte
}

func (d *deltaHead) Write(p []byte) (int, error) {
	if room := 32 - len(d.b); room > 0 {
		d.b = append(d.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// targetSize decodes a delta's header: the size of its base object, then
// that of the object it makes, each a little-endian base-128 number.
func (d *deltaHead) targetSize() (int64, error) {
	b := d.b
	var sizes [2]uint64
	for i := range sizes {
		var shift uint
		for {
			if len(b) == 0 || shift > 56 {
				return 0, errors.New("malformed delta header")
			}
			c := b[0]
			b = b[1:]
			sizes[i] |= uint64(c&0x7f) << shift
			shift += 7
			if c&0x80 == 0 {
				break
			}
		}
	}
	if sizes[1] > 1<<62 {
		return -1, nil // refused by the caller
	}
	return int64(sizes[1]), nil
}

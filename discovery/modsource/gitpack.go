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

// maxCommitObjectBytes bounds one commit or annotated tag object: a
// commit's header lines, signature and message take a few KiB, and go-git
// holds and decodes such an object whole.
const maxCommitObjectBytes = 1 << 20

// packBounds bound what one Git pack may declare (0: no limit): its
// objects, the bytes they inflate to in all, and each object by its type.
type packBounds struct {
	objects uint32 // packObjects
	total   int64  // packLimit
	blob    int64  // a file is no larger than the files' bytes in all
	tree    int64  // treeObjectLimit
	entries int    // Limits.MaxEntries, which bound tree
	commit  int64  // maxCommitObjectBytes, for commits and tags
	// history: the pack is a history's commits (findAbbreviated), its
	// objects bounded by maxHistoryCommits.
	history bool
}

func newPackBounds(limits Limits) packBounds {
	b := packBounds{objects: packObjects(limits), total: packLimit(limits), blob: limits.MaxTreeBytes, tree: treeObjectLimit(limits), entries: limits.MaxEntries}
	if b.total > 0 {
		b.commit = maxCommitObjectBytes
	}
	return b
}

// treeObjectLimit is the most bytes one tree object may declare within
// limits (0: no limit): a directory holds no more entries than the
// package, each a line of 1 KiB at most (its mode, name and object id; a
// name is at most 255 bytes on the systems the package is unpacked on).
// go-git holds a tree whole while it indexes the pack, and decodes it
// into an entry for each line, far more memory than its bytes.
func treeObjectLimit(limits Limits) int64 {
	if limits.MaxEntries <= 0 {
		return 0
	}
	return (int64(limits.MaxEntries) + 1) * packOverheadPerEntry
}

// of is the bound on one object of type t, and what it is for a
// *LimitError saying that an object of n bytes is over it, with the
// setting it follows ("" for a commit's or tag's, a fixed bound). A delta
// whose base's type is unknown (a reference delta: AnyObject) is bounded
// as the largest object may be, a file.
func (b packBounds) of(t plumbing.ObjectType, n int64) (int64, string, string) {
	size := "more than 2^62 bytes"
	if n >= 0 {
		size = fmt.Sprintf("%d bytes", n)
	}
	switch t {
	case plumbing.CommitObject, plumbing.TagObject:
		return b.commit, fmt.Sprintf("its Git pack holds a %s object of %s, more than the %d bytes allowed for one", t, size, b.commit), ""
	case plumbing.TreeObject:
		return b.tree, fmt.Sprintf("its Git pack holds a tree object of %s, more than the %d bytes a directory of the %d files and directories allowed takes", size, b.tree, b.entries), settingMaxFiles
	case plumbing.BlobObject:
		return b.blob, fmt.Sprintf("its Git pack holds a blob of %s, more than the %d bytes allowed for all the package's files", size, b.blob), settingMaxTreeBytes
	}
	return b.blob, fmt.Sprintf("its Git pack holds a delta making %s, more than the %d bytes allowed for all the package's files", size, b.blob), settingMaxTreeBytes
}

// checkPack reads the pack in r (a whole pack, received within the
// download limit) and refuses it with a *LimitError when its header
// declares more objects than bounds allow, before anything of them is
// read: go-git's indexing costs memory and time for each object, and
// 300,000 objects of a few bytes (a pack of 4 MiB) took it minutes of CPU,
// which no deadline stops. It refuses it too when one object declares
// more inflated bytes than its type allows, or its objects more in all
// than bounds.total: go-git holds each object whole in memory while it
// indexes a pack (making room for the size it declares before it
// inflates it), so a few MiB of pack holding a tree of many GiB of zeros
// must be refused from its headers. Each object is inflated only once its
// own declared size, and the sum with it, are known to be within bounds
// (go-git stops an object that inflates past its declared size); a delta
// counts its own size and the size of the object it makes, which is
// bounded by the type of its base where the pack says it (an offset
// delta).
func checkPack(ctx context.Context, r io.Reader, bounds packBounds) error {
	if bounds.total <= 0 && bounds.objects == 0 {
		return nil
	}
	s := packfile.NewScanner(r)
	_, count, err := s.Header()
	if err != nil {
		return fmt.Errorf("reading the Git pack: %w", err)
	}
	if bounds.objects > 0 && count > bounds.objects {
		if bounds.history {
			return &LimitError{Detail: fmt.Sprintf("the history its abbreviated commit id is looked for in holds %d objects, more than the %d allowed", count, bounds.objects)}
		}
		return &LimitError{Detail: fmt.Sprintf("its Git pack holds %d objects, more than the %d a package of its files and directories allowed needs", count, bounds.objects), Setting: settingMaxFiles}
	}
	if bounds.total <= 0 {
		return nil
	}
	var total int64
	add := func(n int64, t plumbing.ObjectType) error {
		if bound, over, setting := bounds.of(t, n); bound > 0 && (n < 0 || n > bound) {
			return &LimitError{Detail: over, Setting: setting}
		}
		if n < 0 || n > bounds.total || total+n > bounds.total {
			return &LimitError{Detail: fmt.Sprintf("its Git objects unpack to more than %d bytes", bounds.total), Setting: settingMaxTreeBytes}
		}
		total += n
		return nil
	}
	// The type of each object by its offset, a delta's that of its base.
	types := make(map[int64]plumbing.ObjectType, min(count, 1<<16))
	for range count {
		if err := ctx.Err(); err != nil {
			return err
		}
		oh, err := s.NextObjectHeader()
		if err != nil {
			return fmt.Errorf("reading the Git pack: %w", err)
		}
		isDelta := oh.Type == plumbing.OFSDeltaObject || oh.Type == plumbing.REFDeltaObject
		t := oh.Type
		if isDelta {
			t = plumbing.AnyObject // unknown: a blob's bound, the largest
			if base, ok := types[oh.OffsetReference]; ok && oh.Type == plumbing.OFSDeltaObject {
				t = base
			}
		}
		// A delta's own bytes are bounded as the object it makes.
		if err := add(oh.Length, t); err != nil {
			return err
		}
		var head deltaHead
		if _, _, err := s.NextObject(&head); err != nil {
			return fmt.Errorf("reading the Git pack: %w", err)
		}
		if isDelta {
			target, err := head.targetSize()
			if err != nil {
				return fmt.Errorf("reading the Git pack: %w", err)
			}
			if err := add(target, t); err != nil {
				return err
			}
		}
		types[oh.Offset] = t
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

package verify

import (
	"archive/zip"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/dirhash"

	"github.com/tfmirror/tfmirror/v2/internal/zipdir"
)

// Limits bound what reading one archive may cost: a zip of a few MiB can
// hold many GiB of zeros, or entries that share their compressed bytes
// and inflate them again and again.
type Limits struct {
	// MaxUnpackedBytes bounds the bytes inflated from all entries
	// together. Default (0): DefaultMaxUnpackedBytes.
	MaxUnpackedBytes int64
	// MaxEntries bounds the number of entries, directories included.
	// Default (0): DefaultMaxEntries.
	MaxEntries int
}

const (
	// DefaultMaxUnpackedBytes is 2 GiB: the largest providers published
	// (aws, azurerm, google) unpack to well under 1 GiB.
	DefaultMaxUnpackedBytes = 2 << 30
	// DefaultMaxEntries is 10,000; provider zips hold a handful.
	DefaultMaxEntries = 10_000
)

func (l Limits) withDefaults() Limits {
	if l.MaxUnpackedBytes <= 0 {
		l.MaxUnpackedBytes = DefaultMaxUnpackedBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	return l
}

// localHeaderLen is the fixed part of a zip entry's local header, which
// precedes its data.
const localHeaderLen = 30

// hashArchive opens the zip read through r within lim, runs check on its
// listing (nil: none), then computes its h1: hash within lim and under
// ctx. See CheckArchive for the errors.
func hashArchive(ctx context.Context, r io.ReaderAt, size int64, lim Limits, check func(*zip.Reader) error) (string, error) {
	lim = lim.withDefaults()
	rr := &recordingReaderAt{r: r}
	h1, err := func() (string, error) {
		zr, err := openZip(rr, size, lim)
		if err != nil {
			return "", err
		}
		if check != nil {
			if err := check(zr); err != nil {
				return "", err
			}
		}
		return hashZip(ctx, zr, lim)
	}()
	if rr.err != nil {
		return "", fmt.Errorf("reading the archive to check it: %w", rr.err)
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrIntegrity) {
		return "", fmt.Errorf("checking the archive: %w", context.Cause(ctx))
	}
	return h1, err
}

// openZip reads the zip's directory within lim and refuses, before any
// entry is inflated, a zip with too many entries, entries whose declared
// sizes add up to more than allowed, entries that share a name, or
// entries whose data overlap.
func openZip(r io.ReaderAt, size int64, lim Limits) (*zip.Reader, error) {
	zr, err := zipdir.NewReader(r, size, lim.MaxEntries)
	var many *zipdir.TooManyEntriesError
	switch {
	case errors.As(err, &many):
		return nil, tooManyEntries(many.Entries, lim)
	case errors.Is(err, zipdir.ErrDirectoryTooLarge):
		return nil, &Error{Reason: ReasonTooLarge, Detail: fmt.Sprintf("its central directory is larger than %d entries need", lim.MaxEntries)}
	case err != nil:
		return nil, &Error{Reason: ReasonBadArchive, Detail: "not a readable zip", Err: err}
	}
	var declared uint64
	names := make(map[string]bool, len(zr.File))
	type span struct {
		name       string
		start, end int64 // of the entry's compressed data
	}
	spans := make([]span, 0, len(zr.File))
	for _, f := range zr.File {
		declared += min(f.UncompressedSize64, 1<<62)
		if declared > uint64(lim.MaxUnpackedBytes) {
			return nil, &Error{Reason: ReasonTooLarge,
				Detail: fmt.Sprintf("its entries declare more than %d bytes unpacked, the most allowed", lim.MaxUnpackedBytes)}
		}
		// The names the entries take once unpacked.
		name := path.Clean(strings.TrimSuffix(f.Name, "/"))
		if names[name] {
			return nil, &Error{Reason: ReasonBadArchive, Detail: fmt.Sprintf("the zip has two entries named %q", name)}
		}
		names[name] = true
		off, err := f.DataOffset()
		if err != nil {
			return nil, &Error{Reason: ReasonBadArchive, Detail: fmt.Sprintf("the zip's entry %q has no readable local header", f.Name), Err: err}
		}
		if f.CompressedSize64 > uint64(size) || off+int64(f.CompressedSize64) > size {
			return nil, &Error{Reason: ReasonBadArchive, Detail: fmt.Sprintf("the zip's entry %q ends beyond the archive", f.Name)}
		}
		spans = append(spans, span{f.Name, off, off + int64(f.CompressedSize64)})
	}
	// Every entry's bytes are its own: each entry's data starts after the
	// previous one's data and a local header of its own. Entries that
	// share compressed bytes (the overlapping zip bomb) inflate them once
	// per entry.
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(spans); i++ {
		if prev, cur := spans[i-1], spans[i]; cur.start < prev.end+localHeaderLen {
			return nil, &Error{Reason: ReasonBadArchive, Detail: fmt.Sprintf("the zip's entries %q and %q overlap", prev.name, cur.name)}
		}
	}
	return zr, nil
}

func tooManyEntries(n uint64, lim Limits) error {
	return &Error{Reason: ReasonTooLarge, Detail: fmt.Sprintf("the zip has %d entries, more than the %d allowed", n, lim.MaxEntries)}
}

// hashZip computes the h1: hash of zr's entries, counting the bytes
// actually inflated against lim and stopping once ctx ends.
func hashZip(ctx context.Context, zr *zip.Reader, lim Limits) (string, error) {
	byName := make(map[string]*zip.File, len(zr.File))
	files := make([]string, 0, len(zr.File))
	// The same listing dirhash.HashZip makes from a zip file on disk.
	for _, f := range zr.File {
		byName[f.Name] = f
		files = append(files, f.Name)
	}
	var unpacked int64
	h, err := dirhash.Hash1(files, func(name string) (io.ReadCloser, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rc, err := byName[name].Open()
		if err != nil {
			return nil, err
		}
		return &boundedReader{ctx: ctx, rc: rc, total: &unpacked, max: lim.MaxUnpackedBytes}, nil
	})
	if err != nil {
		var verr *Error
		if errors.As(err, &verr) || ctx.Err() != nil {
			return "", err
		}
		return "", &Error{Reason: ReasonBadArchive, Detail: "hashing zip entries", Err: err}
	}
	return h, nil
}

// readChunk is the most a boundedReader reads at once: ctx and the limit
// are checked between chunks.
const readChunk = 64 << 10

// boundedReader reads an entry, adding the bytes read to total and
// failing once total passes max or ctx ends.
type boundedReader struct {
	ctx   context.Context
	rc    io.ReadCloser
	total *int64
	max   int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) > readChunk {
		p = p[:readChunk]
	}
	n, err := b.rc.Read(p)
	*b.total += int64(n)
	if *b.total > b.max {
		return 0, &Error{Reason: ReasonTooLarge, Detail: fmt.Sprintf("it unpacks to more than %d bytes, the most allowed", b.max)}
	}
	return n, err
}

func (b *boundedReader) Close() error { return b.rc.Close() }

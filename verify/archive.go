package verify

import (
	"archive/zip"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/dirhash"
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

// directoryBytesPerEntry bounds the central directory's bytes per entry
// allowed (its fixed 46 bytes and a generous name): the zip package keeps
// every entry of the directory in memory before any count can be checked.
const directoryBytesPerEntry = 1 << 10

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
	if n, ok := declaredEntries(r, size); ok && n > uint64(lim.MaxEntries) {
		return nil, tooManyEntries(n, lim)
	}
	// The directory of lim.MaxEntries entries takes far less than this;
	// reading stops there, whatever the zip's end record says.
	dirBudget := &budgetReaderAt{r: r, left: int64(lim.MaxEntries)*directoryBytesPerEntry + 128<<10}
	zr, err := zip.NewReader(dirBudget, size)
	dirBudget.left = math.MaxInt64 // entries are read through it too, within lim
	if dirBudget.exceeded {
		return nil, &Error{Reason: ReasonTooLarge, Detail: fmt.Sprintf("its central directory is larger than %d entries need", lim.MaxEntries)}
	}
	if err != nil {
		return nil, &Error{Reason: ReasonBadArchive, Detail: "not a readable zip", Err: err}
	}
	if n := len(zr.File); n > lim.MaxEntries {
		return nil, tooManyEntries(uint64(n), lim)
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

// budgetReaderAt fails reads once left bytes have been read.
type budgetReaderAt struct {
	r        io.ReaderAt
	left     int64
	exceeded bool
}

var errBudget = errors.New("read budget exceeded")

func (b *budgetReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if int64(len(p)) > b.left {
		b.exceeded = true
		return 0, errBudget
	}
	b.left -= int64(len(p))
	return b.r.ReadAt(p, off)
}

// declaredEntries returns the number of entries the zip's end of central
// directory record declares, found as the zip package finds it (the last
// record signature in the final 1 KiB, else 65 KiB; its zip64 form when
// the record says so), so that a zip declaring millions of entries is
// refused before the zip package makes room for them. ok is false when no
// record is found: the zip package then refuses the zip too.
func declaredEntries(r io.ReaderAt, size int64) (n uint64, ok bool) {
	const endLen = 22
	for _, bufLen := range []int64{1024, 65 * 1024} {
		bufLen = min(bufLen, size)
		buf := make([]byte, bufLen)
		if _, err := r.ReadAt(buf, size-bufLen); err != nil && !errors.Is(err, io.EOF) {
			return 0, false
		}
		p := -1
		for i := len(buf) - endLen; i >= 0; i-- {
			if string(buf[i:i+4]) == "PK\x05\x06" {
				if comment := int(binary.LittleEndian.Uint16(buf[i+endLen-2:])); comment+endLen+i <= len(buf) {
					p = i
				}
				break
			}
		}
		if p < 0 {
			if bufLen == size {
				return 0, false
			}
			continue
		}
		rec := buf[p:]
		n = uint64(binary.LittleEndian.Uint16(rec[10:]))
		dirSize, dirOff := binary.LittleEndian.Uint32(rec[12:]), binary.LittleEndian.Uint32(rec[16:])
		if n != 0xffff && dirSize != 0xffff && dirOff != 0xffffffff {
			return n, true
		}
		// zip64: a locator just before the record points to the zip64 record.
		locOff := size - bufLen + int64(p) - 20
		if locOff < 0 {
			return n, true
		}
		loc := make([]byte, 20)
		if _, err := r.ReadAt(loc, locOff); err != nil || string(loc[:4]) != "PK\x06\x07" ||
			binary.LittleEndian.Uint32(loc[4:]) != 0 || binary.LittleEndian.Uint32(loc[16:]) != 1 {
			return n, true // not zip64 after all
		}
		end64 := make([]byte, 56)
		if _, err := r.ReadAt(end64, int64(binary.LittleEndian.Uint64(loc[8:]))); err != nil || string(end64[:4]) != "PK\x06\x06" {
			return n, true
		}
		return binary.LittleEndian.Uint64(end64[32:]), true
	}
	return 0, false
}

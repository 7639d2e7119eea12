// Package zipdir opens untrusted zip archives within a bound on their
// entries: the count that the end of central directory record declares
// is checked before the zip package reads the directory (it makes room
// for every entry first), and the directory is read no further than the
// entries allowed need, whatever the record says.
//
// It owns reading a zip's end records and its directory for
// verify (provider archives) and discovery/modsource (module packages).
// It does not read entries' data, nor decide what an entry may be.
package zipdir

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// DirectoryBytesPerEntry is the central directory's bytes per entry
// allowed, on average (its fixed 46 bytes and a generous name):
// NewReader reads at most this many per entry allowed, plus 128 KiB.
const DirectoryBytesPerEntry = 1 << 10

// TooManyEntriesError is a zip that declares or holds more entries than
// allowed.
type TooManyEntriesError struct {
	// Entries is the number declared (or found), Max the most allowed.
	Entries uint64
	Max     int
}

func (e *TooManyEntriesError) Error() string {
	return fmt.Sprintf("the zip has %d entries, more than the %d allowed", e.Entries, e.Max)
}

// ErrDirectoryTooLarge is a zip whose central directory is larger than
// the entries allowed need.
var ErrDirectoryTooLarge = errors.New("the zip's central directory is larger than the entries allowed need")

// NewReader opens the zip of size bytes read through r, holding at most
// maxEntries entries (0 or less: as many as the zip package reads). It
// refuses with a *TooManyEntriesError a zip
// whose end record declares more, before its directory is read, and one
// whose directory lists more; with ErrDirectoryTooLarge one whose
// directory takes more than maxEntries*DirectoryBytesPerEntry + 128 KiB
// (the zip package checks only 16 bits of the count, so a directory may
// hold more entries than its end record says). Other errors are the zip
// package's. Entries' data are read through r, unbounded.
func NewReader(r io.ReaderAt, size int64, maxEntries int) (*zip.Reader, error) {
	if maxEntries <= 0 {
		return zip.NewReader(r, size)
	}
	if n, ok := DeclaredEntries(r, size); ok && n > uint64(maxEntries) {
		return nil, &TooManyEntriesError{Entries: n, Max: maxEntries}
	}
	budget := &budgetReaderAt{r: r, left: int64(maxEntries)*DirectoryBytesPerEntry + 128<<10}
	zr, err := zip.NewReader(budget, size)
	budget.left = math.MaxInt64 // entries are read through it too
	if budget.exceeded {
		return nil, ErrDirectoryTooLarge
	}
	if err != nil {
		return nil, err
	}
	if n := len(zr.File); n > maxEntries {
		return nil, &TooManyEntriesError{Entries: uint64(n), Max: maxEntries}
	}
	return zr, nil
}

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

// DeclaredEntries returns the number of entries the zip's end of central
// directory record declares, found as the zip package finds it (the last
// record signature in the final 1 KiB, else 65 KiB; its zip64 form when
// the record says so), so that a zip declaring millions of entries is
// refused before the zip package makes room for them. It reads at most
// about 66 KiB. ok is false when no record is found: the zip package then
// refuses the zip too.
func DeclaredEntries(r io.ReaderAt, size int64) (n uint64, ok bool) {
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

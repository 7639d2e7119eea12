package zipdir

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
)

// zipOfEntries returns a zip of n empty files, zip64 from 65,535 entries.
func zipOfEntries(t *testing.T, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i := range n {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("f%05d", i), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// wrapped returns the zip64 zip data (of more than 65,535 entries) with
// its end records replaced by a plain end record that declares the count
// in 16 bits only, as the zip package compares it.
func wrapped(t *testing.T, data []byte) []byte {
	t.Helper()
	end64 := data[len(data)-22-20-56:]
	if string(end64[:4]) != "PK\x06\x06" {
		t.Fatal("no zip64 end record")
	}
	n := binary.LittleEndian.Uint64(end64[32:])
	dirSize, dirOff := binary.LittleEndian.Uint64(end64[40:]), binary.LittleEndian.Uint64(end64[48:])
	out := bytes.Clone(data[:dirOff+dirSize])
	var end [22]byte
	copy(end[:], "PK\x05\x06")
	binary.LittleEndian.PutUint16(end[8:], uint16(n))
	binary.LittleEndian.PutUint16(end[10:], uint16(n))
	binary.LittleEndian.PutUint32(end[12:], uint32(dirSize))
	binary.LittleEndian.PutUint32(end[16:], uint32(dirOff))
	return append(out, end[:]...)
}

func TestDeclaredEntries(t *testing.T) {
	small := zipOfEntries(t, 2)
	for name, tc := range map[string]struct {
		data []byte
		want uint64
		ok   bool
	}{
		"plain":                     {small, 2, true},
		"zip64":                     {zipOfEntries(t, 70_000), 70_000, true},
		"not a zip":                 {[]byte("hello"), 0, false},
		"empty":                     {nil, 0, false},
		"with a comment":            {append(bytes.Clone(small[:len(small)-2]), 3, 0, 'a', 'b', 'c'), 2, true},
		"16 bits of a larger count": {wrapped(t, zipOfEntries(t, 1<<16+1)), 1, true},
	} {
		t.Run(name, func(t *testing.T) {
			n, ok := DeclaredEntries(bytes.NewReader(tc.data), int64(len(tc.data)))
			if n != tc.want || ok != tc.ok {
				t.Fatalf("DeclaredEntries = %d, %v; want %d, %v", n, ok, tc.want, tc.ok)
			}
		})
	}
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func TestNewReader(t *testing.T) {
	many := zipOfEntries(t, 70_000)
	hidden := wrapped(t, zipOfEntries(t, 1<<16+1)) // declares 1
	for _, tc := range []struct {
		name     string
		data     []byte
		max      int
		want     error // nil, a *TooManyEntriesError, ErrDirectoryTooLarge or zip.ErrFormat
		entries  int   // of the zip opened, or found too many
		maxBytes int64 // read to decide, 0: no bound checked
	}{
		{name: "within the limit", data: zipOfEntries(t, 20), max: 20, entries: 20},
		{name: "declares more than allowed", data: many, max: 20_000, want: &TooManyEntriesError{}, entries: 70_000, maxBytes: 66 << 10},
		{name: "holds more than it declares, directory over budget", data: hidden, max: 10, want: ErrDirectoryTooLarge, maxBytes: 10*DirectoryBytesPerEntry + 128<<10 + 66<<10},
		{name: "holds more than it declares, within budget", data: hidden, max: 1 << 16, want: &TooManyEntriesError{}, entries: 1<<16 + 1},
		{name: "not a zip", data: []byte("hello"), max: 10, want: zip.ErrFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &countingReaderAt{r: bytes.NewReader(tc.data)}
			zr, err := NewReader(r, int64(len(tc.data)), tc.max)
			var many *TooManyEntriesError
			switch want := tc.want.(type) {
			case nil:
				if err != nil || len(zr.File) != tc.entries {
					t.Fatalf("NewReader: %v; want a zip of %d entries", err, tc.entries)
				}
			case *TooManyEntriesError:
				if !errors.As(err, &many) || many.Entries != uint64(tc.entries) || many.Max != tc.max {
					t.Fatalf("NewReader: %v; want a TooManyEntriesError of %d entries, %d allowed", err, tc.entries, tc.max)
				}
			default:
				if !errors.Is(err, want) {
					t.Fatalf("NewReader: %v; want %v", err, want)
				}
			}
			if tc.maxBytes > 0 && r.n.Load() > tc.maxBytes {
				t.Errorf("read %d bytes of %d to refuse it; want at most %d", r.n.Load(), len(tc.data), tc.maxBytes)
			}
		})
	}
}

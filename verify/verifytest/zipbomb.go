// Package verifytest builds hostile inputs of package verify for tests:
// provider archives, zips that are small to download and costly to
// unpack, and OpenPGP signing keys, small to send and costly to read. It
// owns only their bytes; the checks that refuse them are package
// verify's.
package verifytest

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"time"
)

// modified keeps the archives byte-for-byte deterministic.
var modified = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// segmentLen is the run of zeros one repeated deflate segment holds.
const segmentLen = 1 << 20

// segment is n zeros compressed from an empty window, ended on a sync flush.
func segment(n int) []byte {
	var b bytes.Buffer
	fw, _ := flate.NewWriter(&b, flate.BestCompression) // a valid level: no error
	fw.Write(make([]byte, n))                           //nolint:errcheck // memory
	fw.Flush()                                          //nolint:errcheck // memory
	return b.Bytes()
}

// fullSegment and segmentStep are computed once: they never change.
var (
	fullSegment = sync.OnceValue(func() []byte { return segment(segmentLen) })
	segmentStep = sync.OnceValue(func() crcStep { return zerosCRC(make([]byte, segmentLen)) })
)

// Deflated returns a raw deflate stream of n zero bytes, and their CRC-32,
// at about 1/1000 of n: a segment compressed from an empty window and
// ended on a sync flush decodes to the same zeros wherever it stands, so
// the stream is that segment repeated, compressed once.
func Deflated(n int64) (data []byte, crc uint32) {
	full := fullSegment()
	count, rest := n/segmentLen, int(n%segmentLen)
	var out bytes.Buffer
	out.Grow(int(count)*len(full) + 1024)
	for range count {
		out.Write(full)
	}
	crc = segmentStep().pow(count).apply(0)
	if rest > 0 {
		out.Write(segment(rest))
		crc = crc32.Update(crc, crc32.IEEETable, make([]byte, rest))
	}
	var last bytes.Buffer
	fw, _ := flate.NewWriter(&last, flate.BestCompression)
	fw.Close() //nolint:errcheck // memory: the final, empty block
	out.Write(last.Bytes())
	return out.Bytes(), crc
}

// Zeros returns a zip of one entry, name, of size zero bytes, deflated
// (about size/1000 bytes; sizes of 4 GiB and more make a zip64 archive).
// Its directory declares the entry's true size.
func Zeros(name string, size int64) []byte {
	data, crc := Deflated(size)
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: modified,
		CRC32: crc, CompressedSize64: uint64(len(data)), UncompressedSize64: uint64(size)})
	if err != nil {
		panic(err) // a valid header
	}
	w.Write(data) //nolint:errcheck // memory
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// Overlapping returns a zip whose directory lists n entries (the first
// named first, the others "copy-1", "copy-2", ...) that all point to the
// one deflated entry of each zero bytes it holds: n*each bytes to inflate
// from the compressed bytes of one. each must be below 4 GiB, n below
// 65,535.
func Overlapping(first string, n int, each int64) []byte {
	if each >= 1<<32 || n >= 0xffff || n < 1 {
		panic(fmt.Sprintf("verifytest.Overlapping: %d entries of %d bytes", n, each))
	}
	data, crc := Deflated(each)
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: first, Method: zip.Deflate, CRC32: crc,
		CompressedSize64: uint64(len(data)), UncompressedSize64: uint64(each)})
	if err != nil {
		panic(err)
	}
	w.Write(data) //nolint:errcheck // memory
	if err := zw.Close(); err != nil {
		panic(err)
	}
	single := b.Bytes()
	end := single[len(single)-22:]
	dirOff := binary.LittleEndian.Uint32(end[16:])
	entry := single[dirOff : dirOff+46] // the entry's fixed part; its name follows

	out := bytes.NewBuffer(bytes.Clone(single[:dirOff]))
	for i := range n {
		name := first
		if i > 0 {
			name = fmt.Sprintf("copy-%d", i)
		}
		fixed := bytes.Clone(entry)
		binary.LittleEndian.PutUint16(fixed[28:], uint16(len(name))) // name length
		binary.LittleEndian.PutUint16(fixed[30:], 0)                 // extra length
		binary.LittleEndian.PutUint16(fixed[32:], 0)                 // comment length
		binary.LittleEndian.PutUint32(fixed[42:], 0)                 // local header offset: the one entry
		out.Write(fixed)
		out.WriteString(name)
	}
	dirLen := uint32(out.Len()) - dirOff
	var eocd [22]byte
	copy(eocd[:], "PK\x05\x06")
	binary.LittleEndian.PutUint16(eocd[8:], uint16(n))
	binary.LittleEndian.PutUint16(eocd[10:], uint16(n))
	binary.LittleEndian.PutUint32(eocd[12:], dirLen)
	binary.LittleEndian.PutUint32(eocd[16:], dirOff)
	out.Write(eocd[:])
	return out.Bytes()
}

// crcStep is what appending a fixed run of bytes does to a CRC-32: an
// affine map over GF(2)^32, f(x) = c ^ (the m[i] of x's set bits i).
type crcStep struct {
	c uint32
	m [32]uint32
}

// zerosCRC is the step of appending data, found from 33 CRCs of it.
func zerosCRC(data []byte) crcStep {
	var f crcStep
	f.c = crc32.Update(0, crc32.IEEETable, data)
	for i := range f.m {
		f.m[i] = crc32.Update(1<<i, crc32.IEEETable, data) ^ f.c
	}
	return f
}

func (f crcStep) apply(x uint32) uint32 {
	r := f.c
	for i := 0; x != 0; i, x = i+1, x>>1 {
		if x&1 != 0 {
			r ^= f.m[i]
		}
	}
	return r
}

// then is f followed by g.
func (f crcStep) then(g crcStep) crcStep {
	var h crcStep
	h.c = g.apply(f.c)
	for i := range h.m {
		h.m[i] = g.apply(f.c^f.m[i]) ^ h.c
	}
	return h
}

// pow is f applied k times.
func (f crcStep) pow(k int64) crcStep {
	var r crcStep // identity
	for i := range r.m {
		r.m[i] = 1 << i
	}
	for ; k > 0; k >>= 1 {
		if k&1 != 0 {
			r = r.then(f)
		}
		f = f.then(f)
	}
	return r
}

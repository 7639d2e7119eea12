package modsource

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"testing"
)

// packObject is one object of a test pack: its type (3 blob, 6 offset
// delta), its data, and for a delta the distance back to its base.
type packObject struct {
	typ     byte
	data    []byte
	backOff int64
}

// buildPack writes a pack of objects, without its trailing checksum
// (checkPack does not read it).
func buildPack(t *testing.T, objects ...packObject) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(len(objects)))
	for _, o := range objects {
		size := uint64(len(o.data))
		c := o.typ<<4 | byte(size&0x0f)
		size >>= 4
		for size != 0 {
			b.WriteByte(c | 0x80)
			c = byte(size & 0x7f)
			size >>= 7
		}
		b.WriteByte(c)
		if o.typ == 6 {
			if o.backOff >= 128 {
				t.Fatal("test offsets fit one byte")
			}
			b.WriteByte(byte(o.backOff))
		}
		zw := zlib.NewWriter(&b)
		zw.Write(o.data)
		zw.Close()
	}
	return b.Bytes()
}

// varint is the base-128 number of a delta header.
func varint(n uint64) []byte {
	var out []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

func TestCheckPack(t *testing.T) {
	const limit = 1 << 20
	base := packObject{typ: 3, data: []byte("hello")}
	baseLen := int64(len(buildPack(t, base))) - 12 // the object's bytes, after the pack header
	delta := func(target uint64) packObject {
		d := append(varint(5), varint(target)...)
		d = append(d, 0x90, 0x05) // copy 5 bytes from offset 0 (size in the next byte)
		return packObject{typ: 6, data: d, backOff: baseLen}
	}
	for name, tc := range map[string]struct {
		pack []byte
		ok   bool
	}{
		"small objects":             {buildPack(t, base, delta(5)), true},
		"a blob of zeros too large": {buildPack(t, base, packObject{typ: 3, data: make([]byte, limit+1)}), false},
		"a delta making 10 GiB":     {buildPack(t, base, delta(10<<30)), false},
		"more objects than allowed": {buildPack(t, base, base, base, base, base), false},
		"blobs too large together":  {buildPack(t, packObject{typ: 3, data: make([]byte, limit/2)}, packObject{typ: 3, data: make([]byte, limit/2+1)}), false},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkPack(context.Background(), bytes.NewReader(tc.pack), limit, 4)
			var le *LimitError
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && !errors.As(err, &le):
				t.Fatalf("%v, want a LimitError", err)
			}
		})
	}
}

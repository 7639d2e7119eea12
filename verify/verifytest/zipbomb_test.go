package verifytest

import (
	"archive/zip"
	"bytes"
	"hash/crc32"
	"io"
	"testing"
)

func TestDeflatedCRC(t *testing.T) {
	for _, n := range []int64{0, 1, segmentLen - 1, segmentLen, 3*segmentLen + 17, 5 * segmentLen} {
		_, crc := Deflated(n)
		if want := crc32.ChecksumIEEE(make([]byte, n)); crc != want {
			t.Fatalf("%d: crc %08x, want %08x", n, crc, want)
		}
		z := Zeros("z", n)
		zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := zr.File[0].Open()
		got, err := io.ReadAll(rc)
		if err != nil || int64(len(got)) != n || bytes.ContainsFunc(got, func(r rune) bool { return r != 0 }) {
			t.Fatalf("%d: read %d bytes, %v", n, len(got), err)
		}
	}
}

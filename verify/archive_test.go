package verify

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/zipdir"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

const exeName = "terraform-provider-x_v1.0.0"

// firstDirectoryEntry returns the offset of data's central directory and
// its first entry's bytes (fixed part, name, extra and comment).
func firstDirectoryEntry(t *testing.T, data []byte) (uint32, []byte) {
	t.Helper()
	end := data[len(data)-22:]
	if string(end[:4]) != "PK\x05\x06" {
		t.Fatal("no plain end of central directory record")
	}
	off := binary.LittleEndian.Uint32(end[16:])
	e := data[off:]
	n := 46 + int(binary.LittleEndian.Uint16(e[28:])) + int(binary.LittleEndian.Uint16(e[30:])) + int(binary.LittleEndian.Uint16(e[32:]))
	return off, bytes.Clone(e[:n])
}

// withDirectory returns local (the entries' local records) followed by a
// central directory of entries and its end record.
func withDirectory(local []byte, entries ...[]byte) []byte {
	out := bytes.NewBuffer(bytes.Clone(local))
	for _, e := range entries {
		out.Write(e)
	}
	var end [22]byte
	copy(end[:], "PK\x05\x06")
	binary.LittleEndian.PutUint16(end[8:], uint16(len(entries)))
	binary.LittleEndian.PutUint16(end[10:], uint16(len(entries)))
	binary.LittleEndian.PutUint32(end[12:], uint32(out.Len()-len(local)))
	binary.LittleEndian.PutUint32(end[16:], uint32(len(local)))
	out.Write(end[:])
	return out.Bytes()
}

// nestedOverlap is the overlapping zip bomb's shape: entry "outer" is
// stored, and its bytes are the whole local record (header and data) of
// the provider executable's entry, which the directory lists too.
func nestedOverlap(t *testing.T) []byte {
	t.Helper()
	inner := zipOf(t, [][2]string{{exeName, "#!/bin/sh\n"}})
	innerDir, innerEntry := firstDirectoryEntry(t, inner)
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "outer", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(inner[:innerDir])
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	outer := b.Bytes()
	zr, err := zip.NewReader(bytes.NewReader(outer), int64(len(outer)))
	if err != nil {
		t.Fatal(err)
	}
	dataOff, err := zr.File[0].DataOffset()
	if err != nil {
		t.Fatal(err)
	}
	outerDir, outerEntry := firstDirectoryEntry(t, outer)
	binary.LittleEndian.PutUint32(innerEntry[42:], uint32(dataOff)) // inside outer's data
	return withDirectory(outer[:outerDir], outerEntry, innerEntry)
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r     io.ReaderAt
	n     atomic.Int64
	after func(total int64) // called after each read
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	total := c.n.Add(int64(n))
	if c.after != nil {
		c.after(total)
	}
	return n, err
}

func TestCheckArchiveBombs(t *testing.T) {
	exe := "#!/bin/sh\necho hi\n"
	zeros16M := verifytest.Zeros(exeName, 16<<20)

	// The directory declares 1,000 bytes; the entry inflates to 16 MiB.
	lying := bytes.Clone(zeros16M)
	dirOff, _ := firstDirectoryEntry(t, lying)
	binary.LittleEndian.PutUint32(lying[dirOff+24:], 1000)

	many := make([][2]string, 0, 21)
	many = append(many, [2]string{exeName, exe})
	for i := range 20 {
		many = append(many, [2]string{fmt.Sprintf("f%02d", i), "x"})
	}
	// The end record claims 65,535 entries.
	claimsMillion := zipOf(t, [][2]string{{exeName, exe}})
	binary.LittleEndian.PutUint16(claimsMillion[len(claimsMillion)-12:], 0xffff)
	binary.LittleEndian.PutUint16(claimsMillion[len(claimsMillion)-14:], 0xffff)

	tests := []struct {
		name string
		data []byte
		lim  Limits
		want Reason
	}{
		{name: "within limits", data: zeros16M, lim: Limits{MaxUnpackedBytes: 16 << 20}},
		{name: "more zeros than allowed", data: zeros16M, lim: Limits{MaxUnpackedBytes: 16<<20 - 1}, want: ReasonTooLarge},
		{name: "6 GiB of zeros, default limits", data: verifytest.Zeros(exeName, 6<<30), want: ReasonTooLarge},
		{name: "declared size smaller than the data", data: lying, want: ReasonBadArchive},
		{name: "too many entries", data: zipOf(t, many), lim: Limits{MaxEntries: 20}, want: ReasonTooLarge},
		{name: "as many entries as allowed", data: zipOf(t, many), lim: Limits{MaxEntries: 21}},
		{name: "end record claims 65,535 entries", data: claimsMillion, want: ReasonTooLarge},
		{name: "duplicate names", data: zipOf(t, [][2]string{{exeName, exe}, {"LICENSE", "a"}, {"LICENSE", "b"}}), want: ReasonBadArchive},
		{name: "duplicate names once unpacked", data: zipOf(t, [][2]string{{exeName, exe}, {"./" + exeName, "x"}}), want: ReasonBadArchive},
		{name: "entries sharing their bytes", data: verifytest.Overlapping(exeName, 8, 1<<20), want: ReasonBadArchive},
		{name: "an entry inside another", data: nestedOverlap(t), want: ReasonBadArchive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &countingReaderAt{r: bytes.NewReader(tc.data)}
			h1, err := CheckArchive(context.Background(), r, int64(len(tc.data)), "x", tc.lim)
			checkReason(t, err, tc.want)
			if tc.want == "" && h1 == "" {
				t.Fatal("accepted without an h1: hash")
			}
			if tc.want != "" && tc.want != ReasonBadArchive && r.n.Load() > 128<<10 {
				// Refused from the directory: the entries were not read.
				t.Errorf("read %d bytes of a %d-byte archive to refuse it", r.n.Load(), len(tc.data))
			}
		})
	}

	// The overlapping bomb within the size limit is still refused, before
	// its 8 GiB are inflated.
	t.Run("overlapping entries within the size limit", func(t *testing.T) {
		data := verifytest.Overlapping(exeName, 8, 1<<30)
		_, err := CheckArchive(context.Background(), bytes.NewReader(data), int64(len(data)), "x", Limits{MaxUnpackedBytes: 16 << 30})
		checkReason(t, err, ReasonBadArchive)
	})
}

// A directory of more entries than its end record says (the zip package
// compares only 16 bits of the count) is read no further than the
// entries allowed need.
func TestCheckArchiveDirectoryBudget(t *testing.T) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i := range 1<<16 + 1 {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("f%05d", i), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	full := b.Bytes()
	end64 := full[len(full)-22-20-56:] // zip64 end record, locator, end record
	if string(end64[:4]) != "PK\x06\x06" {
		t.Fatal("no zip64 end record")
	}
	dirSize, dirOff := binary.LittleEndian.Uint64(end64[40:]), binary.LittleEndian.Uint64(end64[48:])
	data := bytes.Clone(full[:dirOff+dirSize])
	var end [22]byte
	copy(end[:], "PK\x05\x06")
	binary.LittleEndian.PutUint16(end[8:], 1) // 65,537 in 16 bits
	binary.LittleEndian.PutUint16(end[10:], 1)
	binary.LittleEndian.PutUint32(end[12:], uint32(dirSize))
	binary.LittleEndian.PutUint32(end[16:], uint32(dirOff))
	data = append(data, end[:]...)
	if zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data))); err != nil || len(zr.File) != 1<<16+1 {
		t.Fatalf("the zip package does not read the test zip as meant: %v", err)
	}

	r := &countingReaderAt{r: bytes.NewReader(data)}
	_, err := CheckArchive(context.Background(), r, int64(len(data)), "x", Limits{MaxEntries: 10})
	checkReason(t, err, ReasonTooLarge)
	if budget := int64(10*zipdir.DirectoryBytesPerEntry + 128<<10); r.n.Load() > budget {
		t.Errorf("read %d bytes of the directory, budget %d", r.n.Load(), budget)
	}
}

// The bytes inflated are counted as read, whatever the sizes declared.
func TestHashZipCountsBytesRead(t *testing.T) {
	data := verifytest.Zeros(exeName, 8<<20)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = hashZip(context.Background(), zr, Limits{MaxUnpackedBytes: 1 << 20})
	checkReason(t, err, ReasonTooLarge)
	if _, err := hashZip(context.Background(), zr, Limits{MaxUnpackedBytes: 8 << 20}); err != nil {
		t.Fatal(err)
	}
}

func TestCheckArchiveStopsWithContext(t *testing.T) {
	data := verifytest.Zeros(exeName, 1<<30) // about 1 MiB to read
	t.Run("ended before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := CheckArchive(ctx, bytes.NewReader(data), int64(len(data)), "x", Limits{})
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrIntegrity) {
			t.Fatalf("error %v, want context.Canceled and no integrity verdict", err)
		}
	})
	t.Run("ended while inflating", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := &countingReaderAt{r: bytes.NewReader(data)}
		r.after = func(total int64) {
			if total > 16<<10 { // the directory read, inflating has begun
				cancel()
			}
		}
		_, err := CheckArchive(ctx, r, int64(len(data)), "x", Limits{})
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrIntegrity) {
			t.Fatalf("error %v, want context.Canceled and no integrity verdict", err)
		}
		if n := r.n.Load(); n > int64(len(data))/2 {
			t.Errorf("read %d of %d bytes after the context ended early", n, len(data))
		}
	})
}

// linkZip is a zip whose one entry, name, is a symbolic link to target.
func linkZip(name, target string) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	h := &zip.FileHeader{Name: name, Method: zip.Store}
	h.SetMode(fs.ModeSymlink | 0o777)
	f, _ := zw.CreateHeader(h)
	f.Write([]byte(target)) //nolint:errcheck
	zw.Close()
	return b.Bytes()
}

// TestCheckCLIArchive: a CLI release is a zip with the program at its
// top level, a file of its own; anything else (a link in its place,
// which installers unpacked as a file naming the link's target), or a
// bomb, is refused.
func TestCheckCLIArchive(t *testing.T) {
	zipOf := func(names ...string) []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for _, n := range names {
			f, _ := zw.Create(n)
			f.Write([]byte("#!/bin/sh\n")) //nolint:errcheck
		}
		zw.Close()
		return b.Bytes()
	}
	for _, tc := range []struct {
		name   string
		data   []byte
		reason Reason
	}{
		{"program", zipOf("LICENSE.txt", "terraform"), ""},
		{"windows program", zipOf("terraform.exe"), ""},
		{"no program", zipOf("LICENSE.txt"), ReasonBadArchive},
		{"program in a directory", zipOf("bin/terraform"), ReasonBadArchive},
		{"another program", zipOf("terraformx"), ReasonBadArchive},
		{"an entry above", zipOf("terraform", "../../.bashrc"), ReasonBadArchive},
		{"an entry above, inside", zipOf("terraform", "docs/../../x"), ReasonBadArchive},
		{"an absolute entry", zipOf("terraform", "/etc/profile.d/x.sh"), ReasonBadArchive},
		{"a backslash", zipOf("terraform", `..\..\x.bat`), ReasonBadArchive},
		{"a drive letter", zipOf("terraform", "C:x.bat"), ReasonBadArchive},
		{"a directory and its file", zipOf("terraform", "docs/", "docs/README.md"), ""},
		{"the program a link", linkZip("terraform", "/etc/passwd"), ReasonBadArchive},
		{"the windows program a link", linkZip("terraform.exe", "/bin/sh"), ReasonBadArchive},
		{"not a zip", []byte("<html>"), ReasonBadArchive},
		{"bomb", verifytest.Zeros("terraform", 3<<30), ReasonTooLarge},
	} {
		err := CheckCLIArchive(context.Background(), bytes.NewReader(tc.data), int64(len(tc.data)), "terraform", Limits{})
		var verr *Error
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.reason != "" && (!errors.As(err, &verr) || verr.Reason != tc.reason):
			t.Errorf("%s: %v, want %s", tc.name, err, tc.reason)
		}
	}
}

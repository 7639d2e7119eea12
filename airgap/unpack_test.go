package airgap

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/internal/scratch"
)

// rawHeader is a 512-byte tar header written by hand, for the kinds of
// entries archive/tar does not write (GNU and PAX sparse files): name,
// type flag, size, and for GNU (old GNU magic) the real size of a sparse
// file.
func rawHeader(name string, typ byte, size int64, gnu bool) []byte {
	h := make([]byte, 512)
	copy(h[0:100], name)
	copy(h[100:108], "0000644\x00")
	copy(h[108:116], "0000000\x00")
	copy(h[116:124], "0000000\x00")
	copy(h[124:136], fmt.Sprintf("%011o\x00", size))
	copy(h[136:148], fmt.Sprintf("%011o\x00", 0))
	h[156] = typ
	if gnu {
		copy(h[257:265], "ustar  \x00")
		copy(h[483:495], fmt.Sprintf("%011o\x00", size))
	} else {
		copy(h[257:265], "ustar\x0000")
	}
	copy(h[148:156], "        ")
	sum := 0
	for _, b := range h {
		sum += int(b)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return h
}

// padded is data padded to whole tar blocks.
func padded(data []byte) []byte {
	return append(data, make([]byte, (512-len(data)%512)%512)...)
}

// tarEntry is one entry of a tar file a test writes.
type tarEntry struct {
	hdr  tar.Header
	data []byte
	zero int64 // that many zero bytes as data instead
}

// writeTar writes entries as a gzip-compressed tar file and returns its path.
func writeTar(t *testing.T, entries ...tarEntry) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := e.hdr
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.data)) + e.zero
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
		if e.zero > 0 {
			if _, err := io.CopyN(tw, zeros{}, e.zero); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, buf.Bytes())
}

func writeFile(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func reg(name, data string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg}, data: []byte(data)}
}

func limits() unpackLimits { return unpackLimits{maxFileBytes: 1 << 20, maxEntries: 100} }

// Every kind of entry but regular files and directories is refused, with
// the entry's name and kind, and so are names outside the archive's
// directory, files in it twice, and tar files past the limits.
func TestUntarRefuses(t *testing.T) {
	ok := reg("registry.test/acme/alpha/VERSIONS.json", "{}")
	paxSparse := func() []byte {
		var recs string
		for _, kv := range []string{"GNU.sparse.major=1", "GNU.sparse.minor=0", "GNU.sparse.name=big.bin", "GNU.sparse.realsize=4096"} {
			n := len(kv) + 2 // " " and "\n"
			n += len(strconv.Itoa(n + len(strconv.Itoa(n))))
			recs += strconv.Itoa(n) + " " + kv + "\n"
		}
		var b []byte
		b = append(b, rawHeader("PaxHeaders/big.bin", tar.TypeXHeader, int64(len(recs)), false)...)
		b = append(b, padded([]byte(recs))...)
		b = append(b, rawHeader("GNUSparseFile.0/big.bin", tar.TypeReg, 512, false)...)
		b = append(b, padded([]byte("0\n"))...) // an empty sparse map, then data
		return append(b, make([]byte, 1024)...)
	}
	gnuSparse := append(rawHeader("big.bin", tar.TypeGNUSparse, 0, true), make([]byte, 1024)...)
	for _, tc := range []struct {
		name    string
		tarFile func(t *testing.T) string
		lim     unpackLimits
		want    string
	}{
		{"symbolic link", func(t *testing.T) string {
			return writeTar(t, ok, tarEntry{hdr: tar.Header{Name: "registry.test/acme/alpha/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}})
		}, limits(), `entry "registry.test/acme/alpha/link" is a symbolic link (to "/etc/passwd")`},
		{"hard link", func(t *testing.T) string {
			return writeTar(t, ok, tarEntry{hdr: tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: ok.hdr.Name}})
		}, limits(), `entry "hard" is a hard link`},
		{"character device", func(t *testing.T) string {
			return writeTar(t, tarEntry{hdr: tar.Header{Name: "zero", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 5}})
		}, limits(), `entry "zero" is a device`},
		{"block device", func(t *testing.T) string {
			return writeTar(t, tarEntry{hdr: tar.Header{Name: "disk", Typeflag: tar.TypeBlock, Devmajor: 8}})
		}, limits(), `entry "disk" is a device`},
		{"FIFO", func(t *testing.T) string {
			return writeTar(t, tarEntry{hdr: tar.Header{Name: "pipe", Typeflag: tar.TypeFifo}})
		}, limits(), `entry "pipe" is a FIFO`},
		{"GNU sparse file", func(t *testing.T) string { return writeFile(t, gnuSparse) }, limits(), `entry "big.bin" is a sparse file`},
		{"PAX sparse file", func(t *testing.T) string { return writeFile(t, paxSparse()) }, limits(), `is a sparse file`},
		{"outside", func(t *testing.T) string { return writeTar(t, reg("../escape", "x")) }, limits(), `entry "../escape" is outside`},
		{"absolute", func(t *testing.T) string { return writeTar(t, reg("/etc/cron.d/x", "x")) }, limits(), `entry "/etc/cron.d/x" is outside`},
		{"twice", func(t *testing.T) string { return writeTar(t, ok, ok) }, limits(), `entry "registry.test/acme/alpha/VERSIONS.json" is in the archive twice`},
		{"file too large", func(t *testing.T) string {
			return writeTar(t, tarEntry{hdr: tar.Header{Name: "big.zip", Typeflag: tar.TypeReg}, zero: 1<<20 + 1})
		}, limits(), `entry "big.zip" is larger than the 1048576 bytes allowed`},
		{"too many entries", func(t *testing.T) string {
			var es []tarEntry
			for i := range 101 {
				es = append(es, reg("f"+strconv.Itoa(i), ""))
			}
			return writeTar(t, es...)
		}, limits(), `holds more than 100 entries`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			err := untar(context.Background(), tc.tarFile(t), dir, tc.lim)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("untar: %v, want an error with %q", err, tc.want)
			}
			// Nothing of a refused entry was created.
			for _, name := range []string{"registry.test/acme/alpha/link", "hard", "zero", "disk", "pipe", "big.bin", "GNUSparseFile.0", "big.zip"} {
				if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
					t.Errorf("%s was created", name)
				}
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
				t.Error("an entry was written outside the directory")
			}
		})
	}
}

// A tar file whose files would not fit (unpacked, and as much again in
// the cache) above the cache's disk reserve is refused before the entry
// that would cross it is written, by its header's size.
func TestUntarRefusesBeforeCrossingTheReserve(t *testing.T) {
	const mib = 1 << 20
	var asked [][2]int64
	headroom := func() (int64, bool) { return 10 * mib, true }
	space := diskSpace(headroom, t.TempDir())
	lim := unpackLimits{maxFileBytes: 1 << 30, maxEntries: 100, space: func(pending, unpacked int64) error {
		asked = append(asked, [2]int64{pending, unpacked})
		return space(pending, unpacked)
	}}
	path := writeTar(t,
		tarEntry{hdr: tar.Header{Name: "a.zip", Typeflag: tar.TypeReg}, zero: 3 * mib},
		tarEntry{hdr: tar.Header{Name: "b.zip", Typeflag: tar.TypeReg}, zero: 3 * mib},
		tarEntry{hdr: tar.Header{Name: "c.zip", Typeflag: tar.TypeReg}, zero: 3 * mib},
		tarEntry{hdr: tar.Header{Name: "d.zip", Typeflag: tar.TypeReg}, zero: 3 * mib},
	)
	dir := t.TempDir()
	err := untar(context.Background(), path, dir, lim)
	if !errors.Is(err, errNoRoom) || !strings.Contains(err.Error(), `entry "c.zip" (3.0 MiB)`) ||
		!strings.Contains(err.Error(), "above the cache's disk reserve") {
		t.Fatalf("untar: %v, want c.zip refused for want of room above the reserve", err)
	}
	t.Log(err)
	// a and b (3 MiB each, and as much again in the cache) fit in 10 MiB;
	// c would need 3 more to unpack and 9 in the cache.
	for _, name := range []string{"a.zip", "b.zip"} {
		if info, err := os.Stat(filepath.Join(dir, name)); err != nil || info.Size() != 3*mib {
			t.Errorf("%s: %v, want unpacked", name, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "c.zip")); err == nil {
		t.Error("c.zip was created")
	}
	if len(asked) != 3 || asked[2][0] != 3*mib+entryBlock || asked[2][1] != 9*mib+3*entryBlock {
		t.Errorf("space asked for %v, want 3 times, the last for c.zip's 3 MiB with 9 MiB unpacked (plus a block per entry)", asked)
	}
}

// When the room shrinks while a file is unpacked (others write to the
// file system too), unpacking stops within spaceCheckBytes of it, counting
// the bytes written rather than trusting the header.
func TestUntarStopsWhenTheReserveIsCrossed(t *testing.T) {
	const size = 3 * spaceCheckBytes
	calls := 0
	lim := unpackLimits{maxFileBytes: 1 << 30, maxEntries: 10, space: func(pending, unpacked int64) error {
		calls++
		if calls > 1 { // the disk filled up after the header was checked
			return errNoRoom
		}
		return nil
	}}
	dir := t.TempDir()
	err := untar(context.Background(), writeTar(t, tarEntry{hdr: tar.Header{Name: "big.zip", Typeflag: tar.TypeReg}, zero: size}), dir, lim)
	if !errors.Is(err, errNoRoom) || !strings.Contains(err.Error(), `entry "big.zip", after 16 MiB of 48 MiB`) {
		t.Fatalf("untar: %v, want big.zip stopped after 16 MiB", err)
	}
	info, err := os.Stat(filepath.Join(dir, "big.zip"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() > spaceCheckBytes+64<<10 {
		t.Errorf("%d bytes written before stopping, want about %d", info.Size(), spaceCheckBytes)
	}
}

// A cancelled import stops unpacking.
func TestUntarStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := untar(ctx, writeTar(t, reg("a", "x")), t.TempDir(), limits())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("untar: %v, want context.Canceled", err)
	}
}

// A plain tar file of regular files and directories unpacks as it is.
func TestUntarUnpacks(t *testing.T) {
	dir := t.TempDir()
	path := writeTar(t, tarEntry{hdr: tar.Header{Name: "registry.test/", Typeflag: tar.TypeDir, Mode: 0o755}},
		reg("registry.test/acme/alpha/1.0.0.json", `{"archives":{}}`))
	if err := untar(context.Background(), path, dir, limits()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "registry.test/acme/alpha/1.0.0.json"))
	if err != nil || string(data) != `{"archives":{}}` {
		t.Fatalf("unpacked %q, %v", data, err)
	}
}

// A directory import with more entries than allowed is refused.
func TestDirectoryImportEntries(t *testing.T) {
	dir := t.TempDir()
	for i := range 5 {
		write(t, filepath.Join(dir, "registry.test/acme/alpha", fmt.Sprintf("terraform-provider-alpha_1.0.%d_linux_amd64.zip", i)), "zip")
	}
	b := openBundle(dir, ImportOptions{Shown: "in", MaxEntries: 4})
	var sum ImportSummary
	err := importDir(context.Background(), nil, b, func(string) {}, &sum)
	if err == nil || !strings.Contains(err.Error(), "in holds more than 4 entries") {
		t.Fatalf("importDir: %v, want refused for its entries", err)
	}
}

// Files an import reads whole are regular files within their bounds.
func TestReadCapped(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "SHA256SUMS"), strings.Repeat("x", 100))
	if _, err := readCapped(filepath.Join(dir, "SHA256SUMS"), 99); err == nil || !strings.Contains(err.Error(), "larger than the 99 bytes allowed") {
		t.Errorf("over the cap: %v", err)
	}
	if data, err := readCapped(filepath.Join(dir, "SHA256SUMS"), 100); err != nil || len(data) != 100 {
		t.Errorf("at the cap: %d bytes, %v", len(data), err)
	}
	if err := os.Symlink(filepath.Join(dir, "SHA256SUMS"), filepath.Join(dir, "link")); err != nil {
		t.Skip(err)
	}
	if _, err := readCapped(filepath.Join(dir, "link"), 100); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("symbolic link: %v", err)
	}
}

// RemoveScratch removes the scratch directories of imports, whatever
// process they were named for, and nothing else.
func TestRemoveScratch(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	mk := func(name string) string {
		write(t, filepath.Join(dir, name, "registry.test", "big.zip"), "unpacked")
		return name
	}
	gone := []string{
		mk(scratch.Import + strconv.Itoa(dead.Process.Pid) + "-123"),
		mk(scratch.Import + strconv.Itoa(os.Getpid()) + "-456"),
		mk(scratch.Import + "garbled"),
	}
	kept := []string{
		mk("import-123"),
		"cache",
	}
	write(t, filepath.Join(dir, "cache", "MANIFEST"), "x")
	write(t, filepath.Join(dir, scratch.Import+"1-file"), "not a directory")
	kept = append(kept, scratch.Import+"1-file")
	if err := RemoveScratch(dir, discard()); err != nil {
		t.Fatal(err)
	}
	for _, name := range gone {
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want removed", name, err)
		}
	}
	for _, name := range kept {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v, want kept", name, err)
		}
	}
	if err := RemoveScratch(filepath.Join(dir, "none"), discard()); err != nil {
		t.Errorf("a data directory not made yet: %v", err)
	}
}

// An import killed before a power cut (or in a container, restarted)
// left its unpacked bundle named with its process's id, which another
// process running has now: the directory is the data directory's own
// (its cache is open), so no import of another process unpacks there,
// and what is left goes at start as any other (before, it was kept, as
// an import under way, at every start while that process ran).
func TestRemoveScratchOfAnIDGivenAgain(t *testing.T) {
	dir := t.TempDir()
	name := scratch.Import + strconv.Itoa(os.Getppid()) + "-789" // a process running, not this one
	write(t, filepath.Join(dir, name, "registry.test", "big.zip"), "unpacked")
	if err := RemoveScratch(dir, discard()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s, named with the id of a process running: %v, want removed", name, err)
	}
}

// TestUntarRefusesDeepNames: an entry nested past safetree.MaxDepth is
// refused at once, whatever the tar file's extended header allows its
// name to be (a megabyte): before, one entry named "a/" 4,000 times took
// minutes to unpack and one of a megabyte would not end. The directories
// an entry implies but no entry names count as entries, and as room on
// disk: 20 entries of 30 directories each made 600 directories, counted
// as 20 entries.
func TestUntarRefusesDeepNames(t *testing.T) {
	for _, depth := range []int{safetree.MaxDepth, 4000, 300_000} {
		path := writeTar(t, reg(strings.Repeat("a/", depth)+"f.zip", "x"))
		start := time.Now()
		err := untar(context.Background(), path, t.TempDir(), limits())
		// A name longer than an entry's headers may be is refused as that.
		if !errors.Is(err, safetree.ErrUnsafe) && (2*depth < maxHeaderBytes || !errors.Is(err, errHeadersTooLong)) {
			t.Errorf("an entry %d deep: %v, want refused", depth, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("an entry %d deep took %v to refuse", depth, d)
		}
	}
	var entries []tarEntry
	for i := range 20 {
		entries = append(entries, reg(fmt.Sprintf("d%d/", i)+strings.Repeat("a/", 29)+"f.zip", "x"))
	}
	path := writeTar(t, entries...)
	dir := t.TempDir()
	if err := untar(context.Background(), path, dir, limits()); err == nil || !strings.Contains(err.Error(), "more than 100 entries") {
		t.Errorf("20 entries implying 600 directories, 100 entries allowed: %v", err)
	}
	var charged int64
	lim := limits()
	lim.maxEntries = 1000
	lim.space = func(pending, unpacked int64) error { charged = max(charged, unpacked); return nil }
	if err := untar(context.Background(), path, t.TempDir(), lim); err != nil {
		t.Fatal(err)
	}
	if want := int64(20*30*entryBlock + 20*2*entryBlock); charged < want {
		t.Errorf("20 files in 600 directories charged %d bytes of room, want %d at least", charged, want)
	}
}

// TestDirectoryImportListingBounded: a directory import reads no more
// entries of any directory than it takes, at every level of the layout
// (before, filepath.Glob listed every directory three and four levels
// down, whatever their number, before anything was counted: a directory
// of millions of empty directories was read whole).
func TestDirectoryImportListingBounded(t *testing.T) {
	for _, top := range []string{"", modulesDir, releasesDir} {
		dir := t.TempDir()
		for i := range 500 {
			if err := os.MkdirAll(filepath.Join(dir, top, fmt.Sprintf("h%d.example", i)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		write(t, filepath.Join(dir, "registry.test/acme/alpha/terraform-provider-alpha_1.0.0_linux_amd64.zip"), "zip")
		_, err := Import(context.Background(), nil, dir, ImportOptions{Shown: "in", MaxEntries: 100}, func(string) {})
		if err == nil || !strings.Contains(err.Error(), "in holds more than 100 entries") {
			t.Errorf("500 directories under %q/: %v, want refused for its entries", top, err)
		}
	}
}

package airgap

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/internal/scratch"
)

// Bounds on what an import unpacks and reads.
const (
	// DefaultMaxEntries is ImportOptions.MaxEntries when it is zero: a
	// manifest (at most 64 MiB, some 250 bytes a file) lists about as
	// many files.
	DefaultMaxEntries = 250_000
	// entryBlock is the unit file sizes are counted in on disk, and what
	// each entry of a tar file costs beyond its bytes (inode, name).
	entryBlock = 4 << 10
	// spaceCheckBytes is how often, in bytes written, the free space is
	// asked again while one file is unpacked.
	spaceCheckBytes = 16 << 20
)

// spaceCheck is asked before each entry of a tar file is unpacked and
// again every spaceCheckBytes written while it is: pending bytes are still
// to be written into the scratch directory for it, and unpacked are the
// bytes of the entries unpacked so far with it, which the import then
// copies into the cache. It returns why they do not fit, or nil.
type spaceCheck func(pending, unpacked int64) error

// unpackLimits bound untar.
type unpackLimits struct {
	maxFileBytes int64
	maxEntries   int
	space        spaceCheck // nil: not checked
}

// diskSpace is the spaceCheck of an import into engine's cache with its
// scratch directory in scratch. An unpacked bundle is first written to
// the scratch directory, then copied into the cache: both must fit above
// the cache's disk reserve (asked of the cache's file system each time;
// checked as if the scratch directory were on it, which in tfmirror it
// is: the data directory), and the unpacked files on the scratch
// directory's file system.
func diskSpace(headroom func() (int64, bool), scratch string) spaceCheck {
	return func(pending, unpacked int64) error {
		if room, ok := headroom(); ok && room < pending+unpacked {
			return fmt.Errorf("%w: the files up to this one take %s unpacked, and as much again in the cache once imported; that needs %s more, and only %s is free above the cache's disk reserve (--disk-reserve). Unpack it elsewhere and import the directory, or make room",
				errNoRoom, humanize.IBytes(uint64(unpacked)), humanize.IBytes(uint64(pending+unpacked)), humanize.IBytes(uint64(max(room, 0))))
		}
		if free, err := cache.FreeSpace(scratch); err == nil && free < pending {
			return fmt.Errorf("%w: %s more to unpack and only %s free on the file system of %s",
				errNoRoom, humanize.IBytes(uint64(pending)), humanize.IBytes(uint64(max(free, 0))), scratch)
		}
		return nil
	}
}

// errNoRoom is untar's error for a tar file that does not fit.
var errNoRoom = errors.New("not enough disk space")

// blocks is n rounded up to whole entryBlocks.
func blocks(n int64) int64 { return (n + entryBlock - 1) / entryBlock * entryBlock }

// untar unpacks the tar file path (gzip-compressed or not) into dir,
// through a safetree.Writer (which writes nothing through a link, and
// refuses a name twice): regular files and directories only (links, devices, FIFOs and sparse
// files are refused, naming the entry), every name inside dir, no file
// larger than lim.maxFileBytes, at most lim.maxEntries entries (the
// directories they imply that no entry names among them), and each
// entry only once lim.space says it fits (before it is written, by its
// header's size, and again as its bytes, counted as written, go on).
// On error, dir holds part of the tar file: the caller removes it.
func untar(ctx context.Context, path, dir string, lim unpackLimits) error {
	f, err := openTar(ctx, path)
	if err != nil {
		return err
	}
	defer f.Close()
	// A FIFO's read waits for its writer's next bytes: an interrupt ends
	// it (a regular file's reads do not wait, and take no deadline).
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
	defer stop()
	r, err := decompressed(bufio.NewReader(f))
	if err != nil {
		return err
	}
	var unpacked int64 // bytes charged so far, entries included
	entries := 0       // entries taken, the directories they imply included
	take := func() error {
		if entries++; entries > lim.maxEntries {
			return fmt.Errorf("holds more than %d entries, the most an import takes", lim.maxEntries)
		}
		return nil
	}
	// A directory an entry implies, which no entry names, is an entry
	// and takes a block of its own.
	implied := func(name string) error {
		if err := take(); err != nil {
			return err
		}
		if lim.space != nil {
			if err := lim.space(entryBlock, unpacked+entryBlock); err != nil {
				return fmt.Errorf("directory %q: %w", name, err)
			}
		}
		unpacked += entryBlock
		return nil
	}
	tw, err := safetree.Open(dir, safetree.Options{NoReplace: true, ImpliedDir: implied})
	if err != nil {
		return err
	}
	defer tw.Close()
	headers := &headerBound{r: r}
	tr := tar.NewReader(headers)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		headers.expectHeader()
		hdr, err := tr.Next()
		headers.expectData()
		if err == io.EOF {
			return tw.Finish()
		}
		if headers.exceeded {
			return fmt.Errorf("%w: an entry's headers run on for more than %d bytes, which no tar file tfmirror writes does", errHeadersTooLong, maxHeaderBytes)
		}
		if err != nil {
			return err
		}
		if err := take(); err != nil {
			return err
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if !filepath.IsLocal(name) {
			return fmt.Errorf("entry %q is outside the archive's directory", hdr.Name)
		}
		if err := refuseKind(hdr); err != nil {
			return err
		}
		charge := entryBlock + blocks(hdr.Size)
		if hdr.Typeflag == tar.TypeReg && hdr.Size > lim.maxFileBytes {
			return fmt.Errorf("entry %q is larger than the %d bytes allowed (--max-archive-bytes)", hdr.Name, lim.maxFileBytes)
		}
		if lim.space != nil {
			if err := lim.space(charge, unpacked+charge); err != nil {
				return fmt.Errorf("entry %q (%s): %w", hdr.Name, humanize.IBytes(uint64(hdr.Size)), err)
			}
		}
		unpacked += charge
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := tw.Dir(name); err != nil {
				return err
			}
		case tar.TypeReg:
			cr := &countingReader{ctx: ctx, r: tr, name: hdr.Name, declared: hdr.Size, charge: charge, unpacked: unpacked, space: lim.space}
			err := tw.File(name, 0o644, hdr.Size, cr)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("entry %q is in the archive twice", hdr.Name)
			}
			if err != nil {
				return err
			}
		}
	}
}

// decompressed is what br reads, gunzipped when it starts as gzip does.
func decompressed(br *bufio.Reader) (io.Reader, error) {
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		return gzip.NewReader(br)
	}
	return br, nil
}

// CheckTar refuses a regular file at path that does not start as a tar
// file (gzip-compressed or not) does, reading its first entry's header,
// so that an import refuses such a file before it makes or opens a data
// directory; so is a tar file of no entry, which holds nothing to
// import. Anything else (a directory, a FIFO, which a read would
// drain) is left to Import; a tar file refused past its first header
// still is refused by Import, leaving nothing behind.
func CheckTar(path string) error {
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := decompressed(bufio.NewReader(f))
	if err == nil {
		// Headers read to the bound were read as headers: the first
		// runs on (extended ones), which Import refuses saying so.
		lr := &io.LimitedReader{R: r, N: 2 * maxHeaderBytes}
		if _, err = tar.NewReader(lr).Next(); lr.N == 0 {
			return nil
		}
	}
	if err == io.EOF {
		// A tar file of no entry holds no package, nor the manifest
		// even an empty export carries.
		return errors.New("a tar file of no entry: it holds no provider packages, and no export's manifest")
	}
	if err != nil {
		return fmt.Errorf("not a tar file, gzip-compressed or not (%v)", err)
	}
	return nil
}

// openTar opens the tar file at path for reading. A FIFO (a stream the
// operator pipes in) is opened as given, waiting for its writer, until
// ctx is done: then this process opens it for writing, as the writer its
// open waits for, so that the open returns and is closed, and the
// goroutine that waited on it ends.
func openTar(ctx context.Context, path string) (*os.File, error) {
	if info, err := os.Stat(path); err != nil || info.Mode()&fs.ModeNamedPipe == 0 {
		return os.Open(path)
	}
	type opened struct {
		f   *os.File
		err error
	}
	done := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		done <- opened{f, err}
	}()
	select {
	case o := <-done:
		return o.f, o.err
	case <-ctx.Done():
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range 500 {
		w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		switch {
		case err == nil:
			w.Close()
		case !errors.Is(err, syscall.ENXIO): // ENXIO: the open is not under way yet
			return nil, ctx.Err() // left to end when a writer comes
		}
		select {
		case o := <-done:
			if o.f != nil {
				o.f.Close()
			}
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	return nil, ctx.Err()
}

// refuseKind refuses every kind of entry but regular files and
// directories: a link could point outside the scratch directory, a device
// or FIFO is no file to import, and a sparse file takes more room than its
// bytes in the tar file say.
func refuseKind(hdr *tar.Header) error {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return fmt.Errorf("entry %q is a sparse file; an import takes regular files and directories only", hdr.Name)
		}
	}
	var kind string
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir:
		return nil
	case tar.TypeSymlink:
		kind = "a symbolic link (to " + strconv.Quote(hdr.Linkname) + ")"
	case tar.TypeLink:
		kind = "a hard link (to " + strconv.Quote(hdr.Linkname) + ")"
	case tar.TypeChar, tar.TypeBlock:
		kind = "a device"
	case tar.TypeFifo:
		kind = "a FIFO"
	case tar.TypeGNUSparse:
		kind = "a sparse file"
	default:
		kind = fmt.Sprintf("of type %q", hdr.Typeflag)
	}
	return fmt.Errorf("entry %q is %s; an import takes regular files and directories only", hdr.Name, kind)
}

// countingReader reads one entry's bytes, counting them: more than the
// header declared is refused, and every spaceCheckBytes the free space is
// asked again for what remains (others write to the file system too).
type countingReader struct {
	ctx      context.Context
	r        io.Reader
	name     string
	declared int64
	charge   int64 // what the entry was charged (spaceCheck's pending)
	unpacked int64 // bytes charged with this entry (spaceCheck's unpacked)
	space    spaceCheck
	read     int64
	next     int64 // read at the next check
}

func (c *countingReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if c.space != nil && c.read >= c.next {
		c.next = c.read + spaceCheckBytes
		if c.read > 0 {
			if err := c.space(max(c.charge-c.read, 0), c.unpacked); err != nil {
				return 0, fmt.Errorf("entry %q, after %s of %s: %w", c.name, humanize.IBytes(uint64(c.read)), humanize.IBytes(uint64(c.declared)), err)
			}
		}
	}
	n, err := c.r.Read(p)
	c.read += int64(n)
	if c.read > c.declared {
		return 0, fmt.Errorf("entry %q holds more than the %d bytes its header declares", c.name, c.declared)
	}
	return n, err
}

// maxHeaderBytes bounds the bytes a tar file may take from the end of
// one entry's data to the start of the next's: the padding of the data,
// the entry's header block and its extended headers (PAX records, GNU
// long names), which a name of safetree.MaxNameBytes keeps to a few KiB.
// archive/tar reads every extended header of an entry within one call of
// Next, however many there are (each up to 1 MiB): without this bound, a
// small gzip-compressed file of headers alone would keep an import
// reading, checking nothing, for as long as it runs on.
const maxHeaderBytes = 64 << 10

// headerBound is the tar stream as untar's tar reader reads it: while a
// header is read (expectHeader), at most maxHeaderBytes, then it fails
// (exceeded); an entry's data is bounded by its countingReader.
type headerBound struct {
	r        io.Reader
	left     int64 // bytes the header being read may still take; < 0: reading data
	exceeded bool
}

func (h *headerBound) expectHeader() { h.left = maxHeaderBytes }
func (h *headerBound) expectData()   { h.left = -1 }

func (h *headerBound) Read(p []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(p)
	}
	if h.left == 0 {
		h.exceeded = true
		return 0, errHeadersTooLong
	}
	if int64(len(p)) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	h.left -= int64(n)
	return n, err
}

// errHeadersTooLong is untar's error (and what its tar reader is told)
// when an entry's headers run past maxHeaderBytes.
var errHeadersTooLong = errors.New("tar headers too long")

// newScratch makes the directory an import unpacks a tar file into, in
// parent (os.TempDir() when ""), named so that RemoveScratch knows it:
// scratch.Import, this process's id, "-" and a random part.
func newScratch(parent string) (string, error) {
	return os.MkdirTemp(parent, scratch.Pattern(scratch.Import, strconv.Itoa(os.Getpid()), ""))
}

// RemoveScratch removes from dir what imports that did not end (their
// process was killed, or crashed) left unpacked there. A process calls
// it at start, before it imports, on the directory its imports unpack
// into, once that directory is its own (the data directory, whose cache
// one process at a time opens): every import scratch directory there is
// then one a process that is gone left, whatever process has its id now
// (after a reboot, or in a container, ids are given again). Each
// directory removed is logged.
func RemoveScratch(dir string, logger *slog.Logger) error {
	return scratch.Remove(dir, scratch.Import, func(e fs.DirEntry) bool { return !e.IsDir() },
		logger, "removed what an interrupted import left unpacked")
}

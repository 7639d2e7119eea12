package fetch

// Opening archives: cached, or from their download under way; making
// sure one is cached; committing one read from a file handed in.

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// hooksNow returns the hooks, read under the fetcher's lock.
func (fr *Fetcher) hooksNow() Hooks {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.hooks
}

// Open opens the archive a (of p, or read from src when set): from the
// cache, or else from its download under way, starting one if there is
// none (ctx bounds only the caller's wait and reads; the download runs
// on the engine's context). See mirror.Engine.OpenArchive.
//
// The archive's work, which Shutdown waits for until it is closed, is
// counted once, before the cache is looked in, whichever way the archive
// is then opened; a failure ends it.
func (fr *Fetcher) Open(ctx context.Context, p addrs.Provider, a records.ArchiveRecord, src *Source) (*Archive, error) {
	if !fr.life.StartWork() {
		return nil, records.ErrShutDown
	}
	if arc := fr.openCached(a.SHA256); arc != nil {
		return arc, nil
	}
	// Committed since we looked: joinOrOpen opens it with the reference
	// taken before the fetcher's lock is let go, so that eviction cannot
	// delete it between being found and being opened.
	blob, f, leader, err := fr.joinOrOpen(p, a, src)
	if err != nil {
		fr.life.EndWork()
		return nil, err
	}
	if blob != nil {
		return fr.hit(a.SHA256, blob), nil
	}
	how := fr.countMiss(leader)
	select {
	case <-f.ready:
	case <-ctx.Done():
		f.release()
		fr.life.EndWork()
		return nil, fmt.Errorf("waiting for the origin: %w", ctx.Err())
	}
	size, err := f.header()
	if err != nil {
		f.release()
		fr.life.EndWork()
		return nil, err
	}
	if leader && f.fromShared { // set before ready was closed
		how = records.Shared
	}
	arc := &Archive{SHA256: a.SHA256, Size: size, Source: how, f: f, r: f.follow(), holdBack: fr.cfg.HoldBack, gone: make(chan struct{}), life: fr.life, log: fr.log,
		reopen: fr.reopen}
	arc.stop = context.AfterFunc(ctx, func() {
		arc.goneErr = context.Cause(ctx)
		close(arc.gone)
	})
	return arc, nil
}

// OpenCached opens the cached archive sha, counting a cache hit; it
// returns nil, nil when the archive is not cached.
func (fr *Fetcher) OpenCached(sha string) (*Archive, error) {
	if !fr.life.StartWork() {
		return nil, records.ErrShutDown
	}
	arc := fr.openCached(sha)
	if arc == nil {
		fr.life.EndWork()
	}
	return arc, nil
}

// openCached opens the cached archive sha, counting a cache hit, for a
// caller that counted the work the archive holds; nil when the archive
// is not cached.
func (fr *Fetcher) openCached(sha string) *Archive {
	blob, err := fr.store.OpenBlob(sha)
	if err != nil {
		if !errors.Is(err, cache.ErrNotFound) {
			fr.log.Error("opening cached archive", "sha256", sha, "error", err)
		}
		return nil
	}
	return fr.hit(sha, blob)
}

// reopen opens the cached archive sha under work of its own, counting
// nothing, as from src: it is the archive a caller opened before (from
// src), read to its end and saw stored (Archive.Reopen).
func (fr *Fetcher) reopen(sha string, src records.Source) (*Archive, error) {
	if !fr.life.StartWork() {
		return nil, records.ErrShutDown
	}
	blob, err := fr.store.OpenBlob(sha)
	if err != nil {
		fr.life.EndWork()
		return nil, err
	}
	return fr.cached(sha, blob, src), nil
}

// hit is the cached archive sha opened as blob, under the work its
// caller counted; it counts a cache hit.
func (fr *Fetcher) hit(sha string, blob cache.BlobReader) *Archive {
	fr.metrics.CacheLookup("archive", true)
	return fr.cached(sha, blob, records.Hit)
}

// cached is the cached archive sha opened as blob, said to come from src.
func (fr *Fetcher) cached(sha string, blob cache.BlobReader, src records.Source) *Archive {
	info := blob.Info()
	return &Archive{SHA256: sha, Size: info.Size, ModTime: info.Created, Source: src, blob: blob, life: fr.life, log: fr.log}
}

// Ensure makes sure the archive a of p is cached, without any client to
// stream it to: it downloads it if need be and waits for the commit. It
// returns where the archive came from. ctx bounds the wait only.
func (fr *Fetcher) Ensure(ctx context.Context, p addrs.Provider, a records.ArchiveRecord) (records.Source, error) {
	f, leader, err := fr.join(p, a)
	if err != nil {
		return 0, err
	}
	if f == nil {
		fr.metrics.CacheLookup("archive", true)
		return records.Hit, nil
	}
	defer f.release()
	src := fr.countMiss(leader)
	select {
	case <-f.done:
	case <-ctx.Done():
		return src, fmt.Errorf("waiting for the origin: %w", ctx.Err())
	}
	if leader && f.fromShared { // set before done was closed
		src = records.Shared
	}
	if _, err := fr.store.StatBlob(a.SHA256); err == nil {
		return src, nil
	}
	if err := f.State().Err; err != nil {
		return src, err
	}
	return src, fmt.Errorf("archive %s was verified but could not be stored in the cache", a.Filename)
}

// countMiss counts an archive that was not in the cache, and a join of a
// fetch under way, and returns the source: records.Miss for the fetch's leader,
// records.Coalesced for the others.
func (fr *Fetcher) countMiss(leader bool) records.Source {
	fr.metrics.CacheLookup("archive", false)
	if leader {
		return records.Miss
	}
	fr.metrics.Coalesced("archive")
	return records.Coalesced
}

// Import commits the archive a of p to the cache with its bytes read from
// src (a file handed in, not an origin), verified as a download is,
// unless the cache has it already (present), as part of imp, the import
// under way. info is the archive as cached. imp is told first: an
// imported file cannot be fetched again. A file that fails is not kept.
func (fr *Fetcher) Import(ctx context.Context, imp *lifetime.Import, p addrs.Provider, a records.ArchiveRecord, src Source) (info cache.BlobInfo, present bool, err error) {
	imp.Importing(a.SHA256)
	src.Open = interruptible(ctx, src.Open)
	f, _, err := fr.joinFrom(p, a, &src)
	if err != nil {
		return info, false, err
	}
	if f != nil {
		defer f.release()
		select {
		case <-f.done:
		case <-ctx.Done():
			return info, false, ctx.Err()
		}
	} else {
		present = true
	}
	info, err = fr.store.StatBlob(a.SHA256)
	if err != nil {
		if f != nil {
			if ferr := f.State().Err; ferr != nil {
				return info, false, ferr
			}
			if f.notStored != nil { // set before done was closed
				err = f.notStored // why, not that it is not there
			}
		}
		what := a.Filename
		if p != (addrs.Provider{}) {
			what = "archive " + what
		}
		return info, false, fmt.Errorf("%s was verified but could not be stored in the cache: %w", what, err)
	}
	return info, present, nil
}

// ErrImportInterrupted is the error of a fetch reading an import's file
// once the import was interrupted: its caller closes the file's bundle
// under the read, which then fails, through no fault of the file or of
// the mirror.
var ErrImportInterrupted = errors.New("the import was interrupted")

// interruptible is open, an import's file handed in, whose opening and
// reads fail with ErrImportInterrupted (and ctx's error) once ctx, the
// import's, is done, whatever the failure: the import's caller may close
// the bundle the moment the import returns.
func interruptible(ctx context.Context, open func(context.Context) (io.ReadCloser, int64, error)) func(context.Context) (io.ReadCloser, int64, error) {
	if open == nil {
		return nil
	}
	return func(fctx context.Context) (io.ReadCloser, int64, error) {
		rc, n, err := open(fctx)
		if err != nil {
			return nil, n, importErr(ctx, err)
		}
		return &importReader{ctx: ctx, ReadCloser: rc}, n, nil
	}
}

// importErr is err, or ErrImportInterrupted once ctx is done.
func importErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: %w", ErrImportInterrupted, cerr)
	}
	return err
}

// importReader is an import's file: a read that fails once the import
// was interrupted fails with ErrImportInterrupted.
type importReader struct {
	ctx context.Context
	io.ReadCloser
}

func (r *importReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = importErr(r.ctx, err)
	}
	return n, err
}

// Blob is an immutable file other than a provider archive (a CLI release
// archive, see package releases) whose sha256 its caller took from a
// document it verified: the fetcher fetches it once however many callers
// ask, stages it in the cache as it arrives, releases its held-back last
// bytes only once its sha256 matched and Check passed, and commits it
// then, exactly as it does provider archives.
type Blob struct {
	// SHA256 is the sha256 the file must have, in lowercase hex.
	SHA256 string
	// Filename and Label name the file in logs and errors.
	Filename, Label string
	// Open opens the file's bytes at its origin, returning its size or
	// -1. It runs on the engine's context, not the caller's.
	Open func(ctx context.Context) (io.ReadCloser, int64, error)
	// Check, when set, must pass on the complete, matching bytes before
	// the last of them are released; nil: none.
	Check func(ctx context.Context, r io.ReaderAt, size int64) error
	// Refused, when set, is told the reason (a verify.Reason) of a
	// verification failure of the download, which the engine's metrics
	// count too.
	Refused func(reason string)
}

// ErrBlob refuses a Blob without what it needs.
var ErrBlob = errors.New("mirror: a Blob needs a valid SHA256 and Open")

// source is the Source b is read from: its Open, from an origin or not.
func (b Blob) source(fromOrigin bool) *Source {
	src := &Source{Open: b.Open, FromOrigin: fromOrigin, Check: b.Check, Label: b.Label, Refused: b.Refused, LocalOnly: true}
	if src.Check == nil {
		src.Check = func(context.Context, io.ReaderAt, int64) error { return nil }
	}
	return src
}

// OpenBlob opens the file b: from the cache, or else from the origin
// download of it under way, starting one if there is none, as Open does
// for provider archives (ctx bounds only the caller's wait and reads).
// The shared tier is neither read nor given the file: each replica
// fetches it from the origin once. Offline, a file that is not cached
// fails with records.ErrOffline without b.Open being called.
func (fr *Fetcher) OpenBlob(ctx context.Context, b Blob) (*Archive, error) {
	if !sha256hex.Valid(b.SHA256) || b.Open == nil {
		return nil, ErrBlob
	}
	a := records.ArchiveRecord{Filename: b.Filename, SHA256: b.SHA256}
	if fr.cfg.Offline {
		arc, err := fr.OpenCached(b.SHA256)
		if arc == nil && err == nil {
			err = records.ErrOffline
		}
		return arc, err
	}
	return fr.Open(ctx, addrs.Provider{}, a, b.source(true))
}

// ImportBlob commits the file b to the cache with its bytes read from
// b.Open (a file of an air-gap bundle, not an origin), verified as OpenBlob
// verifies a download: its sha256, then Check, before it is committed. It
// works sealed, as part of imp, the import under way. present says the
// cache had it already (nothing was read); size is its size in the
// cache. A file that fails is not kept.
func (fr *Fetcher) ImportBlob(ctx context.Context, imp *lifetime.Import, b Blob) (size int64, present bool, err error) {
	if !sha256hex.Valid(b.SHA256) || b.Open == nil {
		return 0, false, ErrBlob
	}
	if !fr.life.StartWork() {
		return 0, false, records.ErrShutDown
	}
	defer fr.life.EndWork()
	a := records.ArchiveRecord{Filename: b.Filename, SHA256: b.SHA256}
	info, present, err := fr.Import(ctx, imp, addrs.Provider{}, a, *b.source(false))
	if err != nil {
		return 0, false, err
	}
	return info.Size, present, nil
}

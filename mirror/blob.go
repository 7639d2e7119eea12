package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// Blob is an immutable file other than a provider archive (a CLI release
// archive, see package releases) whose sha256 its caller took from a
// document it verified: the engine fetches it once however many callers
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

// errBlob is a Blob without what it needs.
var errBlob = errors.New("mirror: a Blob needs a valid SHA256 and Open")

// OpenBlob opens the file b: from the cache, or else from the origin
// download of it under way, starting one if there is none, as
// OpenArchive does for provider archives (ctx bounds only the caller's
// wait and reads). The shared tier is neither read nor given the file:
// each replica fetches it from the origin once. Offline, a file that is not cached fails with
// records.ErrOffline without b.Open being called.
func (s *Engine) OpenBlob(ctx context.Context, b Blob) (*Archive, error) {
	if !sha256hex.Valid(b.SHA256) || b.Open == nil {
		return nil, errBlob
	}
	a := records.ArchiveRecord{Filename: b.Filename, SHA256: b.SHA256}
	if s.cfg.Offline {
		arc, err := s.archives.openCached(b.SHA256)
		if arc == nil && err == nil {
			err = records.ErrOffline
		}
		return arc, err
	}
	src := &archiveSource{open: b.Open, fromOrigin: true, check: b.Check, label: b.Label, refused: b.Refused, localOnly: true}
	if src.check == nil {
		src.check = func(context.Context, io.ReaderAt, int64) error { return nil }
	}
	return s.openFetched(ctx, addrs.Provider{}, a, src)
}

// HasBlob reports whether the file sha is in the cache.
func (s *Engine) HasBlob(sha string) bool {
	_, err := s.store.StatBlob(sha)
	return err == nil
}

// ImportBlob commits the file b to the cache with its bytes read from
// b.Open (a file of an air-gap bundle, not an origin), verified as OpenBlob
// verifies a download: its sha256, then Check, before it is committed. It
// works sealed. present says the cache had it already (nothing was read);
// size is its size in the cache. A file that fails is not kept.
func (s *AirGap) ImportBlob(ctx context.Context, b Blob) (size int64, present bool, err error) {
	if !sha256hex.Valid(b.SHA256) || b.Open == nil {
		return 0, false, errBlob
	}
	fr := s.archives
	if !fr.life.StartWork() {
		return 0, false, records.ErrShutDown
	}
	defer fr.life.EndWork()
	a := records.ArchiveRecord{Filename: b.Filename, SHA256: b.SHA256}
	src := &archiveSource{open: b.Open, check: b.Check, label: b.Label, refused: b.Refused, localOnly: true}
	if src.check == nil {
		src.check = func(context.Context, io.ReaderAt, int64) error { return nil }
	}
	fr.life.Notifier().Importing(b.SHA256) // an imported file cannot be fetched again
	f, _, err := fr.joinFrom(addrs.Provider{}, a, src)
	if err != nil {
		return 0, false, err
	}
	if f != nil {
		defer f.release()
		select {
		case <-f.done:
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
	} else {
		present = true
	}
	info, err := s.store.StatBlob(b.SHA256)
	if err != nil {
		if f != nil {
			if ferr := f.snapshot().err; ferr != nil {
				return 0, false, ferr
			}
		}
		return 0, false, fmt.Errorf("%s was verified but could not be stored in the cache: %w", b.Filename, err)
	}
	return info.Size, present, nil
}

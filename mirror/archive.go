package mirror

import (
	"context"
	"sync"

	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
)

// copyBufferSize is the unit in which the engine copies documents it
// verifies.
const copyBufferSize = 256 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// Archive is an opened provider archive (fetch.Archive): read it, then
// Close it. See OpenArchive.
type Archive = fetch.Archive

// Blob is an immutable file other than a provider archive, fetched once
// and verified as provider archives are (fetch.Blob). See OpenBlob.
type Blob = fetch.Blob

// OpenBlob opens the file b: from the cache, or else from the origin
// download of it under way, starting one if there is none, as
// OpenArchive does for provider archives (ctx bounds only the caller's
// wait and reads). The shared tier is neither read nor given the file:
// each replica fetches it from the origin once. Offline, a file that is
// not cached fails with records.ErrOffline without b.Open being called.
func (s *Engine) OpenBlob(ctx context.Context, b Blob) (*Archive, error) {
	return s.archives.OpenBlob(ctx, b)
}

// HasBlob reports whether the file sha is in the cache.
func (s *Engine) HasBlob(sha string) bool {
	_, err := s.store.StatBlob(sha)
	return err == nil
}

// Import is an import of files under way (AirGap.BeginImport): End it
// once what names the files it imported is stored, or it failed.
type Import = lifetime.Import

// BeginImport begins an import of files (ImportBlob): until it ends,
// retention keeps what it imports though no record names it yet; once it
// ended, what no record names may go.
func (s *AirGap) BeginImport() *Import { return s.life.BeginImport() }

// ImportBlob commits the file b to the cache with its bytes read from
// b.Open (a file of an air-gap bundle, not an origin), as part of imp,
// verified as OpenBlob verifies a download: its sha256, then Check,
// before it is committed. It works sealed. present says the cache had it
// already (nothing was read); size is its size in the cache. A file that
// fails is not kept.
func (s *AirGap) ImportBlob(ctx context.Context, imp *Import, b Blob) (size int64, present bool, err error) {
	return s.archives.ImportBlob(ctx, imp, b)
}

// Package testhooks carries the few operations that tests in other
// packages need and production code must not call, from the package that
// owns them to its test-support package: deleting an archive, damaging
// one, and counting archive chunks (package cache, for internal/cachetest), waiting for the
// engine's fetches to end (package mirror, for internal/enginetest).
//
// The owning packages set the hooks once, when they are initialised
// (cache/testsupport.go, mirror/testsupport.go), and nothing changes them
// afterwards. Tests call the typed functions of the test-support
// packages, never these. It imports nothing of tfmirror, so that the
// owners can import it.
package testhooks

import "context"

var (
	// DeleteBlob deletes the committed archive sha from a *cache.Store.
	DeleteBlob func(store any, sha string) error
	// ChunkCount counts the archive chunks a *cache.Store holds,
	// committed or not.
	ChunkCount func(store any) (int, error)
	// FlipBlobByte inverts one byte of a committed archive of a
	// *cache.Store where it is stored, as a failing disk would.
	FlipBlobByte func(store any, sha string, off int64) error
	// EngineWait returns when no origin fetch or archive download of a
	// *mirror.Engine runs, or ctx is done.
	EngineWait func(ctx context.Context, engine any) error
)

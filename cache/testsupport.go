package cache

import "github.com/tfmirror/tfmirror/internal/testhooks"

// What tests in other packages need of a store and production code must
// not call, handed to internal/cachetest (see package testhooks).
func init() {
	testhooks.DeleteBlob = func(s any, sha string) error { return s.(*Store).deleteBlob(sha) }
	testhooks.ChunkCount = func(s any) (int, error) { return s.(*Store).chunkCount() }
}

// Package cachetest gives the tests of other packages what the cache does
// not offer production code: putting an archive in place (as an earlier
// run or an import left it), deleting a committed archive (as eviction
// does), damaging one (as a failing disk does), changing one where only
// its sha256 tells, or marking one found damaged, counting archive chunks
// (to check that nothing was left behind) and running an eviction pass.
// Tests only: the shipped binary links none of it.
package cachetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/tfmirror/tfmirror/v2/cache"
)

// DeleteBlob deletes the committed archive sha from store: its record,
// then its chunks.
func DeleteBlob(store *cache.Store, sha string) error { return cache.RigOf(store).DeleteBlob(sha) }

// ChunkCount returns how many archive chunks store holds, committed or
// not: after a failed or interrupted write, and once the store cleaned
// up, only committed archives' chunks remain.
func ChunkCount(store *cache.Store) (int, error) { return cache.RigOf(store).ChunkCount() }

// FlipBlobByte inverts byte off of the committed archive sha where store
// keeps it, leaving its record as it is: the damage a failing disk does,
// which the store finds when it reads the byte's chunk (cache.ErrDamaged).
func FlipBlobByte(store *cache.Store, sha string, off int64) error {
	return cache.RigOf(store).FlipBlobByte(sha, off)
}

// AlterBlobByte inverts byte off of the committed archive sha where store
// keeps it, and the checksum store keeps for the byte's chunk with it:
// an archive written wrong, or changed where it is stored by whoever can
// write the data directory, which the store reads back as stored and
// only a check against its sha256 finds.
func AlterBlobByte(store *cache.Store, sha string, off int64) error {
	return cache.RigOf(store).AlterBlobByte(sha, off)
}

// DropChunkSums rewrites every archive's commit record in store without
// the checksums of its chunks, as a release before them (2.0.0) wrote
// it, and returns how many it rewrote.
func DropChunkSums(store *cache.Store) (int, error) { return cache.RigOf(store).DropChunkSums() }

// WithoutChunkSums returns how many archives' records in store have no
// checksums of their chunks.
func WithoutChunkSums(store *cache.Store) (int, error) { return cache.RigOf(store).WithoutChunkSums() }

// MarkDamaged marks the committed archive sha in store as a read that
// found its stored bytes damaged does (cache.ErrDamaged: the mark is
// kept in its record), without damaging them: for archives whose bytes
// a test cannot damage on disk (those small enough to live in Badger's
// tables).
func MarkDamaged(store *cache.Store, sha string) error { return cache.RigOf(store).MarkDamaged(sha) }

// Evict has store's eviction goroutine run a pass now and waits until it
// is over, or ctx is done: after it, the archives are within the size
// limit (cache.Options.MaxBytes) unless what is left is in use or may
// not be evicted. Without a size limit it does nothing.
func Evict(ctx context.Context, store *cache.Store) error { return cache.RigOf(store).Evict(ctx) }

// FailPings has every test write of store's Ping fail with err from
// now on (nil: succeed again), as a database that no longer takes writes
// does while its disk has room: the next Ping probes and fails.
func FailPings(store *cache.Store, err error) { cache.RigOf(store).FailPings(err) }

// PutBlob stores data in store as a committed archive, under its sha256,
// which it returns: an archive a test puts in place as an earlier run, an
// import or another release left it.
func PutBlob(store *cache.Store, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	w, err := store.NewBlobWriter(sha)
	if err != nil {
		return "", err
	}
	defer w.Close()
	if _, err := w.Write(data); err != nil {
		return "", err
	}
	if _, err := w.Commit(""); err != nil {
		return "", err
	}
	return sha, nil
}

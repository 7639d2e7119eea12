package ocistore

// Archive sizes the mirror verified against those a version's documents
// were made with. A version's documents are made before any of its
// archives is downloaded, so the size of an archive the cache does not
// hold is what the origin states: OpenTofu's package_size, or the total
// of a first-byte request, neither covered by any signature. When the
// archive is verified (before a platform's manifest is answered: the
// caller, mirror.OCI, waits for its archive and tells Verified; found in
// the cache when its blob is served; or when the version's index is
// answered: after any archive is committed, for whatever door, a kept
// answer holds no longer, Generation, and the next bears its sizes out)
// and its size is not the one its version's documents were made with,
// those documents are wrong, and no client can pull them: a layer's
// descriptor states a size its blob does not have (and the manifest
// cannot be put right under the digest the index names it by: a manifest
// asked for is answered WrongSizeError instead). The version's
// OCI records are dropped whole (the documents, their digest entries,
// the sizes), as when the engine lets the version go, and made again
// from the verified size by the next index of the version: the digests
// of that platform's manifest and of the version's index change, those
// of its other platforms' manifests do not. A digest no client could
// ever pull is not one to keep stable. A version whose sizes were right
// is never dropped, and its documents stay byte for byte what they were.

import (
	"context"
	"fmt"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
)

// verifiedSize is the size of the archive sha as the cache holds it,
// verified; 0 when it does not hold it.
func (o *OCI) verifiedSize(sha string) int64 {
	if info, err := o.store.StatBlob(sha); err == nil && info.Size > 0 {
		return info.Size
	}
	return 0
}

// borneOut says whether rec, the kept OCI record of version v of p,
// holds a size of one of archives other than that of the archive the
// cache holds: it then drops the record (dropWrong), and the caller
// reads it again (empty, or made since by another caller).
func (o *OCI) borneOut(p addrs.Provider, v versions.Version, rec *ociRecord, archives []Archive) bool {
	for _, a := range archives {
		made := rec.Sizes[a.SHA256]
		if made == 0 {
			continue
		}
		if n := o.verifiedSize(a.SHA256); n > 0 && n != made {
			o.dropWrong(p, v, a.SHA256, n)
			return true
		}
	}
	return false
}

// Verified is told that the archive sha of p, verified, is size bytes
// (opened from the cache): if a version's OCI
// documents were made with another size for it, they are dropped, for
// every OCI side of the engine, to be made again from the verified size
// (see the top of this file). An archive whose digest this replica
// never handed out costs one read of the cache.
func (o *OCI) Verified(p addrs.Provider, sha string, size int64) {
	if size <= 0 || !sha256hex.Valid(sha) {
		return
	}
	var entry ociDigestEntry
	if _, err := o.store.GetMeta(ociDigestKey(p, digest.NewDigestFromEncoded(digest.SHA256, sha)), &entry); err != nil || entry.Platform == "" {
		return
	}
	v, err := addrs.ParseSemver(entry.Version)
	if err != nil {
		return
	}
	o.dropWrong(p, v, sha, size)
}

// dropWrong drops the OCI records of version v of p if they were made
// with a size of the archive sha other than size, its verified one: it
// deletes them from the store, forgets them here and has every other
// side of the engine forget them, counts the version and logs it once.
func (o *OCI) dropWrong(p addrs.Provider, v versions.Version, sha string, size int64) {
	key := ociRecordKey(p, v)
	o.mu.Lock()
	rec, ok := o.readRecord(key)
	made := rec.Sizes[sha]
	if !ok || made == 0 || made == size {
		// Right, or dropped already by another caller.
		o.mu.Unlock()
		return
	}
	err := RemoveVersion(o.store, p, v, nil)
	o.forgetLocked(p, v)
	o.learnedMu.Lock()
	delete(o.learned, learnedKey(p, sha)) // the origin's word on it, which the archive belies
	o.learnedMu.Unlock()
	o.mu.Unlock()
	if err != nil {
		o.metrics.CacheWriteFailed()
		o.cfg.Logger.Log(context.Background(), cache.WriteFailureLevel(err), "dropping the OCI records of a version made with a wrong archive size", "provider", p.String(), "version", v.String(), "sha256", sha, "error", err)
		return
	}
	if o.side != nil {
		o.side.forgetOthers(o, p, v)
	}
	o.metrics.OCIWrongSizeDropped()
	o.cfg.Logger.Warn("the OCI documents of a provider version were made with an archive size its verified archive does not have (as the origin stated it); dropped, made again from the verified size: the digests of the version's index and of that platform's manifest change",
		"provider", p.String(), "version", v.String(), "sha256", sha, "stated_size", made, "verified_size", size)
}

// Generation grows whenever what o made of a version may hold no longer:
// a version's records forgotten (Drops), or an archive committed to the
// cache or removed from it, after which the kept sizes of a version are
// borne out again (an archive verified since, for whatever door, may
// show a size its version's documents were not made with).
func (o *OCI) Generation() uint64 { return o.Drops() + o.store.StatGeneration() }

// Drops counts the versions whose records o forgot (dropped for a wrong
// size, or let go of by the engine): what a caller made of an index
// while it was one number holds no longer once it is another.
func (o *OCI) Drops() uint64 { return o.dropped.Load() }

// WrongSizeError is a platform's manifest asked for by digest that was
// made with the size its origin stated for its archive, which the
// archive, verified, does not have: no client could pull it. Its
// version's documents are dropped (Verified) before it is answered, and
// the next index of the version is made from the verified size, so a
// client that pulls the tag again is handed documents it can pull. It is
// failure.ErrDigestGone (errors.Is): the digest names nothing served,
// for good.
type WrongSizeError struct {
	Provider addrs.Provider
	Version  versions.Version
	Manifest digest.Digest
	// Stated is the archive's size as the manifest states it (as the
	// origin stated it); Verified, the verified archive's.
	Stated, Verified int64
}

func (e *WrongSizeError) Error() string {
	return fmt.Sprintf("manifest %s of %s %s was made with the size its origin stated for its archive, %d bytes, which the archive, verified, does not have (%d bytes): the version's documents are made again from the verified size; pull the tag again (OpenTofu: run tofu init again)",
		e.Manifest, e.Provider, e.Version, e.Stated, e.Verified)
}

func (e *WrongSizeError) Unwrap() error { return failure.ErrDigestGone }

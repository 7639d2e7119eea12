package mirror

// The shared store's bucket kept by the retention rules: one replica at a
// time (the holder of the retention lease) lists the bucket's records and
// archives and deletes the archives the rules remove, as each replica
// does for its own cache.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// SharedPruner is what the bucket's retention needs of the shared tier
// beyond SharedTier. *sharedstore.Store implements it; a tier that does
// not is not pruned.
type SharedPruner interface {
	// ListMeta calls fn with the key of every record under prefix.
	ListMeta(ctx context.Context, prefix string, fn func(key string) error) error
	// ListArchives calls fn with the sha256, size and time of storing of
	// every archive.
	ListArchives(ctx context.Context, fn func(sha string, size int64, stored time.Time) error) error
	// DeleteArchive deletes an archive.
	DeleteArchive(ctx context.Context, sha string) error
}

// sharedPruneEvery is how often the bucket is pruned at most: a pass
// reads every record in it.
const sharedPruneEvery = time.Hour

// sharedPruneTimeout bounds one pass over the bucket.
const sharedPruneTimeout = 30 * time.Minute

// retentionLeaseID names the lease under which one replica prunes the
// bucket (leases are named like archives).
var retentionLeaseID = func() string {
	sum := sha256.Sum256([]byte("tfmirror retention of the shared store"))
	return hex.EncodeToString(sum[:])
}()

// pruneShared applies the rules to the bucket when this replica gets the
// retention lease; it returns what it removed (nil, nil when another
// replica holds the lease or there is no bucket to prune).
func (r *retainer) pruneShared(ctx context.Context) ([]Removal, error) {
	s := r.s
	sp, ok := s.cfg.Shared.(SharedPruner)
	if !ok || s.cfg.Offline || (r.cfg.KeepVersions <= 0 && r.cfg.UnusedAfter <= 0) {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, sharedPruneTimeout)
	defer cancel()
	lease, err := s.cfg.Shared.TryLease(ctx, retentionLeaseID)
	if err != nil || lease == nil {
		return nil, err // another replica prunes it
	}
	held := s.hold(ctx, retentionLeaseID, lease)
	defer held.release(context.WithoutCancel(ctx))

	sizes := map[string]int64{}
	stored := map[string]time.Time{}
	if err := sp.ListArchives(ctx, func(sha string, size int64, at time.Time) error {
		sizes[sha], stored[sha] = size, at
		return nil
	}); err != nil {
		return nil, err
	}
	var hs []*heldVersion
	for _, prefix := range []string{"package/", "module/"} {
		var keys []string
		if err := sp.ListMeta(ctx, prefix, func(key string) error { keys = append(keys, key); return nil }); err != nil {
			return nil, err
		}
		for _, key := range keys {
			raw, _, err := s.cfg.Shared.GetMeta(ctx, key)
			if err != nil {
				return nil, err
			}
			if h := r.sharedHeld(key, raw, sizes, stored); h != nil {
				hs = append(hs, h)
			}
		}
	}
	r.applyPins(hs)
	plan := r.plan(hs, r.byRules(hs))
	var done []Removal
	for _, rm := range plan {
		got := rm
		got.Archives, got.Bytes = []string{}, 0
		for _, sha := range rm.Archives {
			if err := sp.DeleteArchive(ctx, sha); err != nil {
				return done, fmt.Errorf("deleting an archive from the shared store: %w", err)
			}
			got.Archives = append(got.Archives, sha)
			got.Bytes += sizes[sha]
		}
		done = append(done, got)
		s.log.Info("removed the packages of a version from the shared store", "rule", rm.Rule, "kind", rm.Kind,
			"address", rm.Address, "version", rm.Version, "bytes", got.Bytes)
	}
	return done, nil
}

// sharedHeld is the version of a record of the bucket (key as in the
// cache), with the bucket's archives as its cached ones; nil for a record
// that is not one.
func (r *retainer) sharedHeld(key string, raw json.RawMessage, sizes map[string]int64, stored map[string]time.Time) *heldVersion {
	h := r.heldRecord(key, raw)
	if h == nil {
		return nil
	}
	h.cached = map[string]int64{}
	for _, sha := range h.archives {
		if size, ok := sizes[sha]; ok {
			h.cached[sha] = size
			if stored[sha].After(h.newest) {
				h.newest = stored[sha]
			}
		}
	}
	return h
}

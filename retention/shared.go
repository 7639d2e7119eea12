package retention

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
	"log/slog"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror"
	mirrorheld "github.com/tfmirror/tfmirror/v2/mirror/inventory"
)

// sharedPruneEvery is how often the bucket is pruned at most: a pass
// reads every record in it.
const sharedPruneEvery = time.Hour

// sharedPruneTimeout bounds one pass over the bucket.
const sharedPruneTimeout = 30 * time.Minute

// leaseID names the lease under which one replica prunes the bucket
// (leases are named like archives).
var leaseID = func() string {
	sum := sha256.Sum256([]byte("tfmirror retention of the shared store"))
	return hex.EncodeToString(sum[:])
}()

// pruneShared applies the rules to the bucket when this replica gets the
// retention lease; it returns what it removed (nil, nil when another
// replica holds the lease or there is no bucket to prune).
func (r *Retainer) pruneShared(ctx context.Context) ([]Removal, error) {
	sh := r.shared
	if sh == nil || r.offline || (r.cfg.KeepVersions <= 0 && r.cfg.UnusedAfter <= 0) {
		return nil, nil
	}
	// As on the cache (Prune), the rules remove nothing while the pins
	// were never read: what they pin is not known.
	r.pins.first(r.log)
	if err := r.pins.unread(); err != nil {
		return nil, fmt.Errorf("the retention rules remove nothing from the shared store until the pins can be read: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, sharedPruneTimeout)
	defer cancel()
	lease, err := sh.TryLease(ctx, leaseID)
	if err != nil || lease == nil {
		return nil, err // another replica prunes it
	}
	defer keepLease(ctx, r.log, lease)(context.WithoutCancel(ctx))

	// What the pass holds is what the replicas wrote (records that
	// authenticate, the archives they name), never what the bucket lists:
	// a writer of the bucket can list millions of keys there. Each record
	// is read as it is listed. Those that do not authenticate are left
	// out, and not counted as rejected: the pass finds them again every
	// hour (Shared.ListMeta); its log line says how many. One that
	// authenticates and that this release cannot read (a newer release's,
	// after a rollback, or damaged) keeps every archive its text names, as
	// on the cache (inventory.KindUnreadable): it may be the only record
	// of packages that cannot be fetched again.
	var vs []mirrorheld.Record
	named := map[string]bool{}
	unauthenticated := 0
	for _, prefix := range mirrorheld.VersionRecordPrefixes() {
		n, err := sh.ListMeta(ctx, prefix, func(key string, raw json.RawMessage) error {
			v, ok := r.eng.VersionOfRecord(key, raw)
			if !ok {
				v = mirrorheld.Unreadable(key, raw)
			}
			vs = append(vs, v)
			for _, sha := range v.Archives {
				named[sha] = true
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		unauthenticated += n
	}
	if unauthenticated > 0 {
		r.log.Info("records in the shared store that do not authenticate (an earlier release's, a key's no longer given, or written without the key) are left out of its retention pass, and so are the archives only they name",
			"records", unauthenticated)
	}
	sizes := map[string]int64{}
	stored := map[string]time.Time{}
	if err := sh.ListArchives(ctx, func(sha string, size int64, at time.Time) error {
		if named[sha] {
			sizes[sha], stored[sha] = size, at
		}
		return nil
	}); err != nil {
		return nil, err
	}
	hs := make([]*held, 0, len(vs))
	for _, v := range vs {
		hs = append(hs, bucketHeld(v, sizes, stored))
	}
	pins, _ := r.pins.current()
	applyPins(pins, hs)
	var done []Removal
	if r.cfg.Metrics != nil {
		defer func() { countRemovals(done, r.cfg.Metrics.RetentionSharedRemoved) }()
	}
	for _, rm := range plan(hs, r.byRules(hs)) {
		got := rm
		got.Archives, got.Bytes = []string{}, 0
		for _, sha := range rm.Archives {
			if err := sh.DeleteArchive(ctx, sha); err != nil {
				if len(got.Archives) > 0 { // what went is counted
					done = append(done, got)
				}
				return done, fmt.Errorf("deleting an archive from the shared store: %w", err)
			}
			got.Archives = append(got.Archives, sha)
			got.Bytes += sizes[sha]
		}
		done = append(done, got)
		r.log.Info("removed the packages of a version from the shared store", "rule", rm.Rule, "kind", rm.Kind,
			"address", rm.Address, "version", rm.Version, "bytes", got.Bytes)
	}
	return done, nil
}

// bucketHeld is a version of a record of the bucket, with the bucket's
// archives as its cached ones.
func bucketHeld(v mirrorheld.Record, sizes map[string]int64, stored map[string]time.Time) *held {
	h := &held{Record: v, cached: map[string]int64{}}
	for _, sha := range h.Archives {
		if size, ok := sizes[sha]; ok {
			h.cached[sha] = size
			if stored[sha].After(h.newest) {
				h.newest = stored[sha]
			}
		}
	}
	return h
}

// keepLease renews lease until the returned release is called, which
// stops renewing it and gives it up.
func keepLease(ctx context.Context, log *slog.Logger, lease mirror.SharedLease) (release func(context.Context)) {
	kctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := lease.Keep(kctx); err != nil {
			log.Warn("lost the shared store's lease on an archive download; another replica may download it too",
				"sha256", leaseID, "error", err)
		}
	}()
	return func(ctx context.Context) {
		stop()
		<-done
		lease.Release(ctx) // failing, it expires
	}
}

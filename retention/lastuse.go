package retention

// The last use of versions, for the unused rule: recorded in memory on
// every download, written in one batch every FlushInterval to the cache
// and to the shared store, so that every replica counts the downloads of
// all.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
)

// lastUsePrefix keys the last use of a version: lastuse/package/ADDR/V
// or lastuse/module/ADDR/V.
const lastUsePrefix = "lastuse/"

type lastUseDoc struct {
	At time.Time `json:"at"`
}

// sharedUseTimeout bounds the shared store's calls for one batch of last
// uses, or for the candidates of one pass.
const sharedUseTimeout = 30 * time.Second

// useLog are the last uses not written yet, by version key.
type useLog struct {
	mu      sync.Mutex
	pending map[string]time.Time
	// writing are the uses a batch took (take) that it has not written
	// yet (written): a pass reading the last uses meanwhile counts them.
	writing map[string]time.Time
}

// record keeps at as the last use of key unless a later one is kept: a
// clock set back (a wrong time, corrected later) does not make a last
// use earlier. Times compare by the wall clock (Round(0)), as written.
func (u *useLog) record(key string, at time.Time) {
	at = at.Round(0)
	u.mu.Lock()
	if !u.pending[key].After(at) {
		u.pending[key] = at
	}
	u.mu.Unlock()
}

// take returns the uses not written yet, and keeps them as being
// written until written is called with them.
func (u *useLog) take() map[string]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	uses := u.pending
	u.pending = map[string]time.Time{}
	if u.writing == nil {
		u.writing = map[string]time.Time{}
	}
	for k, at := range uses {
		if at.After(u.writing[k]) {
			u.writing[k] = at
		}
	}
	return uses
}

// written forgets the uses take returned, once their batch was written
// (or those that failed put back, retry).
func (u *useLog) written(uses map[string]time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, at := range uses {
		if w, ok := u.writing[k]; ok && !w.After(at) {
			delete(u.writing, k)
		}
	}
}

// retry puts back a use that could not be written, unless a later one
// was recorded since.
func (u *useLog) retry(key string, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.pending[key].After(at) {
		u.pending[key] = at
	}
}

// merge sets in last the uses not written yet that are later: those
// pending, and those of a batch being written.
func (u *useLog) merge(last map[string]time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, m := range []map[string]time.Time{u.pending, u.writing} {
		for k, at := range m {
			if at.After(last[k]) {
				last[k] = at
			}
		}
	}
}

// flush writes the last uses recorded since the previous flush, each
// unless the cache holds a later one (written before the clock was set
// back), as shareUses does in the shared store.
func (r *Retainer) flush() {
	uses := r.uses.take()
	var failed int
	for key, at := range uses {
		var raw json.RawMessage
		_, err := r.store.GetMeta(lastUsePrefix+key, &raw)
		if errors.Is(err, cache.ErrNotFound) {
			err = nil
		} else if stored, ok := readUse(raw); err == nil && ok && stored.After(at) {
			continue
		}
		if err == nil {
			err = r.store.PutMeta(lastUsePrefix+key, lastUseDoc{At: at})
		}
		if err != nil {
			failed++
			r.uses.retry(key, at) // tried again next time
		}
	}
	r.uses.written(uses)
	if failed > 0 {
		r.log.Warn("the last use of versions could not be written; tried again later", "versions", failed)
	}
	r.shareUses(uses)
}

// shareUses writes last uses to the shared store, unless another replica
// wrote a later one, so that the unused rule of every replica counts the
// downloads of all: with the rule off too, as the cache's are written,
// for the replicas that have it (a configuration rolled out one replica
// at a time, the rule left to some). A failing store is logged; each
// replica's own record still counts for it.
func (r *Retainer) shareUses(uses map[string]time.Time) {
	if r.shared == nil || len(uses) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedUseTimeout)
	defer cancel()
	for key, at := range uses {
		if theirs, ok, _, _ := r.sharedUse(ctx, key); ok && !theirs.Before(at) {
			continue
		}
		if err := r.shared.PutMeta(ctx, lastUsePrefix+key, lastUseDoc{At: at}); err != nil {
			r.log.Warn("writing the last use of versions to the shared store; other replicas may not count them", "error", err)
			return
		}
	}
}

// errUseUnread is sharedUse's answer for a last use the shared store
// holds that does not read (damaged, or a newer release's): when the
// version was last used is not known.
var errUseUnread = errors.New("the last use of a version in the shared store does not read")

// readUse reads a written last use; false when it does not read (damaged,
// or of a schema a newer release wrote, without a time this one reads).
func readUse(raw json.RawMessage) (time.Time, bool) {
	var doc lastUseDoc
	if json.Unmarshal(raw, &doc) != nil || doc.At.IsZero() {
		return time.Time{}, false
	}
	return doc.At, true
}

// sharedUse returns the last use of key that the shared store holds;
// err when the store did not answer, or errUseUnread when what it holds
// does not read (whether it holds one, or when, is not known). When it
// holds one that does not authenticate (a replica's of release 2.0.0,
// whose MAC format this release rejects, or a writer's without the key),
// ok is false and rejected is when the store wrote it (zero: not known).
func (r *Retainer) sharedUse(ctx context.Context, key string) (at time.Time, ok bool, rejected time.Time, err error) {
	raw, stored, err := r.shared.GetMeta(ctx, lastUsePrefix+key)
	if err != nil || raw == nil {
		return time.Time{}, false, stored, err // stored: a rejected one's writing
	}
	at, ok = readUse(raw)
	if !ok {
		return time.Time{}, false, time.Time{}, errUseUnread
	}
	return at, true, time.Time{}, nil
}

// storeClockSkew is how far the shared store's clock may be ahead of a
// replica's: an S3 store refuses a request signed further off its clock.
// A last use that does not authenticate, written by the store later than
// that after now, is counted as none (rejectedUseCounts).
const storeClockSkew = 15 * time.Minute

// rejectedUseCounts reports whether a last use in the shared store that
// does not authenticate, written by the store at written, keeps its
// version from the unused rule of age d at now: it counts as a download
// when the store wrote it, the one time of it known (and one the writer
// cannot choose: the store sets it). So a replica of the earlier release
// downloading a version during a rolling upgrade keeps it as its own
// download would, and a writer of the bucket without the key keeps a
// version only by writing its last use again within every d, as a client
// downloading it would; a time of writing not known, or ahead of now by
// more than the store's clock can be (storeClockSkew), keeps nothing.
func rejectedUseCounts(written, now time.Time, d time.Duration) bool {
	return !written.IsZero() && !written.After(now.Add(storeClockSkew)) && now.Sub(written) < d
}

// lastUses returns the last use of every version that has one: written
// ones, and those not written yet; and the versions whose written last
// use does not read (not known: not one of no use); an error when the
// written ones could not be read whole.
func (r *Retainer) lastUses() (last map[string]time.Time, unread map[string]bool, err error) {
	last, unread = map[string]time.Time{}, map[string]bool{}
	err = r.store.ScanMeta(lastUsePrefix, func(key string, _ time.Time, raw json.RawMessage) error {
		key = strings.TrimPrefix(key, lastUsePrefix)
		if at, ok := readUse(raw); ok {
			last[key] = at
		} else {
			unread[key] = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	r.uses.merge(last)
	return last, unread, nil
}

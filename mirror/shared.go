package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
)

// SharedTier is a store that replicas share behind their own caches
// (Config.Shared; package sharedstore implements it over S3). The engine
// takes from it what its cache lacks before it asks the origin, and puts
// in it what it verified and committed. An implementation must hand out
// only what a replica of the operator's wrote under that name (package
// sharedstore authenticates every object under the operator's key): the
// engine takes a package record's evidence from it on that ground, not on
// the signing keys inside the record. A SharedTier that fails is gone
// around: its errors never fail a call the engine could answer without
// it. Every method must be bounded in time by the implementation (bodies
// read from OpenArchive by ctx only).
type SharedTier interface {
	// OpenArchive opens the archive sha and returns its size (-1 if
	// unknown); a nil body when the store does not have it.
	OpenArchive(ctx context.Context, sha string) (io.ReadCloser, int64, error)
	// PutArchive stores the archive sha of size bytes read from r, which
	// the engine has verified; nothing is visible in the store unless all
	// of it was stored.
	PutArchive(ctx context.Context, sha string, r io.ReadSeeker, size int64) error
	// TryLease takes the lease on the origin download of archive sha; a
	// nil lease when another replica holds it.
	TryLease(ctx context.Context, sha string) (SharedLease, error)
	// GetMeta returns the record under key and when it was stored; a nil
	// record when the store has none.
	GetMeta(ctx context.Context, key string) (json.RawMessage, time.Time, error)
	// PutMeta stores record (JSON-encoded) under key.
	PutMeta(ctx context.Context, key string, record any) error
}

// SharedLease is a lease on an archive's origin download.
type SharedLease interface {
	// Keep renews the lease until ctx is done; it returns early with an
	// error when the lease is lost.
	Keep(ctx context.Context) error
	// Release gives the lease up.
	Release(ctx context.Context) error
}

// sharedRecords is the engine's use of the shared tier (Config.Shared)
// for records and leases: what it takes from the tier on a cache miss,
// what it puts there, and what it remembers the tier holds. Every method
// but hold is a no-op without a shared tier.
type sharedRecords struct {
	e       *Engine // detached work, the fetcher's trust in the tier
	cfg     *Config // the engine's, defaults filled in
	store   Store
	memo    *stored.Records
	log     *slog.Logger
	metrics Metrics
	// seen remembers what the shared tier holds, for a sealed mirror's
	// version lists (see sharedInstallable).
	seen sharedAnswers
}

// How often a replica looks for an archive that another replica is
// downloading: from sharedPollMin, doubling up to sharedPollMax, for as long
// as the lease is held (bounded by Config.ArchiveTimeout).
const (
	sharedPollMin = 50 * time.Millisecond
	sharedPollMax = 2 * time.Second
)

// heldLease is a lease this engine holds during an origin download, kept
// alive by a goroutine that release stops.
type heldLease struct {
	lease SharedLease
	stop  context.CancelFunc
	done  chan struct{}
}

func (s *sharedRecords) hold(ctx context.Context, sha string, lease SharedLease) *heldLease {
	kctx, stop := context.WithCancel(ctx)
	h := &heldLease{lease: lease, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		if err := lease.Keep(kctx); err != nil {
			s.log.Warn("lost the shared store's lease on an archive download; another replica may download it too",
				"sha256", sha, "error", err)
		}
	}()
	return h
}

// release stops renewing the lease and gives it up.
func (h *heldLease) release(ctx context.Context) {
	h.stop()
	<-h.done
	h.lease.Release(ctx) // failing, it expires
}

// openSource opens the archive's bytes for the fetch f: without a shared
// tier from the origin; with one, from the shared tier when it has the
// archive, else from the origin under the tier's lease, so that of all
// replicas one downloads it while the others wait for it to appear in the
// shared tier (taking over if the lease expires). A shared tier that fails
// is gone around to the origin, and so is its copy of an archive that
// failed verification before.
func (fr *fetcher) openSource(ctx context.Context, f *fetch, p addrs.Provider, a records.ArchiveRecord) (io.ReadCloser, int64, error) {
	s := fr.s
	sh := s.cfg.Shared
	if sh == nil || !fr.trustsShared(a.SHA256) {
		f.originDone = s.metrics.ArchiveFetchStarted()
		return s.origin.OpenArchive(ctx, p, a.URL)
	}
	wait := sharedPollMin
	for {
		body, size, err := sh.OpenArchive(ctx, a.SHA256)
		if err != nil {
			s.log.Warn("shared store failed; fetching the archive from the origin", "file", a.Filename, "error", err)
			break
		}
		if body != nil {
			f.fromShared = true
			return body, size, nil
		}
		if s.cfg.Offline {
			break // the offline origin (mirror/originguard) says why
		}
		lease, err := sh.TryLease(ctx, a.SHA256)
		if err != nil {
			s.log.Warn("shared store failed; fetching the archive from the origin", "file", a.Filename, "error", err)
			break
		}
		if lease != nil {
			// The holder before us may have stored it and let go just now.
			if body, size, err := sh.OpenArchive(ctx, a.SHA256); err == nil && body != nil {
				lease.Release(context.WithoutCancel(ctx))
				f.fromShared = true
				return body, size, nil
			}
			f.lease = s.shared.hold(ctx, a.SHA256, lease)
			break
		}
		if fr.onWait != nil {
			fr.onWait()
		}
		// Another replica is downloading it.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, fmt.Errorf("waiting for another replica's download of %s: %w", a.Filename, context.Cause(ctx))
		case <-t.C:
		}
		wait = min(2*wait, sharedPollMax)
	}
	f.originDone = s.metrics.ArchiveFetchStarted()
	return s.origin.OpenArchive(ctx, p, a.URL)
}

// share puts the archive of f, once committed to the cache, in the shared
// tier (unless it came from there), then gives up f's lease.
func (fr *fetcher) share(ctx context.Context, f *fetch, a records.ArchiveRecord) {
	s := fr.s
	if f.lease != nil {
		// After the upload: a waiting replica that sees the lease gone
		// must find the archive.
		defer f.lease.release(context.WithoutCancel(ctx))
	}
	if s.cfg.Shared == nil || f.fromShared {
		return
	}
	blob, err := s.store.OpenBlob(a.SHA256)
	if err != nil {
		return // not committed (logged), or evicted already
	}
	defer blob.Close()
	if err := s.cfg.Shared.PutArchive(ctx, a.SHA256, blob, blob.Size()); err != nil {
		s.log.Warn("archive not stored in the shared store", "file", a.Filename, "error", err)
	}
}

// putShared puts a record just stored in the cache in the shared tier, in
// the background (an engine task, which Shutdown waits for), so that a
// slow tier does not slow the callers waiting for the record. record must
// not be modified afterwards (records handed out never are).
func (s *sharedRecords) putShared(key string, record any) {
	if s.cfg.Shared == nil {
		return
	}
	ctx, done, err := s.e.life.Detached(s.cfg.OriginTimeout)
	if err != nil {
		return // shutting down
	}
	go func() {
		defer done()
		if err := s.cfg.Shared.PutMeta(ctx, key, record); err != nil {
			s.log.Warn("record not stored in the shared store", "key", key, "error", err)
		}
	}()
}

// sharedVersions returns the version list under key from the shared tier,
// with when it was stored there, and remembers it (not in the cache, so
// that its age stays the shared copy's). Remembering it changes what the
// engine answers from, as a write to the cache would: the generation
// advances, so that no Stamp taken before holds on (see Engine.Reuse).
func (s *sharedRecords) sharedVersions(ctx context.Context, key string) (*records.VersionList, time.Time, bool) {
	if s.cfg.Shared == nil {
		return nil, time.Time{}, false
	}
	_, _, gen, _ := s.memo.Get(key)
	var list records.VersionList
	storedAt, ok := s.getShared(ctx, key, &list)
	if !ok || !records.KnownSchema(list.Schema) {
		return nil, time.Time{}, false
	}
	s.memo.Adopt(key, gen, &list, storedAt)
	return &list, storedAt, true
}

// sharedPackage copies the package record of v from the shared tier to the
// cache, if the shared tier has one (which the tier authenticated as a
// replica's, see SharedTier) with evidence that still verifies (see
// checkEvidence): a copy that does not is left where it is, so that the
// version is fetched and verified anew, as when the cached record fails,
// and its record then replaces the shared tier's.
func (s *sharedRecords) sharedPackage(ctx context.Context, p addrs.Provider, v versions.Version) (*records.PackageRecord, bool) {
	if s.cfg.Shared == nil {
		return nil, false
	}
	key := records.PackageKey(p, v)
	var rec records.PackageRecord
	if _, ok := s.getShared(ctx, key, &rec); !ok || !records.KnownSchema(rec.Schema) || !rec.HasEvidence() {
		return nil, false
	}
	if err := rec.VerifyEvidence(p.Type, v); err != nil {
		reason := records.ReasonOf(err)
		s.metrics.VerificationFailed(reason)
		s.log.Error("the shared store's package record failed verification; fetching the version from the origin",
			"provider", p.String(), "version", v.String(), "reason", reason, "error", err)
		return nil, false
	}
	rec.MarkEvidenceChecked()
	// A withheld import set aside in it is another replica's, which an
	// earlier release shared: imported records stay local.
	rec.Withheld = nil
	err := s.store.PutMeta(key, &rec)
	s.memo.Forget(key)
	if err != nil {
		s.metrics.CacheWriteFailed()
		s.log.Error("storing package metadata", "provider", p.String(), "version", v.String(), "error", err)
	}
	return &rec, true
}

// sharedInstallable reports whether a sealed mirror can serve version v of
// p from the shared tier: the version's package record (rec, the cached
// one, if any; else the shared tier's, copied into the cache) has an
// archive of a served platform that the shared tier holds and that this
// engine trusts it for. What the shared tier answered is remembered for
// sharedSeenTTL (see sharedAnswers), so that a warm version list asks it
// nothing.
func (s *sharedRecords) sharedInstallable(ctx context.Context, p addrs.Provider, v versions.Version, rec *records.PackageRecord) bool {
	if s.cfg.Shared == nil {
		return false
	}
	now := s.cfg.Now()
	if rec == nil {
		key := "package/" + records.PackageKey(p, v)
		if has, ok := s.seen.get(key, now); ok && !has {
			return false
		}
		var ok bool
		if rec, ok = s.sharedPackage(ctx, p, v); !ok {
			s.seen.put(key, false, now)
			return false
		}
	}
	for _, pl := range sortedKeys(rec.Archives) {
		a := rec.Archives[pl]
		if !s.e.wanted(pl) || !s.e.archives.trustsShared(a.SHA256) {
			continue
		}
		key := "archive/" + a.SHA256
		if has, ok := s.seen.get(key, now); ok {
			if has {
				return true
			}
			continue
		}
		body, _, err := s.cfg.Shared.OpenArchive(ctx, a.SHA256)
		if err != nil {
			return false // a failing tier is gone around: not listed
		}
		s.seen.put(key, body != nil, now)
		if body != nil {
			body.Close()
			return true
		}
	}
	return false
}

// sharedSeenTTL is how long a sealed mirror takes the shared tier's word
// that it holds, or lacks, a package record or an archive.
const sharedSeenTTL = time.Minute

// sharedSeenMax bounds the answers remembered: beyond it they are all
// forgotten, and asked again.
const sharedSeenMax = 16384

// sharedAnswers remembers, by key ("package/..." or "archive/SHA256"),
// whether the shared tier held the thing, and when it said so. A sealed
// mirror lists the versions whose archives are in its cache or the shared
// tier's; without it, every version list asked the shared tier about
// every version not cached, however warm. A version another replica
// stores meanwhile is listed within sharedSeenTTL of its arrival (once
// the version list is asked for again). Errors are not remembered.
type sharedAnswers struct {
	mu sync.Mutex
	m  map[string]sharedAnswer
}

type sharedAnswer struct {
	has bool
	at  time.Time
}

// get returns what the shared tier said of key, if it said so within
// sharedSeenTTL of now.
func (a *sharedAnswers) get(key string, now time.Time) (has, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, found := a.m[key]
	if !found {
		return false, false
	}
	if age := now.Sub(e.at); age < 0 || age >= sharedSeenTTL {
		delete(a.m, key)
		return false, false
	}
	return e.has, true
}

// put remembers what the shared tier said of key at now.
func (a *sharedAnswers) put(key string, has bool, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil || len(a.m) >= sharedSeenMax {
		a.m = make(map[string]sharedAnswer)
	}
	a.m[key] = sharedAnswer{has: has, at: now}
}

func (s *sharedRecords) getShared(ctx context.Context, key string, v any) (time.Time, bool) {
	raw, storedAt, err := s.cfg.Shared.GetMeta(ctx, key)
	if err != nil {
		if !errors.Is(err, context.Canceled) || ctx.Err() == nil {
			s.log.Warn("shared store failed; going on without it", "key", key, "error", err)
		}
		return time.Time{}, false
	}
	if raw == nil {
		return time.Time{}, false
	}
	if err := json.Unmarshal(raw, v); err != nil {
		s.log.Warn("record in the shared store is not readable; ignored", "key", key, "error", err)
		return time.Time{}, false
	}
	return storedAt, true
}

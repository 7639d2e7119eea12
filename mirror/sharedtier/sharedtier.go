// Package sharedtier is the tier that replicas share behind their own
// caches (mirror.Config.Shared; package sharedstore implements it over
// S3), as a decorator of the engine's stored records
// (mirror/stored.Source, over mirror/stored.Records): a read takes what
// the cache lacks from the tier before the origin is asked, in one line
// of calls, and a write goes to the cache and the tier. The engine
// composes it over its records when a tier is configured; its parts take
// the result as a mirror/stored.Source (and the few interfaces of their
// own for archives and module packages) and never name the tier.
//
// It is the one place that speaks to the tier. What it reads, the tier
// authenticated as a replica's (see Tier); a package record's evidence is
// checked again before it is copied into the cache; an archive whose copy
// in the tier failed verification is distrusted from then on. A tier that
// fails is gone around: its errors never fail a call that could be
// answered without it. Without a tier (nil) it is the records it
// decorates.
package sharedtier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// Tier is a store that replicas share behind their own caches. The engine
// takes from it what its cache lacks before it asks the origin, and puts
// in it what it verified and committed. An implementation must hand out
// only what a replica of the operator's wrote under that name (package
// sharedstore authenticates every object under the operator's key): the
// engine takes a package record's evidence from it on that ground, not on
// the signing keys inside the record. A Tier that fails is gone around:
// its errors never fail a call the engine could answer without it. Every
// method must be bounded in time by the implementation (bodies read from
// OpenArchive by ctx as a whole, each read by the implementation: a body
// that goes silent must fail, not wait for ctx, so that the fetch takes
// the rest from the origin).
type Tier interface {
	// OpenArchive opens the archive sha and returns its size (-1 if
	// unknown); a nil body when the store does not have it.
	OpenArchive(ctx context.Context, sha string) (io.ReadCloser, int64, error)
	// PutArchive stores the archive sha of size bytes read from r, which
	// the engine has verified; nothing is visible in the store unless all
	// of it was stored.
	PutArchive(ctx context.Context, sha string, r io.ReadSeeker, size int64) error
	// TryLease takes the lease on the origin download of archive sha; a
	// nil lease when another replica holds it.
	TryLease(ctx context.Context, sha string) (Lease, error)
	// GetMeta returns the record under key and when it was stored; a nil
	// record when the store has none.
	GetMeta(ctx context.Context, key string) (json.RawMessage, time.Time, error)
	// PutMeta stores record (JSON-encoded) under key.
	PutMeta(ctx context.Context, key string, record any) error
}

// Lease is a lease on an archive's origin download.
type Lease interface {
	// Keep renews the lease until ctx is done; it returns early with an
	// error when the lease is lost.
	Keep(ctx context.Context) error
	// Release gives the lease up.
	Release(ctx context.Context) error
}

// How often a replica looks for an archive that another replica is
// downloading: from PollMin, doubling up to PollMax, for as long as the
// lease is held, at most Config.HolderWait (and the download's timeout).
const (
	PollMin = 50 * time.Millisecond
	PollMax = 2 * time.Second
)

// DefaultHolderWait is how long a fetch waits by default for another
// replica that holds the tier's lease on it; then it fetches for itself,
// as without a tier. A lease vouches for nothing, it only saves
// downloads: a replica stuck while renewing its lease, or a lease object
// that a writer of the bucket keeps putting back, holds no download back
// longer than this.
const DefaultHolderWait = 2 * time.Minute

// Config configures Shared: the engine's settings it uses.
type Config struct {
	// Offline seals the mirror: what the tier holds is served, nothing is
	// downloaded under its lease.
	Offline bool
	// Timeout bounds one record written to the tier in the background.
	Timeout time.Duration
	// Platforms are the platforms served (os_arch, canonical); nil: all.
	Platforms []string
	// Now is the clock. Required.
	Now func() time.Time
	// HolderWait bounds how long a fetch waits for another replica
	// holding the tier's lease on it. Default DefaultHolderWait.
	HolderWait time.Duration
}

// Metrics receives what Shared observes.
type Metrics interface {
	// VerificationFailed records a record refused for reason (a verify.Reason).
	VerificationFailed(reason string)
	// CacheWriteFailed records data that could not be stored.
	CacheWriteFailed()
}

// Store is what Shared uses of the cache. *cache.Store implements it.
type Store interface {
	PutMeta(key string, v any) error
	OpenBlob(sha string) (cache.BlobReader, error)
	NewBlobWriter(expectedSHA string) (cache.BlobWriter, error)
}

// Shared is the engine's use of the shared tier. Its methods are safe for
// concurrent use.
type Shared struct {
	tier    Tier // nil: none
	cfg     Config
	life    *lifetime.Lifetime // the background writes, which a shutdown waits for
	recs    *stored.Records    // the memo a record copied from the tier is remembered in
	store   Store
	log     *slog.Logger
	metrics Metrics
	// seen remembers what the tier holds, for a sealed mirror's version
	// lists (see Installable), with SeenTTL; so does taken, of the lists.
	seen   answers
	taken  takenLists // the version lists a sealed mirror took (sealedVersions)
	lacked takenLists // the keys it found none under, apart: many asked for do not forget the lists taken

	writes chan struct{} // one for each record write under way (Share), maxRecordWrites at most

	mu         sync.Mutex
	distrusted map[string]bool // archives whose copy in the tier failed verification
}

// New returns the engine's use of tier (nil: none).
func New(cfg Config, tier Tier, life *lifetime.Lifetime, recs *stored.Records, store Store, log *slog.Logger, metrics Metrics) (*Shared, error) {
	if life == nil || recs == nil || store == nil || log == nil || metrics == nil || cfg.Now == nil || cfg.Timeout <= 0 {
		return nil, errors.New("sharedtier: the lifetime, the stored records, a store, a logger, metrics, a clock and a timeout are required")
	}
	if cfg.HolderWait <= 0 {
		cfg.HolderWait = DefaultHolderWait
	}
	return &Shared{tier: tier, cfg: cfg, life: life, recs: recs, store: store, log: log, metrics: metrics,
		writes: make(chan struct{}, maxRecordWrites)}, nil
}

// On reports whether there is a shared tier.
func (s *Shared) On() bool { return s.tier != nil }

var _ stored.Source = (*Shared)(nil)

// Get reads the record under key into v: the cache's, else the tier's
// (records.Shared: not stored in the cache). When neither has it, it
// returns the cache's error, wrapping stored.ErrUnanswered too when the
// tier failed rather than said it has none.
func (s *Shared) Get(ctx context.Context, key string, v any) (time.Time, records.Source, error) {
	at, src, err := s.recs.Get(ctx, key, v)
	if err == nil {
		return at, src, nil
	}
	sat, ok, terr := s.read(ctx, key, v)
	if ok {
		return sat, records.Shared, nil
	}
	if terr != nil {
		return at, src, fmt.Errorf("%w (%w: %w)", err, stored.ErrUnanswered, terr)
	}
	return at, src, err
}

// Newest reads the record under key from the cache and the tier, and
// returns the one listed last.
func (s *Shared) Newest(ctx context.Context, key string, into records.Listing) (records.Listing, time.Time, bool) {
	v, at, ok := s.recs.Newest(ctx, key, into)
	theirs := into.Empty()
	sat, found := s.peek(ctx, key, theirs)
	if !found {
		return v, at, ok
	}
	lat, readable := theirs.Listed()
	if !readable {
		return v, at, ok
	}
	if !lat.IsZero() {
		sat = lat
	}
	if !ok || sat.After(at) {
		return theirs, sat, true
	}
	return v, at, ok
}

// Put stores record under key in the cache (returning its error) and
// puts it in the tier (see Share).
func (s *Shared) Put(key string, record any) error {
	err := s.recs.Put(key, record)
	s.Share(key, record)
	return err
}

// peek reads the record under key from the tier into v, and returns when
// it was stored there: false when there is no tier, it has no record
// there, or it fails (logged).
func (s *Shared) peek(ctx context.Context, key string, v any) (time.Time, bool) {
	at, ok, _ := s.read(ctx, key, v)
	return at, ok
}

// read is peek that tells a tier that failed (its error, logged) from one
// that has no record under key (nil); a record there that is not
// readable is none.
func (s *Shared) read(ctx context.Context, key string, v any) (time.Time, bool, error) {
	if s.tier == nil {
		return time.Time{}, false, nil
	}
	raw, storedAt, err := s.tier.GetMeta(ctx, key)
	if err != nil {
		if !errors.Is(err, context.Canceled) || ctx.Err() == nil {
			s.failed(ctx, err, "shared store failed; going on without it", "key", key)
		}
		return time.Time{}, false, err
	}
	if raw == nil {
		return time.Time{}, false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		s.log.Warn("record in the shared store is not readable; ignored", "key", key, "error", err)
		return time.Time{}, false, nil
	}
	return storedAt, true, nil
}

// Beyond reports whether there is a tier beyond the cache to read.
func (s *Shared) Beyond() bool { return s.tier != nil }

// Share puts a record just stored in the cache in the tier, in the
// background (work of the engine's lifetime, which a shutdown waits for),
// so that a slow tier does not slow the callers waiting for the record.
// record must not be modified afterwards (records handed out never are).
func (s *Shared) Share(key string, record any) {
	if s.tier == nil {
		return
	}
	// A package record goes to the tier without the withheld import set
	// aside in it: imports stay local.
	if rec, ok := record.(*records.PackageRecord); ok && rec.Withheld != nil {
		rec = rec.Clone()
		rec.Withheld = nil
		record = rec
	}
	ctx, done, err := s.life.Detached(s.cfg.Timeout)
	if err != nil {
		return // shutting down
	}
	workgroup.Go(s.log, func() {
		defer done()
		select {
		case s.writes <- struct{}{}:
			defer func() { <-s.writes }()
		case <-ctx.Done():
			s.log.Warn("record not stored in the shared store", "key", key, "error", fmt.Errorf("waiting for one of the %d record writes: %w", maxRecordWrites, ctx.Err()))
			return
		}
		if err := s.tier.PutMeta(ctx, key, record); err != nil {
			s.failed(ctx, err, "record not stored in the shared store", "key", key)
		}
	}, "key", key)
}

// maxRecordWrites bounds the records written to the tier at once (Share):
// a listing may date many versions, and the records of an earlier
// release's bucket are written back as they are re-derived, hundreds at
// a time, which go to the store this many at a time.
const maxRecordWrites = 16

// TryLease takes the tier's lease id and keeps it renewed until release is
// called: a nil release when another replica holds it (or there is no
// tier).
func (s *Shared) TryLease(ctx context.Context, id string) (release func(context.Context), err error) {
	if s.tier == nil {
		return nil, nil
	}
	lease, err := s.tier.TryLease(ctx, id)
	if err != nil || lease == nil {
		return nil, err
	}
	return s.hold(ctx, id, lease), nil
}

// hold keeps lease alive, in a goroutine that the returned release stops
// before it gives the lease up.
func (s *Shared) hold(ctx context.Context, sha string, lease Lease) (release func(context.Context)) {
	kctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	workgroup.Go(s.log, func() {
		defer close(done)
		if err := lease.Keep(kctx); err != nil {
			s.log.Warn("lost the shared store's lease on an archive download; another replica may download it too",
				"sha256", sha, "error", err)
		}
	}, "lease", sha)
	return func(ctx context.Context) {
		stop()
		<-done
		lease.Release(ctx) // failing, it expires
	}
}

// Trusts reports whether the tier's copy of blob sha has not been found
// wrong; Distrust says it was: this replica takes it from the origin from
// then on.
func (s *Shared) Trusts(sha string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.distrusted[sha]
}

// Distrust says the tier's copy of blob sha failed verification.
func (s *Shared) Distrust(sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.distrusted == nil {
		s.distrusted = make(map[string]bool)
	}
	s.distrusted[sha] = true
}

// Archive finds the archive sha (named name in logs) in the tier for a
// download of provider owner's: its body and size when the tier has it;
// else a nil body and, when this replica took the tier's lease on
// downloading it from the origin for owner (LeaseID), release, to be
// called once the archive is in the tier (see ShareArchive). While
// another replica holds that lease, it waits for the
// archive to appear (polling from PollMin to PollMax, calling onWait, a
// test hook, if not nil, each time) until ctx ends, taking over if the
// lease expires; after Config.HolderWait it stops waiting and returns
// nothing found and no release: the caller downloads it without the
// lease. A tier that fails is gone around (nothing found), and so
// is one without the archive when the mirror is sealed, or whose copy was
// distrusted.
func (s *Shared) Archive(ctx context.Context, sha, owner, name string, onWait func()) (body io.ReadCloser, size int64, release func(context.Context), err error) {
	if s.tier == nil || !s.Trusts(sha) {
		return nil, 0, nil, nil
	}
	leaseID := LeaseID(sha, owner)
	wait := s.waitForHolder()
	defer wait.stop()
	for {
		body, size, err := s.tier.OpenArchive(ctx, sha)
		if err != nil {
			s.failed(ctx, err, "shared store failed; fetching the archive from the origin", "file", name)
			return nil, 0, nil, nil
		}
		if body != nil {
			return body, size, nil, nil
		}
		if s.cfg.Offline {
			return nil, 0, nil, nil // the offline origin (mirror/originguard) says why
		}
		lease, err := s.tier.TryLease(ctx, leaseID)
		if err != nil {
			s.failed(ctx, err, "shared store failed; fetching the archive from the origin", "file", name)
			return nil, 0, nil, nil
		}
		if lease != nil {
			// The holder before us may have stored it and let go just now.
			if body, size, err := s.tier.OpenArchive(ctx, sha); err == nil && body != nil {
				lease.Release(context.WithoutCancel(ctx))
				return body, size, nil, nil
			}
			return nil, 0, s.hold(ctx, sha, lease), nil
		}
		if onWait != nil {
			onWait()
		}
		// Another replica is downloading it.
		more, err := wait.next(ctx)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("waiting for another replica's download of %s: %w", name, err)
		}
		if !more {
			s.log.Warn("another replica has held the shared store's lease on an archive download too long; downloading it here",
				"file", name, "sha256", sha, "waited", time.Since(wait.start).Round(time.Millisecond))
			return nil, 0, nil, nil
		}
	}
}

// LeaseID is the tier's lease on downloading the archive sha from the
// origin of provider owner: its own for each provider, as a download
// under way is found by sha256 and provider (mirror/fetch): anyone can
// publish a provider whose signed SHA256SUMS names another provider's
// sha256 with a download URL of its own, and a replica downloading that
// one, stalled, must not hold the others' downloads of the real one for
// Config.HolderWait. What a download stores is found by sha256 alone
// (the bytes, checked). With no owner, the sha256 itself.
func LeaseID(sha, owner string) string {
	if owner == "" {
		return sha
	}
	h := sha256.Sum256([]byte(sha + "\x00" + owner))
	return hex.EncodeToString(h[:])
}

// holderWait is a fetch's wait for another replica that holds the tier's
// lease on it: looks from PollMin apart, doubling up to PollMax, for
// Config.HolderWait at most (by this replica's clock: no object of the
// tier's decides it).
type holderWait struct {
	poll   time.Duration
	start  time.Time
	giveUp *time.Timer
}

func (s *Shared) waitForHolder() *holderWait {
	return &holderWait{poll: PollMin, start: time.Now(), giveUp: time.NewTimer(s.cfg.HolderWait)}
}

// next waits until the next look: false when the bound has passed, an
// error when ctx ended first.
func (w *holderWait) next(ctx context.Context) (bool, error) {
	t := time.NewTimer(w.poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, context.Cause(ctx)
	case <-w.giveUp.C:
		return false, nil
	case <-t.C:
	}
	w.poll = min(2*w.poll, PollMax)
	return true, nil
}

func (w *holderWait) stop() { w.giveUp.Stop() }

// ShareArchive puts the archive sha (named name in logs), committed to the
// cache, in the tier. A no-op without a tier, or when the cache no longer
// has it.
func (s *Shared) ShareArchive(ctx context.Context, sha, name string) {
	if s.tier == nil {
		return
	}
	blob, err := s.store.OpenBlob(sha)
	if err != nil {
		return // not committed (logged), or evicted already
	}
	defer blob.Close()
	if err := s.tier.PutArchive(ctx, sha, blob, blob.Size()); err != nil {
		s.failed(ctx, err, "archive not stored in the shared store", "file", name)
	}
}

// served reports whether platform pl is served.
func (s *Shared) served(pl string) bool {
	return s.cfg.Platforms == nil || slices.Contains(s.cfg.Platforms, pl)
}

// SeenTTL is how long a sealed mirror takes the tier's word that it
// holds, or lacks, a package record or an archive, and the version list
// it took (sealedVersions); the engine's answers made from them are
// reused as long (mirror.Stamp).
const SeenTTL = time.Minute

// seenMax bounds the answers remembered: beyond it they are all
// forgotten, and asked again.
const seenMax = 16384

// answers remembers, by key ("package/..." or "archive/SHA256"), whether
// the tier held the thing, and when it said so. A sealed mirror lists the
// versions whose archives are in its cache or the tier's; without it,
// every version list asked the tier about every version not cached,
// however warm. A version another replica stores meanwhile is listed
// within SeenTTL of its arrival (once the version list is asked for
// again). Errors are not remembered.
type answers struct {
	mu sync.Mutex
	m  map[string]answer
}

type answer struct {
	has bool
	at  time.Time
}

// get returns what the tier said of key, if it said so within SeenTTL of
// now.
func (a *answers) get(key string, now time.Time) (has, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, found := a.m[key]
	if !found {
		return false, false
	}
	if age := now.Sub(e.at); age < 0 || age >= SeenTTL {
		delete(a.m, key)
		return false, false
	}
	return e.has, true
}

// put remembers what the tier said of key at now.
func (a *answers) put(key string, has bool, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil || len(a.m) >= seenMax {
		a.m = make(map[string]answer)
	}
	a.m[key] = answer{has: has, at: now}
}

// failed logs a call to the shared store that failed with err, the
// replica going on without it: at WARN, but at debug level while the
// store's circuit breaker is open (sharedstore.ErrUnavailable), which the
// store logs once as it opens and the metrics and /readyz show, so that
// an outage of the bucket is not a WARN line per request.
func (s *Shared) failed(ctx context.Context, err error, msg string, args ...any) {
	level := slog.LevelWarn
	if errors.Is(err, sharedstore.ErrUnavailable) {
		level = slog.LevelDebug
	}
	s.log.Log(ctx, level, msg, append(args, "error", err)...)
}

// Package stored is the engine's stored records as it reads them: provider
// version lists and package records decoded from the cache, kept in a
// bounded memo so that warm index.json and VERSION.json requests do not
// read and decode them from Badger every time (which was most of their
// cost), and the h1: hashes of cached archives.
//
// The engine is the only writer of these records, and it calls Forget
// after every write; a record read from the store while a write was under
// way is not remembered, so the memo never holds a value older than the
// store's. Values are shared between callers and must not be modified.
//
// The engine's parts read and write records through Source, in one line
// of calls: Records itself, or the tier shared with other replicas that
// the engine composes over it (a decorator that takes from the tier what
// the cache lacks and writes through to both). A part never asks the
// tier beside the records.
package stored

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/memo"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// MaxEntries bounds the decoded records kept in memory: with more than
// this, the least recently used is dropped for every one added. A package
// record with its rendered VERSION.json takes a few KiB (up to some tens
// with the origin's SHA256SUMS, signature and keys), a long version list
// with its index.json tens of KiB, so a busy mirror holds at most some
// tens of MiB here; most hold far less, as few providers are in use at a
// time.
const MaxEntries = 4096

// Store is what Records reads and writes of the cache. *cache.Store
// implements it.
type Store interface {
	GetMeta(key string, v any) (time.Time, error)
	PutMeta(key string, v any) error
	StatBlob(sha string) (cache.BlobInfo, error)
}

// Records reads the engine's stored records through its memo. Its methods
// are safe for concurrent use.
type Records struct {
	store Store
	log   *slog.Logger
	m     *memo.Memo[string, entry]
}

type entry struct {
	storedAt time.Time
	val      any
}

// New returns the records of store; log receives read errors.
func New(store Store, log *slog.Logger) *Records {
	return &Records{store: store, log: log, m: memo.New[string, entry](MaxEntries)}
}

// CachedPackage returns the stored package record of version v of p, if
// any, from memory when it was read before.
func (r *Records) CachedPackage(p addrs.Provider, v versions.Version) (*records.PackageRecord, bool) {
	return r.CachedPackageAt(records.KeysOf(p).Of(v))
}

// CachedPackageAt is CachedPackage for a version whose keys the caller
// has spelled.
func (r *Records) CachedPackageAt(k records.VersionKeys) (*records.PackageRecord, bool) {
	key := k.Package
	val, _, gen, ok := r.Remembered(key)
	if ok {
		return val.(*records.PackageRecord), true
	}
	var rec records.PackageRecord
	storedAt, err := r.store.GetMeta(key, &rec)
	if err != nil {
		if !errors.Is(err, cache.ErrNotFound) {
			r.log.Warn("reading cached package metadata", "provider", k.Name, "version", k.Version.String(), "error", err)
		}
		return nil, false
	}
	if !records.KnownSchema(rec.Schema) {
		return nil, false
	}
	r.Remember(key, gen, &rec, storedAt)
	return &rec, true
}

// CachedVersions returns the stored version list under key, from memory
// when it was read before, and when it was stored.
func (r *Records) CachedVersions(key string) (*records.VersionList, time.Time, error) {
	val, storedAt, gen, ok := r.Remembered(key)
	if ok {
		return val.(*records.VersionList), storedAt, nil
	}
	var list records.VersionList
	storedAt, err := r.store.GetMeta(key, &list)
	if err != nil {
		return nil, time.Time{}, err
	}
	if !records.KnownSchema(list.Schema) {
		return nil, time.Time{}, fmt.Errorf("%w: version list of schema %d", cache.ErrNotFound, list.Schema)
	}
	r.Remember(key, gen, &list, storedAt)
	return &list, storedAt, nil
}

// H1 is the h1: hash of the cached archive sha, "" when it is not cached.
func (r *Records) H1(sha string) string {
	info, err := r.store.StatBlob(sha)
	if err != nil {
		return ""
	}
	return info.H1
}

// Remembered returns the remembered record under key and when it was
// stored. When there is none, it returns the generation to pass to
// Remember after reading the record from the store.
func (r *Records) Remembered(key string) (val any, storedAt time.Time, gen uint64, ok bool) {
	e, gen, ok := r.m.Get(key)
	return e.val, e.storedAt, gen, ok
}

// Remember remembers a record read from the store, unless a write
// happened since Remembered returned gen (false then).
func (r *Records) Remember(key string, gen uint64, val any, storedAt time.Time) bool {
	return r.m.Put(key, gen, entry{storedAt: storedAt, val: val})
}

// Adopt remembers a record that is not in the store (a copy from the
// shared tier), unless a write happened since Remembered returned gen
// (false then); it advances the generation as a write does.
func (r *Records) Adopt(key string, gen uint64, val any, storedAt time.Time) bool {
	return r.m.Adopt(key, gen, entry{storedAt: storedAt, val: val})
}

// Forget drops key; call it after writing (or failing to write) key.
func (r *Records) Forget(key string) { r.m.Forget(key) }

// Generation changes whenever a remembered record may have.
func (r *Records) Generation() uint64 { return r.m.Generation() }

// Source is the engine's stored records as its parts read and write
// them, in one line of calls: the local store (*Records: the memo over
// the cache), or a decorator over it that the engine composes when a
// store beyond the cache is configured (the tier shared with other
// replicas), which takes from beyond what the local store lacks, having
// authenticated it, and writes through to both. A part takes a Source as
// a field; with nothing beyond the cache it is the local store itself.
type Source interface {
	// Get reads the record under key into v: the local store's, else
	// one from beyond it. It returns when the record was stored and
	// where it came from (records.Hit: the local store; records.Shared:
	// beyond it, not stored locally); cache.ErrNotFound when none has it,
	// or the local store's error. When a store beyond the local one did
	// not answer (it failed, rather than said it has none), the error
	// wraps ErrUnanswered too.
	Get(ctx context.Context, key string, v any) (time.Time, records.Source, error)
	// Newest reads the listing under key from every store that has it,
	// the local store's into into and each other's into a record of its
	// kind (records.Listing.Empty), and returns the one listed last, and
	// when (its records.Listing.Listed time, else when it was stored).
	// ok is false when no store has one it reads.
	Newest(ctx context.Context, key string, into records.Listing) (l records.Listing, at time.Time, ok bool)
	// Put stores v under key in the local store (returning its error)
	// and beyond it. v must not be modified afterwards.
	Put(key string, v any) error
	// Share stores v under key beyond the local store only, for a record
	// the caller has already written to the local store (in a batch of
	// its own). v must not be modified afterwards.
	Share(key string, v any)
	// Package returns the package record of the version k names: the
	// local store's, else one from beyond whose evidence verifies (stored
	// locally from then on).
	Package(ctx context.Context, k records.VersionKeys) (*records.PackageRecord, bool)
	// Versions returns the version list under key and when it was
	// stored: the local store's, else one from beyond (remembered, not
	// stored locally, so that its age stays the copy's).
	Versions(ctx context.Context, key string) (*records.VersionList, time.Time, bool)
	// ServedVersions returns the version list under key that Versions
	// serves, read now from every store (nothing remembered): the local
	// store's, else one from beyond it, or what a sealed mirror takes
	// of both (the later listing, mirror/sharedtier), and when it was
	// stored; own says it is the local store's, as stored there. A nil
	// list when no store has one; an error when one failed to answer
	// (wrapping ErrUnanswered for a store beyond the local one). For a
	// writer of the list served (a removal), which must write over that
	// one.
	ServedVersions(ctx context.Context, key string) (list *records.VersionList, storedAt time.Time, own bool, err error)
	// Beyond reports whether the source reads beyond the local store (a
	// shared tier composed over it): otherwise every record it has is
	// the local store's, and none can go unanswered.
	Beyond() bool
}

var _ Source = (*Records)(nil)

// ErrUnanswered is wrapped by a Source's error when a store beyond the
// local one failed to answer a read (rather than answering it has no
// such record): the record may be there all the same.
var ErrUnanswered = errors.New("the store beyond the cache did not answer")

// Get reads the record under key from the cache into v.
func (r *Records) Get(_ context.Context, key string, v any) (time.Time, records.Source, error) {
	at, err := r.store.GetMeta(key, v)
	return at, records.Hit, err
}

// Newest reads the listing under key from the cache into into.
func (r *Records) Newest(_ context.Context, key string, into records.Listing) (records.Listing, time.Time, bool) {
	storedAt, err := r.store.GetMeta(key, into)
	if err != nil {
		return nil, time.Time{}, false
	}
	at, ok := into.Listed()
	if !ok {
		return nil, time.Time{}, false
	}
	if at.IsZero() {
		at = storedAt
	}
	return into, at, true
}

// Put stores v under key in the cache and forgets what the memo
// remembered of key.
func (r *Records) Put(key string, v any) error {
	err := r.store.PutMeta(key, v)
	r.Forget(key)
	return err
}

// Share stores nothing: nothing is beyond the cache.
func (r *Records) Share(string, any) {}

// Beyond is false: the records are the local store's alone.
func (r *Records) Beyond() bool { return false }

// Package is CachedPackageAt.
func (r *Records) Package(_ context.Context, k records.VersionKeys) (*records.PackageRecord, bool) {
	return r.CachedPackageAt(k)
}

// Versions is CachedVersions; a read that fails for another reason than
// the list's absence is logged.
func (r *Records) Versions(_ context.Context, key string) (*records.VersionList, time.Time, bool) {
	list, at, err := r.CachedVersions(key)
	if err != nil {
		if !errors.Is(err, cache.ErrNotFound) {
			r.log.Warn("reading cached version list", "key", key, "error", err)
		}
		return nil, time.Time{}, false
	}
	return list, at, true
}

// ServedVersions reads the version list under key from the cache: nil
// when it has none this release reads.
func (r *Records) ServedVersions(_ context.Context, key string) (*records.VersionList, time.Time, bool, error) {
	var l records.VersionList
	at, err := r.store.GetMeta(key, &l)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		return nil, time.Time{}, false, nil
	case err != nil:
		return nil, time.Time{}, false, err
	case !records.KnownSchema(l.Schema):
		return nil, time.Time{}, false, nil
	}
	return &l, at, true, nil
}

// What the parts that keep archives and module packages ask of the store
// beyond the cache (they declare it as interfaces of their own: see
// mirror/fetch and mirror/modules). The local store holds nothing beyond
// the cache: it finds nothing there, offers nothing, and a fetch is the
// caller's own.

// ModuleRecord returns the module record under key from the cache.
func (r *Records) ModuleRecord(_ context.Context, key string) (*records.ModuleRecord, records.Source, error) {
	var rec records.ModuleRecord
	if _, err := r.store.GetMeta(key, &rec); err != nil {
		return nil, records.Hit, err
	}
	if !records.KnownSchema(rec.Schema) {
		return nil, records.Hit, cache.ErrNotFound
	}
	return &rec, records.Hit, nil
}

// FetchModule is fetch(ctx, rec): nothing beyond the cache has it.
func (r *Records) FetchModule(ctx context.Context, _ addrs.Module, _ string, rec records.ModuleRecord, _ int64,
	fetch func(context.Context, records.ModuleRecord) (*records.ModuleRecord, error)) (*records.ModuleRecord, error) {
	return fetch(ctx, rec)
}

// ShareModule does nothing: nothing is beyond the cache.
func (r *Records) ShareModule(context.Context, string, *records.ModuleRecord, io.ReadSeeker) {}

// InstallableModules adds none: nothing is beyond the cache.
func (r *Records) InstallableModules(context.Context, addrs.Module, func(versions.Version) bool, func(string)) {
}

// Installable is false: nothing is beyond the cache.
func (r *Records) Installable(context.Context, addrs.Provider, versions.Version, *records.PackageRecord) bool {
	return false
}

// Archive finds nothing: nothing is beyond the cache.
func (r *Records) Archive(context.Context, string, string, string, func()) (io.ReadCloser, int64, func(context.Context), error) {
	return nil, 0, nil, nil
}

// ShareArchive does nothing: nothing is beyond the cache.
func (r *Records) ShareArchive(context.Context, string, string) {}

// Distrust does nothing: nothing is beyond the cache.
func (r *Records) Distrust(string) {}

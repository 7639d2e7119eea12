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
package stored

import (
	"errors"
	"fmt"
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
	key := records.PackageKey(p, v)
	val, _, gen, ok := r.Remembered(key)
	if ok {
		return val.(*records.PackageRecord), true
	}
	var rec records.PackageRecord
	storedAt, err := r.store.GetMeta(key, &rec)
	if err != nil {
		if !errors.Is(err, cache.ErrNotFound) {
			r.log.Warn("reading cached package metadata", "provider", p.String(), "version", v.String(), "error", err)
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
// happened since Remembered returned gen.
func (r *Records) Remember(key string, gen uint64, val any, storedAt time.Time) {
	r.m.Put(key, gen, entry{storedAt: storedAt, val: val})
}

// Adopt remembers a record that is not in the store (a copy from the
// shared tier), unless a write happened since Remembered returned gen; it
// advances the generation as a write does.
func (r *Records) Adopt(key string, gen uint64, val any, storedAt time.Time) {
	r.m.Adopt(key, gen, entry{storedAt: storedAt, val: val})
}

// Forget drops key; call it after writing (or failing to write) key.
func (r *Records) Forget(key string) { r.m.Forget(key) }

// Generation changes whenever a remembered record may have.
func (r *Records) Generation() uint64 { return r.m.Generation() }

package stored

// The engine's records as its parts read and write them: one Source,
// the local store (Records) or a decorator the engine composes over it.

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

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
	// or the local store's error.
	Get(ctx context.Context, key string, v any) (time.Time, records.Source, error)
	// Newest reads the record under key from every store that has it,
	// each into a value fresh returns, and returns the one listed last:
	// listed says when a record was listed (zero: when it was stored)
	// and whether it is readable. ok is false when none is.
	Newest(ctx context.Context, key string, fresh func() any, listed func(any) (time.Time, bool)) (v any, at time.Time, ok bool)
	// Put stores v under key in the local store (returning its error)
	// and beyond it. v must not be modified afterwards.
	Put(key string, v any) error
	// Package returns the package record of version v of p: the local
	// store's, else one from beyond whose evidence verifies (stored
	// locally from then on).
	Package(ctx context.Context, p addrs.Provider, v versions.Version) (*records.PackageRecord, bool)
	// Versions returns the version list under key and when it was
	// stored: the local store's, else one from beyond (remembered, not
	// stored locally, so that its age stays the copy's).
	Versions(ctx context.Context, key string) (*records.VersionList, time.Time, bool)
}

var _ Source = (*Records)(nil)

// Get reads the record under key from the cache into v.
func (r *Records) Get(_ context.Context, key string, v any) (time.Time, records.Source, error) {
	at, err := r.store.GetMeta(key, v)
	return at, records.Hit, err
}

// Newest reads the record under key from the cache.
func (r *Records) Newest(_ context.Context, key string, fresh func() any, listed func(any) (time.Time, bool)) (any, time.Time, bool) {
	v := fresh()
	storedAt, err := r.store.GetMeta(key, v)
	if err != nil {
		return nil, time.Time{}, false
	}
	at, ok := listed(v)
	if !ok {
		return nil, time.Time{}, false
	}
	if at.IsZero() {
		at = storedAt
	}
	return v, at, true
}

// Put stores v under key in the cache and forgets what the memo
// remembered of key.
func (r *Records) Put(key string, v any) error {
	err := r.store.PutMeta(key, v)
	r.Forget(key)
	return err
}

// Package is CachedPackage.
func (r *Records) Package(_ context.Context, p addrs.Provider, v versions.Version) (*records.PackageRecord, bool) {
	return r.CachedPackage(p, v)
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
func (r *Records) InstallableModules(context.Context, addrs.Module, func(string) bool, func(string)) {
}

// Installable is false: nothing is beyond the cache.
func (r *Records) Installable(context.Context, addrs.Provider, versions.Version, *records.PackageRecord) bool {
	return false
}

// Archive finds nothing: nothing is beyond the cache.
func (r *Records) Archive(context.Context, string, string, func()) (io.ReadCloser, int64, func(context.Context), error) {
	return nil, 0, nil, nil
}

// ShareArchive does nothing: nothing is beyond the cache.
func (r *Records) ShareArchive(context.Context, string, string) {}

// Distrust does nothing: nothing is beyond the cache.
func (r *Records) Distrust(string) {}

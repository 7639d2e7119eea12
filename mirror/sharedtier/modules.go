package sharedtier

// Registry modules and the tier: a module version's record and package go
// there once fetched, like provider archives and records, so that of all
// replicas one fetches a version from its source host (under the tier's
// lease) and the others, sealed ones included, serve it from the tier.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// moduleLeaseID names the tier's lease on fetching the module version
// under key: the tier leases by sha256, and the package's is not known
// before the fetch.
func moduleLeaseID(key string) string {
	sum := sha256.Sum256([]byte("tfmirror module fetch\n" + key))
	return hex.EncodeToString(sum[:])
}

// ModuleRecord returns the module record under key: the cache's
// (records.Hit), else the tier's (records.Shared, see sharedModuleRecord);
// when neither has one, the cache's error.
func (s *Shared) ModuleRecord(ctx context.Context, key string) (*records.ModuleRecord, records.Source, error) {
	rec, src, err := s.recs.ModuleRecord(ctx, key)
	if err == nil {
		return rec, src, nil
	}
	if r, ok := s.sharedModuleRecord(ctx, key); ok {
		return r, records.Shared, nil
	}
	return nil, src, err
}

// sharedModuleRecord copies the module record under key from the tier to
// the cache, if the tier has a complete one (with its package's sha256).
func (s *Shared) sharedModuleRecord(ctx context.Context, key string) (*records.ModuleRecord, bool) {
	if s.tier == nil {
		return nil, false
	}
	var rec records.ModuleRecord
	if _, ok := s.peek(ctx, key, &rec); !ok || !records.KnownSchema(rec.Schema) || !sha256hex.Valid(rec.SHA256) {
		return nil, false
	}
	// In turn with ImportModule (and a fetch completing the record), which
	// store under the import lock: a complete record stored while the
	// tier was asked (an import's, whose package may not be fetched
	// again) is kept, not written over; the first sha256 stays.
	s.life.Imports().Lock()
	defer s.life.Imports().Unlock()
	if now, _, err := s.recs.ModuleRecord(ctx, key); err == nil && now.SHA256 != "" {
		return now, true
	}
	if err := s.store.PutMeta(key, &rec); err != nil {
		s.metrics.CacheWriteFailed()
		s.log.Log(context.Background(), cache.WriteFailureLevel(err), "storing module record", "key", key, "error", err)
	}
	return &rec, true
}

// copyModule copies the package of rec (at most limit bytes) from the tier
// into the cache, checking its sha256; it reports whether the package is
// now cached. A copy that does not match is distrusted from then on.
func (s *Shared) copyModule(ctx context.Context, rec records.ModuleRecord, limit int64) bool {
	if s.tier == nil || rec.SHA256 == "" || !s.Trusts(rec.SHA256) {
		return false
	}
	body, _, err := s.tier.OpenArchive(ctx, rec.SHA256)
	if err != nil {
		s.failed(ctx, err, "shared store failed; going on without it", "module", rec.Module, "version", rec.Version)
		return false
	}
	if body == nil {
		return false
	}
	defer body.Close()
	w, err := s.store.NewBlobWriter(rec.SHA256)
	if err != nil {
		return false
	}
	defer w.Close()
	n, err := io.Copy(w, io.LimitReader(body, limit+1))
	if err != nil || n > limit {
		s.log.Warn("module package from the shared store not copied", "module", rec.Module, "version", rec.Version, "error", err)
		return false
	}
	if _, err := w.Commit(""); err != nil {
		if w.Sum() != rec.SHA256 {
			s.Distrust(rec.SHA256)
			s.log.Error("the shared store's copy of a module package is not the package; this replica fetches it from its source from now on, and puts the source's in its place in the bucket",
				"module", rec.Module, "version", rec.Version, "sha256", rec.SHA256)
		}
		return false
	}
	return true
}

// ShareModule puts a fetched module package and then its record (stored
// in the cache already) in the tier (in this order: a replica that finds
// the record finds the package). A no-op without a tier.
func (s *Shared) ShareModule(ctx context.Context, key string, rec *records.ModuleRecord, pkg io.ReadSeeker) {
	if s.tier == nil {
		return
	}
	if _, err := pkg.Seek(0, io.SeekStart); err != nil {
		return
	}
	if err := s.tier.PutArchive(ctx, rec.SHA256, pkg, rec.Size); err != nil {
		s.log.Warn("module package not stored in the shared store", "module", rec.Module, "version", rec.Version, "error", err)
		return
	}
	if err := s.tier.PutMeta(ctx, key, rec); err != nil {
		s.log.Warn("module record not stored in the shared store", "module", rec.Module, "version", rec.Version, "error", err)
	}
}

// FetchModule is the fetch of module m's version, recorded as rec under
// key, with the tier in front of fetch (its fetch from the source host):
// from the tier when it has the package (at most limit bytes); else under
// the tier's lease on the version, through fetch (and then, by the caller,
// ShareModule), while other replicas wait for the package to appear in the
// tier (taking over if the lease expires, or fetching for themselves
// after Config.HolderWait). A tier that fails is gone around; without a
// tier it is fetch.
func (s *Shared) FetchModule(ctx context.Context, m addrs.Module, key string, rec records.ModuleRecord, limit int64,
	fetch func(context.Context, records.ModuleRecord) (*records.ModuleRecord, error)) (*records.ModuleRecord, error) {
	if s.tier == nil {
		return fetch(ctx, rec)
	}
	wait := s.waitForHolder()
	defer wait.stop()
	for {
		if rec.SHA256 == "" {
			if r, ok := s.sharedModuleRecord(ctx, key); ok {
				rec = *r
			}
		}
		if s.copyModule(ctx, rec, limit) {
			return &rec, nil
		}
		if s.cfg.Offline {
			return nil, fmt.Errorf("%w: package of module %s %s", records.ErrOffline, m, rec.Version)
		}
		release, err := s.TryLease(ctx, moduleLeaseID(key))
		if err != nil {
			s.failed(ctx, err, "shared store failed; fetching the module package from its source", "module", m.String())
			return fetch(ctx, rec)
		}
		if release != nil {
			defer release(context.WithoutCancel(ctx))
			// The holder before us may have stored it and let go just now.
			if r, ok := s.sharedModuleRecord(ctx, key); ok && s.copyModule(ctx, *r, limit) {
				return r, nil
			}
			return fetch(ctx, rec)
		}
		// Another replica is fetching it.
		more, err := wait.next(ctx)
		if err != nil {
			return nil, fmt.Errorf("waiting for another replica's fetch of module %s %s: %w", m, rec.Version, err)
		}
		if !more {
			s.log.Warn("another replica has held the shared store's lease on a module fetch too long; fetching it here",
				"module", m.String(), "version", rec.Version, "waited", time.Since(wait.start).Round(time.Millisecond))
			return fetch(ctx, rec)
		}
	}
}

// InstallableModules hands add, in turn, the versions of the tier's
// version list of m that have is false for (asked again after each add)
// and whose module record and package the tier holds (for a sealed
// replica's list).
func (s *Shared) InstallableModules(ctx context.Context, m addrs.Module, have func(versions.Version) bool, add func(string)) {
	var list records.ModuleVersionList
	if _, ok := s.peek(ctx, records.ModuleVersionsKey(m), &list); !ok {
		return
	}
	for _, raw := range list.Versions {
		v, err := addrs.ParseModuleVersion(raw)
		if err != nil {
			continue // no door asks for it
		}
		if !have(v) && s.moduleInstallable(ctx, records.ModuleRecordKey(m, v)) {
			add(raw)
		}
	}
}

// moduleInstallable reports whether the tier holds the module record under
// key and its package.
func (s *Shared) moduleInstallable(ctx context.Context, key string) bool {
	var rec records.ModuleRecord
	if _, ok := s.peek(ctx, key, &rec); !ok || !sha256hex.Valid(rec.SHA256) || !s.Trusts(rec.SHA256) {
		return false
	}
	body, _, err := s.tier.OpenArchive(ctx, rec.SHA256)
	if err != nil || body == nil {
		return false
	}
	body.Close()
	return true
}

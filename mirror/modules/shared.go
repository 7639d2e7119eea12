package modules

// Registry modules and the tier shared with other replicas
// (Config.Shared): a module version's record and package go there once
// fetched, like provider archives and records, so that of all replicas
// one fetches a version from its source host (under the tier's lease)
// and the others, sealed ones included, serve it from the tier.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// moduleLeaseID names the shared tier's lease on fetching the module
// version under key: the tier leases by sha256, and the package's is not
// known before the fetch.
func moduleLeaseID(key string) string {
	sum := sha256.Sum256([]byte("tfmirror module fetch\n" + key))
	return hex.EncodeToString(sum[:])
}

// sharedModuleRecord copies the record under key from the shared tier to
// the cache, if the tier has a complete one (with its package's sha256).
func (s *Modules) sharedModuleRecord(ctx context.Context, key string) (*records.ModuleRecord, bool) {
	if !s.shared.On() {
		return nil, false
	}
	var rec records.ModuleRecord
	if _, ok := s.shared.Get(ctx, key, &rec); !ok || !records.KnownSchema(rec.Schema) || rec.SHA256 == "" || checkModuleSHA(rec.SHA256) != nil {
		return nil, false
	}
	if err := s.store.PutMeta(key, &rec); err != nil {
		s.metrics.CacheWriteFailed()
		s.log.Error("storing module record", "key", key, "error", err)
	}
	return &rec, true
}

func checkModuleSHA(sha string) error {
	if !sha256hex.Valid(sha) {
		return fmt.Errorf("%q is not a sha256", sha)
	}
	return nil
}

// copySharedModule copies the package of rec from the shared tier into
// the cache, checking its sha256; it reports whether the package is now
// cached. A copy that does not match is distrusted from then on.
func (s *Modules) copySharedModule(ctx context.Context, rec records.ModuleRecord) bool {
	if !s.shared.On() || rec.SHA256 == "" || !s.shared.Trusts(rec.SHA256) {
		return false
	}
	body, _, err := s.shared.OpenBlob(ctx, rec.SHA256)
	if err != nil {
		s.log.Warn("shared store failed; going on without it", "module", rec.Module, "version", rec.Version, "error", err)
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
	limit := s.cfg.Limits.MaxDownloadBytes + s.cfg.Limits.MaxTreeBytes // a normalized package is at most about this
	n, err := io.Copy(w, io.LimitReader(body, limit+1))
	if err != nil || n > limit {
		s.log.Warn("module package from the shared store not copied", "module", rec.Module, "version", rec.Version, "error", err)
		return false
	}
	if _, err := w.Commit(""); err != nil {
		if w.Sum() != rec.SHA256 {
			s.shared.Distrust(rec.SHA256)
			s.log.Error("the shared store's copy of a module package is not the package; this replica fetches it from its source from now on. Delete the object from the bucket",
				"module", rec.Module, "version", rec.Version, "sha256", rec.SHA256)
		}
		return false
	}
	return true
}

// shareModule puts a fetched module package and then its record in the
// shared tier (in this order: a replica that finds the record finds the
// package).
func (s *Modules) shareModule(ctx context.Context, key string, rec *records.ModuleRecord, pkg io.ReadSeeker) {
	if !s.shared.On() {
		return
	}
	if _, err := pkg.Seek(0, io.SeekStart); err != nil {
		return
	}
	if err := s.shared.PutBlob(ctx, rec.SHA256, pkg, rec.Size); err != nil {
		s.log.Warn("module package not stored in the shared store", "module", rec.Module, "version", rec.Version, "error", err)
		return
	}
	if err := s.shared.PutNow(ctx, key, rec); err != nil {
		s.log.Warn("module record not stored in the shared store", "module", rec.Module, "version", rec.Version, "error", err)
	}
}

// fetchModuleShared is the fetch of a module version's package with a
// shared tier: from the tier when it has the package; else under the
// tier's lease on the version, from the source host (and then into the
// tier), while other replicas wait for the package to appear in the tier
// (taking over if the lease expires). A tier that fails is gone around.
func (s *Modules) fetchModuleShared(ctx context.Context, m addrs.Module, key string, rec records.ModuleRecord) (*records.ModuleRecord, error) {
	if !s.shared.On() {
		return s.fetchModule(ctx, m, rec)
	}
	wait := s.cfg.SharedPoll.Min
	for {
		if rec.SHA256 == "" {
			if r, ok := s.sharedModuleRecord(ctx, key); ok {
				rec = *r
			}
		}
		if s.copySharedModule(ctx, rec) {
			return &rec, nil
		}
		if s.cfg.Offline {
			return nil, fmt.Errorf("%w: package of module %s %s", records.ErrOffline, m, rec.Version)
		}
		release, err := s.shared.TryLease(ctx, moduleLeaseID(key))
		if err != nil {
			s.log.Warn("shared store failed; fetching the module package from its source", "module", m.String(), "error", err)
			return s.fetchModule(ctx, m, rec)
		}
		if release != nil {
			defer release(context.WithoutCancel(ctx))
			// The holder before us may have stored it and let go just now.
			if r, ok := s.sharedModuleRecord(ctx, key); ok && s.copySharedModule(ctx, *r) {
				return r, nil
			}
			return s.fetchModule(ctx, m, rec)
		}
		// Another replica is fetching it.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for another replica's fetch of module %s %s: %w", m, rec.Version, context.Cause(ctx))
		case <-t.C:
		}
		wait = min(2*wait, s.cfg.SharedPoll.Max)
	}
}

// sharedModuleInstallable reports whether the shared tier holds the
// record under key and its package (for a sealed replica's list).
func (s *Modules) sharedModuleInstallable(ctx context.Context, key string) bool {
	var rec records.ModuleRecord
	if _, ok := s.shared.Get(ctx, key, &rec); !ok || rec.SHA256 == "" || checkModuleSHA(rec.SHA256) != nil || !s.shared.Trusts(rec.SHA256) {
		return false
	}
	body, _, err := s.shared.OpenBlob(ctx, rec.SHA256)
	if err != nil || body == nil {
		return false
	}
	body.Close()
	return true
}

package modules

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// packageTrees tells module packages by what they hold
// (records.ModuleRecord.Tree, modsource.PackageTree), not by their bytes:
// the tar.gz the mirror makes of a source's files is compressed by the
// Go release it was built with, and another release's compressor
// writes other bytes for the same files. Safe for concurrent use.
type packageTrees struct {
	store   Store
	life    *lifetime.Lifetime // work on the store, the import lock
	log     *slog.Logger
	metrics Metrics
	// kept are the packages, by sha256, whose records of an earlier
	// release were completed with their tree (keep).
	kept sync.Map
}

// same says whether a package of tree fetched at commit ("" for an
// archive) is the one rec names, whatever its bytes: rec's tree; for a
// record of an earlier release, which kept none, the tree of rec's
// package where the cache still holds it, else, for a Git source, the
// same commit (a commit's tree does not change).
func (t *packageTrees) same(ctx context.Context, rec records.ModuleRecord, tree, commit string) bool {
	switch {
	case tree == "":
		return false
	case rec.Tree != "":
		return rec.Tree == tree
	}
	if held, err := t.held(ctx, rec.SHA256); err == nil {
		return held == tree
	}
	return rec.Kind == modsource.KindGit && rec.Commit != "" && rec.Commit == commit
}

// keep completes the record of version of m, of an earlier release,
// with the tree of its package sha, which the cache holds: so that the
// package fetched again once evicted is known for the same in other
// bytes. Once per package and process; a failure is logged, and changes
// nothing of what is served.
func (t *packageTrees) keep(ctx context.Context, m addrs.Module, version versions.Version, sha string) {
	if _, done := t.kept.LoadOrStore(sha, true); done {
		return
	}
	tree, err := t.held(ctx, sha)
	if err != nil {
		t.kept.Delete(sha)
		t.log.Warn("reading the tree of a cached module package", "module", m.String(), "version", version, "sha256", sha, "error", err)
		return
	}
	t.life.Imports().Lock()
	defer t.life.Imports().Unlock()
	key := records.ModuleRecordKey(m, version)
	var rec records.ModuleRecord
	if _, err := t.store.GetMeta(key, &rec); err != nil || rec.SHA256 != sha || rec.Tree != "" {
		return
	}
	rec.Tree = tree
	if err := t.store.PutMeta(key, &rec); err != nil {
		t.kept.Delete(sha)
		t.metrics.CacheWriteFailed()
		t.log.Warn("storing the tree of a cached module package", "module", m.String(), "version", version, "error", err)
	}
}

// held returns the tree of the package the cache holds under sha.
func (t *packageTrees) held(ctx context.Context, sha string) (string, error) {
	if !t.life.StartWork() {
		return "", records.ErrShutDown
	}
	defer t.life.EndWork()
	blob, err := t.store.OpenBlob(sha)
	if err != nil {
		return "", fmt.Errorf("%w: module package %s: %w", records.ErrNotCached, sha, err)
	}
	defer blob.Close()
	// No limits: it was within those of its day, and is read, not kept.
	return modsource.PackageTree(ctx, blob, modsource.Limits{})
}

package modules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
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
	// kept are the records of an earlier release, by key and their
	// package's sha256, that keep completed with their tree (or is
	// completing, or could not: see keep).
	kept sync.Map
}

// same says whether a package of tree fetched at commit ("" for an
// archive) is the one rec names, whatever its bytes: rec's tree; for a
// record of an earlier release, which kept none, the tree of rec's
// package where the cache still holds it, else, for a Git source whose
// commit rec has from a fetch of this mirror's, the same commit (a
// commit's tree does not change). commit is the one the fetch resolved,
// never one a package came with (an import's: nothing binds the files to
// it), which passes "".
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
	// The commit this mirror resolved (an imported record's is its
	// export's word, which nothing bound the package's files to).
	return rec.Kind == modsource.KindGit && rec.Provenance == records.ProvenanceOrigin && rec.Commit != "" && rec.Commit == commit
}

// keep completes the record of version of m, of an earlier release,
// with the tree of its package sha, which the cache holds: so that the
// package fetched again once evicted is known for the same in other
// bytes. Once per record and package and process (versions of one
// package each have their record): a failure to read the package is
// logged, and tried again at the next read; a cache that cannot be
// written (cache.ErrNotWritable) is not written to again for it. It
// changes nothing of what is served.
func (t *packageTrees) keep(ctx context.Context, m addrs.Module, version versions.Version, sha string) {
	key := records.ModuleRecordKey(m, version)
	once := key + "\x00" + sha
	if _, done := t.kept.LoadOrStore(once, true); done {
		return
	}
	tree, err := t.held(ctx, sha)
	if err != nil {
		t.kept.Delete(once)
		t.log.Warn("reading the tree of a cached module package", "module", m.String(), "version", version, "sha256", sha, "error", err)
		return
	}
	t.life.Imports().Lock()
	defer t.life.Imports().Unlock()
	var rec records.ModuleRecord
	if _, err := t.store.GetMeta(key, &rec); err != nil || rec.SHA256 != sha || rec.Tree != "" {
		return
	}
	rec.Tree = tree
	if err := t.store.PutMeta(key, &rec); err != nil {
		if !errors.Is(err, cache.ErrNotWritable) {
			t.kept.Delete(once)
		}
		t.metrics.CacheWriteFailed()
		t.log.Log(context.Background(), cache.WriteFailureLevel(err), "storing the tree of a cached module package", "module", m.String(), "version", version, "error", err)
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

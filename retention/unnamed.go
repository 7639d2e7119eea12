package retention

// The archives no record names: left by a named prune stopped between a
// version's record and its archives, by an archive whose removal failed,
// by an import that failed after it committed archives and before their
// records. Nothing serves them and no prune can name them; the size limit
// evicts them, but without one they would stay for ever. The background
// pass removes them (sweepUnnamed).

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	mirrorheld "github.com/tfmirror/tfmirror/v2/mirror/inventory"
)

// unnamedGrace is how long an archive stays named by no record, seen so
// by two passes, before it is removed. A writer other than an import
// commits an archive before the record that names it (an origin
// download, a module package or zip made, a copy from the shared store,
// a CLI release), and nothing tells retention of it in between: the
// record follows within the same request, in seconds. An hour leaves
// such a writer a thousand times the time it needs; each of those
// archives can be fetched again anyway. An import's archives cannot be,
// and are kept by the import's own protection (protection.importing),
// whatever the time, until a record names them or their import failed.
const unnamedGrace = time.Hour

// unnamedEvery is the least time between two background sweeps: each
// reads every record.
const unnamedEvery = 30 * time.Minute

// maxUnnamed bounds the archives remembered as seen unnamed; those
// beyond wait for the next sweeps.
const maxUnnamed = 1 << 16

// unnamedSeen is an archive a sweep found named by no record.
type unnamedSeen struct {
	created time.Time // its commit time then: committed again since, it is seen anew
	first   time.Time // when a sweep first found it so (r.now)
}

// unnamedSweep is the background goroutine's (under passMu).
type unnamedSweep struct {
	seen map[string]unnamedSeen
	last time.Time // the last sweep (zero: none yet)
}

// sweepUnnamedDue runs sweepUnnamed at most every unnamedEvery.
func (r *Retainer) sweepUnnamedDue(ctx context.Context) {
	r.passMu.Lock()
	due := r.unnamed.last.IsZero() || r.now().Sub(r.unnamed.last) >= unnamedEvery
	r.passMu.Unlock()
	if due {
		r.sweepUnnamed(ctx)
	}
}

// sweepUnnamed removes the archives named by no record that a sweep at
// least unnamedGrace before found named by none too (with the same
// commit time), unless an import or a record protects them: the cache's
// archives are listed before the records are read (one committed since
// is not seen), the records are read again just before the removals, and
// each removal is made as the rules' are (protection.removeUnless: an
// import that finds the archive cached protects it first, or waits and
// commits it again). Nothing is removed on a sealed mirror or under
// Config.EvictNothing. It logs what it removed, once.
func (r *Retainer) sweepUnnamed(ctx context.Context) {
	if r.offline || r.cfg.EvictNothing {
		return
	}
	r.passMu.Lock()
	defer r.passMu.Unlock()
	defer r.store.ReleaseReadPages() // mapped by the readings of every record
	now := r.now()
	r.unnamed.last = now
	var keys [][32]byte
	if err := r.store.ScanBlobs(func(sha string, _ int64) error {
		if k, ok := shaKey(sha); ok {
			keys = append(keys, k)
		}
		return ctx.Err()
	}); err != nil {
		if ctx.Err() == nil {
			r.log.Warn("listing the cache's archives for those no record names; none is removed", "error", err)
		}
		return
	}
	cached := newSHASet(keys)
	named, err := r.namedArchives(ctx, cached)
	if ctx.Err() != nil {
		return // the serve is shutting down
	}
	if err != nil {
		r.log.Warn("reading the cache's records for the archives no record names; none is removed", "error", err)
		return
	}
	seen := map[string]unnamedSeen{}
	var due []string // and their indexes in cached
	var dueAt []int
	for i, k := range cached {
		if named[i] {
			continue
		}
		sha := hex.EncodeToString(k[:])
		info, err := r.store.StatBlob(sha)
		if err != nil {
			continue // gone since, or damaged: left to the next sweep
		}
		was, ok := r.unnamed.seen[sha]
		if !ok || !was.created.Equal(info.Created) {
			was = unnamedSeen{created: info.Created, first: now}
		}
		if len(seen) < maxUnnamed {
			seen[sha] = was
		}
		if now.Sub(was.first) >= unnamedGrace {
			due, dueAt = append(due, sha), append(dueAt, i)
		}
	}
	r.unnamed.seen = seen
	if len(due) == 0 {
		return
	}
	// A record written since the first reading, by a writer that found
	// the archive cached, names it now.
	if named, err = r.namedArchives(ctx, cached); ctx.Err() != nil {
		return
	} else if err != nil {
		r.log.Warn("reading the cache's records for the archives no record names; none is removed", "error", err)
		return
	}
	var n int
	var bytes int64
	var failed []error
	for j, sha := range due {
		if ctx.Err() != nil {
			break
		}
		if named[dueAt[j]] {
			delete(r.unnamed.seen, sha)
			continue
		}
		kept, err := r.prot.removeUnless(sha, func(k [32]byte) bool {
			_, extra := r.prot.extra[k]
			return extra || r.prot.set.has(k)
		}, func() error {
			info, err := r.store.EvictBlob(sha)
			if err == nil {
				n++
				bytes += info.Size
			}
			return err
		})
		switch {
		case kept, errors.Is(err, cache.ErrInUse):
			// An import's, or read or being written: the next sweep sees.
		case errors.Is(err, cache.ErrNotFound):
			delete(r.unnamed.seen, sha)
		case err != nil:
			failed = append(failed, err)
		default:
			delete(r.unnamed.seen, sha)
		}
	}
	if len(failed) > 0 {
		r.log.Warn("removing archives no record names; they are left for a later pass", "failed", len(failed), "error", failed[0])
	}
	if n == 0 {
		return
	}
	r.log.Info("removed the cached archives no record names", "archives", n, "bytes", bytes)
	if r.cfg.Metrics != nil {
		r.cfg.Metrics.RetentionRemoved(RuleUnnamed, 0, bytes)
	}
}

// namedArchives says which of cached a record of the cache may name
// (named[i] for cached[i]): those whose sha256 the key or the text of any
// record holds (of any kind: versions of providers and modules, module zips,
// OCI documents, CLI releases, and kinds unknown to this release), and
// those the CLI versions' listings give (their SHA256SUMS, which their
// records keep as documents). What a record may name is kept. It
// stops once ctx ends, with its error.
func (r *Retainer) namedArchives(ctx context.Context, cached shaSet) ([]bool, error) {
	named := make([]bool, len(cached))
	mark := func(k [32]byte) {
		if i, ok := slices.BinarySearchFunc(cached, k, compareSHA); ok {
			named[i] = true
		}
	}
	err := r.store.ScanMeta("", func(key string, _ time.Time, raw json.RawMessage) error {
		sha256sOf([]byte(key), mark) // a record keyed by the archive it is of
		sha256sOf(raw, mark)
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	// The engine's versions name their archives in their records' text
	// (hex strings), read above; a CLI version may name them only in
	// its SHA256SUMS, which its record keeps in base64.
	if r.cfg.CLI == nil {
		return named, nil
	}
	err = r.cfg.CLI.ScanVersions(func(v mirrorheld.Record) {
		for _, sha := range slices.Concat(v.Archives, v.SetAside, v.Unfetchable) {
			if k, ok := shaKey(sha); ok {
				mark(k)
			}
		}
	})
	return named, err
}

// sha256sOf calls fn with every run of exactly 64 hex digits in text.
func sha256sOf(text []byte, fn func(k [32]byte)) {
	run := 0
	for i := 0; i <= len(text); i++ {
		if i < len(text) && isHex(text[i]) {
			run++
			continue
		}
		if run == 64 {
			var k [32]byte
			if _, err := hex.Decode(k[:], text[i-64:i]); err == nil {
				fn(k)
			}
		}
		run = 0
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

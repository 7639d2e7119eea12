package retention

// The size limit's evictions, listed by a command's Prune
// (Config.Evictions) with what the rules remove: made, or, for a dry
// run, those a pass would make.

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/tfmirror/tfmirror/v2/cache"
)

// Evictions are the archives the cache's size limit evicted since a
// Prune last listed them (Config.Evictions). The zero value is ready;
// its methods are safe for concurrent use.
type Evictions struct {
	mu    sync.Mutex
	sizes map[string]int64
}

// Add notes an archive the size limit evicted: give it to the cache as
// cache.Options.OnEvict.
func (e *Evictions) Add(info cache.BlobInfo) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sizes == nil {
		e.sizes = map[string]int64{}
	}
	e.sizes[info.SHA256] = info.Size
}

// take returns the archives evicted since the last call, and their sizes.
func (e *Evictions) take() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	sizes := e.sizes
	e.sizes = nil
	return sizes
}

// list waits for a pass of store's size limit, then returns the
// versions whose archives it evicted since the last call (RuleSizeLimit),
// each archive under the first version of hs that names it. A nil e
// lists nothing.
func (e *Evictions) list(ctx context.Context, store Blobs, log *slog.Logger, hs []*held) ([]Removal, error) {
	if e == nil {
		return nil, nil
	}
	err := store.EvictNow(ctx)
	return byVersion(e.take(), log, "the size limit evicted archives no version's record names", hs), err
}

// predict returns the versions whose archives a pass of store's size
// limit would evict (RuleSizeLimit) once the removals p were made, of
// the archives may says it may evict, each archive under the first
// version of hs that names it. A nil e lists nothing.
func (e *Evictions) predict(store Blobs, log *slog.Logger, hs []*held, p []Removal, may func(sha string) bool) []Removal {
	if e == nil {
		return nil
	}
	gone := map[string]int64{}
	for _, rm := range p {
		for _, sha := range rm.Archives {
			if info, err := store.StatBlob(sha); err == nil {
				gone[sha] = info.Size
			}
		}
	}
	sizes := map[string]int64{}
	for _, info := range store.WouldEvict(gone, may) {
		sizes[info.SHA256] = info.Size
	}
	return byVersion(sizes, log, "the size limit would evict archives no version's record names", hs)
}

// byVersion returns the versions of hs whose archives sizes holds, each
// archive under the first that names it, as removals by RuleSizeLimit,
// in order; it logs msg with the number of archives no version names.
func byVersion(sizes map[string]int64, log *slog.Logger, msg string, hs []*held) []Removal {
	var out []Removal
	for _, h := range hs {
		rm := Removal{Kind: h.Kind, Address: h.Address, Version: h.Raw, Rule: RuleSizeLimit, Archives: []string{}}
		for _, sha := range h.Archives {
			if size, ok := sizes[sha]; ok {
				delete(sizes, sha)
				rm.Archives = append(rm.Archives, sha)
				rm.Bytes += size
			}
		}
		if len(rm.Archives) > 0 {
			out = append(out, rm)
		}
	}
	if len(sizes) > 0 {
		log.Info(msg, "archives", len(sizes))
	}
	slices.SortFunc(out, func(a, b Removal) int {
		return strings.Compare(a.Kind+" "+a.Address+" "+a.Version, b.Kind+" "+b.Address+" "+b.Version)
	})
	return out
}

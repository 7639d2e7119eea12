package retention

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
)

// evictThen is a Store whose EvictBlob deletes nothing and runs then,
// under the rules' removal of sha.
type evictThen struct {
	Store
	then func(sha string)
}

func (s *evictThen) EvictBlob(sha string) (cache.BlobInfo, error) {
	s.then(sha)
	return cache.BlobInfo{SHA256: sha, Size: 1}, nil
}

// An import that waited for the rules' deletion of its archive, and
// protected it once it was deleted (it then commits it again), keeps
// that protection: the rules forget the archive as extra while they
// hold the deletion's lock, not after, when the import's protection may
// be the one they forget, leaving the archive it commits to the size
// limit until a rebuild reads its record.
func TestRulesKeepTheProtectionOfAnImportThatWaitedForTheirDeletion(t *testing.T) {
	t.Parallel()
	sha := strings.Repeat("ab", 32)
	for i := range 10000 {
		r := &Retainer{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		r.prot.extra = map[[32]byte]struct{}{}
		r.prot.ready.Store(true)
		imported := make(chan struct{})
		r.store = &evictThen{then: func(sha string) {
			// The import, waiting for the deletion under way: it takes
			// the lock the moment the deletion lets it go.
			go func() {
				defer close(imported)
				for !r.prot.removing.TryLock() {
				}
				r.prot.removing.Unlock()
				r.Importing(sha)
			}()
		}}
		if _, err := r.remove(context.Background(), []Removal{{Kind: "provider", Address: "example.com/a/b", Version: "1.0.0", Archives: []string{sha}}}, 0); err != nil {
			t.Fatal(err)
		}
		<-imported
		if r.prot.evictable(sha) {
			t.Fatalf("round %d: the archive an import protected once the rules deleted it may be evicted by the size limit", i)
		}
	}
}

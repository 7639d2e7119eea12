package airgap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// syncWatch is a store that notes, for each record written, whether the
// store was synced since.
type syncWatch struct {
	mirror.Store
	mu     sync.Mutex
	synced map[string]bool // by key written
}

func (s *syncWatch) wrote(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		s.synced[k] = false
	}
}

func (s *syncWatch) PutMeta(key string, v any) error { s.wrote(key); return s.Store.PutMeta(key, v) }
func (s *syncWatch) PutMetaAt(key string, v any, at time.Time) error {
	s.wrote(key)
	return s.Store.PutMetaAt(key, v, at)
}

func (s *syncWatch) PutMetas(docs map[string]any) error {
	for k := range docs {
		s.wrote(k)
	}
	return s.Store.PutMetas(docs)
}

func (s *syncWatch) Sync() error {
	s.mu.Lock()
	written := make([]string, 0, len(s.synced))
	for k := range s.synced {
		written = append(written, k)
	}
	s.mu.Unlock()
	err := s.Store.Sync()
	if err == nil {
		s.mu.Lock()
		for _, k := range written {
			s.synced[k] = true
		}
		s.mu.Unlock()
	}
	return err
}

// An import stores what may not be had again (the medium it came on is
// taken away once it says it is done): every record it wrote is synced
// to disk before it returns, so that a power loss after it said it was
// done loses none of it. Before, the records stayed in Badger's log
// unsynced for as long as the system kept them in memory.
func TestImportIsDurableWhenItReturns(t *testing.T) {
	in := t.TempDir()
	pdir := filepath.Join(in, "tf.corp.example", "acme", "thing")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "terraform-provider-thing_1.0.0_linux_amd64.zip"), enginetest.ZipOfSize(t, "thing", 64<<10, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	store := enginetest.OpenStore(t, filepath.Join(t.TempDir(), "cache"), cache.Options{})
	watch := &syncWatch{Store: store, synced: map[string]bool{}}
	cfg := mirror.Config{AllowedOrigins: []string{enginetest.OriginHost}, Logger: enginetest.Logger(t), ScratchDir: t.TempDir()}
	engine, err := mirror.New(cfg, enginetest.OriginClient(t, enginetest.StartOrigin(t, fakeorigin.Options{})), watch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		engine.Shutdown(ctx)
		store.Close()
	})
	sum, err := Import(t.Context(), engine, in, ImportOptions{AllowUnsigned: true, ScratchDir: t.TempDir()}, func(s string) { t.Log(s) })
	if err != nil || sum.Imported != 1 {
		t.Fatalf("import: %+v, %v; want 1 version imported", sum, err)
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	n := 0
	for k, synced := range watch.synced {
		if !strings.Contains(k, "tf.corp.example") {
			continue // the engine's own, written on its own time
		}
		n++
		if !synced {
			t.Errorf("record %s written by the import, not synced when it returned", k)
		}
	}
	if n == 0 {
		t.Fatalf("no record of tf.corp.example written by the import: %v", watch.synced)
	}
}

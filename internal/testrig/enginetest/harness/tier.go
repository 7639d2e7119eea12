package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror"
)

// MemTier is a shared tier (mirror.SharedTier, and what retention lists
// and removes of it) in memory: archives, records and leases.
type MemTier struct {
	mu       sync.Mutex
	archives map[string][]byte
	meta     map[string]json.RawMessage
	leases   map[string]bool
}

// NewMemTier returns an empty tier.
func NewMemTier() *MemTier {
	return &MemTier{archives: map[string][]byte{}, meta: map[string]json.RawMessage{}, leases: map[string]bool{}}
}

func (m *MemTier) OpenArchive(_ context.Context, sha string) (io.ReadCloser, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.archives[sha]
	if !ok {
		return nil, 0, nil
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

func (m *MemTier) PutArchive(_ context.Context, sha string, r io.ReadSeeker, _ int64) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.archives[sha] = b
	return nil
}

type memLease struct {
	m  *MemTier
	id string
}

func (l memLease) Keep(ctx context.Context) error { <-ctx.Done(); return nil }
func (l memLease) Release(context.Context) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	delete(l.m.leases, l.id)
	return nil
}

func (m *MemTier) TryLease(_ context.Context, id string) (mirror.SharedLease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leases[id] {
		return nil, nil
	}
	m.leases[id] = true
	return memLease{m, id}, nil
}

func (m *MemTier) GetMeta(_ context.Context, key string) (json.RawMessage, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.meta[key], time.Now(), nil
}

func (m *MemTier) PutMeta(_ context.Context, key string, record any) error {
	b, err := json.Marshal(record)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.meta[key] = b
	return nil
}

// ListMeta calls fn with every record under prefix: every record of a
// MemTier authenticates.
func (m *MemTier) ListMeta(_ context.Context, prefix string, fn func(key string, record json.RawMessage) error) (int, error) {
	m.mu.Lock()
	var keys []string
	for k := range m.meta {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	for _, k := range keys {
		m.mu.Lock()
		raw, ok := m.meta[k]
		m.mu.Unlock()
		if !ok {
			continue
		}
		if err := fn(k, raw); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

func (m *MemTier) ListArchives(_ context.Context, fn func(sha string, size int64, stored time.Time) error) error {
	m.mu.Lock()
	sizes := map[string]int64{}
	for sha, b := range m.archives {
		sizes[sha] = int64(len(b))
	}
	m.mu.Unlock()
	for sha, size := range sizes {
		if err := fn(sha, size, time.Time{}); err != nil {
			return err
		}
	}
	return nil
}

func (m *MemTier) DeleteArchive(_ context.Context, sha string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.archives, sha)
	return nil
}

// Archives returns how many archives the tier holds.
func (m *MemTier) Archives() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.archives)
}

// Meta returns the record the tier holds under key, nil if none.
func (m *MemTier) Meta(key string) json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.meta[key]
}

// Metas returns the keys of the records the tier holds.
func (m *MemTier) Metas() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.meta))
}

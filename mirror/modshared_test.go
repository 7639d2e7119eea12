package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/mirror/records"
)

// memTier is a shared tier in memory: archives, records and leases.
type memTier struct {
	mu       sync.Mutex
	archives map[string][]byte
	meta     map[string]json.RawMessage
	leases   map[string]bool
	leased   int // leases granted
}

func newMemTier() *memTier {
	return &memTier{archives: map[string][]byte{}, meta: map[string]json.RawMessage{}, leases: map[string]bool{}}
}

func (m *memTier) OpenArchive(_ context.Context, sha string) (io.ReadCloser, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.archives[sha]
	if !ok {
		return nil, 0, nil
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

func (m *memTier) PutArchive(_ context.Context, sha string, r io.ReadSeeker, _ int64) error {
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
	m  *memTier
	id string
}

func (l memLease) Keep(ctx context.Context) error { <-ctx.Done(); return nil }
func (l memLease) Release(context.Context) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	delete(l.m.leases, l.id)
	return nil
}

func (m *memTier) TryLease(_ context.Context, id string) (SharedLease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leases[id] {
		return nil, nil
	}
	m.leases[id] = true
	m.leased++
	return memLease{m, id}, nil
}

func (m *memTier) GetMeta(_ context.Context, key string) (json.RawMessage, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.meta[key], time.Now(), nil
}

func (m *memTier) PutMeta(_ context.Context, key string, record any) error {
	b, err := json.Marshal(record)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.meta[key] = b
	return nil
}

// Three replicas on one shared tier, ten clients each asking at once for
// a module version none has: one fetch from the Git host; a sealed
// replica with an empty cache then lists and serves it from the tier.
func TestModulesShared(t *testing.T) {
	needGit(t)
	tier := newMemTier()
	first := newHarness(t, harnessOptions{cfg: Config{Shared: tier}})
	o := first.origin
	if _, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# shared\n")}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("vpc")+"?ref=v1.0.0")
	if _, _, err := first.engine.Modules().ModuleVersions(context.Background(), testModule); err != nil {
		t.Fatal(err)
	}
	rs := []*harness{first}
	for range 2 {
		h := &harness{t: t, origin: o}
		h.start(harnessOptions{cfg: Config{Shared: tier}})
		rs = append(rs, h)
	}
	var wg sync.WaitGroup
	bodies := make([][]byte, 30)
	errs := make([]error, 30)
	for i := range bodies {
		h := rs[i%len(rs)]
		wg.Go(func() { _, bodies[i], errs[i] = readModule(t, h, "1.0.0") })
	}
	wg.Wait()
	for i := range bodies {
		if errs[i] != nil || !bytes.Equal(bodies[i], bodies[0]) {
			t.Fatalf("client %d: %v", i, errs[i])
		}
	}
	if n := o.Hits("git"); n != 2 {
		t.Errorf("three replicas made %d Git requests, want the 2 of one fetch", n)
	}
	if len(tier.archives) != 1 || tier.meta[records.ModuleRecordKey(testModule, "1.0.0")] == nil {
		t.Errorf("the tier holds %d packages and records %v", len(tier.archives), tier.meta)
	}

	for _, h := range rs {
		h.waitIdle() // records go to the tier in the background
	}
	o.ResetHits()
	sealed := &harness{t: t, origin: o}
	sealed.start(harnessOptions{cfg: Config{Shared: tier, Offline: true}})
	list, _, err := sealed.engine.Modules().ModuleVersions(context.Background(), testModule)
	if err != nil || len(list.Versions) != 1 {
		t.Fatalf("sealed replica's versions: %+v, %v", list, err)
	}
	if _, b, err := readModule(t, sealed, "1.0.0"); err != nil || !bytes.Equal(b, bodies[0]) {
		t.Fatalf("sealed replica's package: %v", err)
	}
	other := addrs.Module{Hostname: originHost, Namespace: "acme", Name: "other", System: "aws"}
	if _, _, err := sealed.engine.Modules().ModuleVersions(context.Background(), other); err == nil {
		t.Error("the sealed replica listed a module no replica has")
	}
	if n := o.TotalHits(); n != 0 {
		t.Errorf("the sealed replica made %d origin requests", n)
	}
}

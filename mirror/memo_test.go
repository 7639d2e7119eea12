package mirror

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// Version lists are kept decoded in memory; a refresh after the TTL must
// still replace them, and within the TTL the origin is not asked again.
func TestRememberedVersionListIsRefreshed(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	h := newHarness(t, harnessOptions{cfg: Config{
		VersionsTTL: 10 * time.Minute,
		Now:         func() time.Time { return time.Unix(0, now.Load()) },
	}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	listed := func() []string {
		t.Helper()
		list, _, err := h.engine.Versions(context.Background(), h.provider())
		if err != nil {
			t.Fatal(err)
		}
		var vs []string
		for _, e := range list.Versions {
			vs = append(vs, e.Version)
		}
		slices.Sort(vs)
		return vs
	}
	for range 3 {
		if got := listed(); !slices.Equal(got, []string{"1.0.0"}) {
			t.Fatalf("versions %v, want [1.0.0]", got)
		}
	}
	h.origin.AddProvider(ns, typ, []string{"2.0.0"}, platforms)
	if got := listed(); !slices.Equal(got, []string{"1.0.0"}) {
		t.Errorf("within the TTL: versions %v, want the cached [1.0.0]", got)
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != 1 {
		t.Errorf("origin versions hits within the TTL = %d, want 1", n)
	}
	now.Add(int64(11 * time.Minute))
	if got := listed(); !slices.Equal(got, []string{"1.0.0", "2.0.0"}) {
		t.Fatalf("after the TTL: versions %v, want [1.0.0 2.0.0]", got)
	}
	// The cache stamps documents with the real time: back to it, the
	// refreshed list is fresh and must be what is remembered.
	now.Store(time.Now().UnixNano())
	hits := h.origin.Hits(fakeorigin.Versions)
	for range 3 {
		if got := listed(); !slices.Equal(got, []string{"1.0.0", "2.0.0"}) {
			t.Fatalf("after the refresh: versions %v, want [1.0.0 2.0.0]", got)
		}
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != hits {
		t.Errorf("origin versions hits after the refresh grew by %d, want 0", n-hits)
	}
}

// A package record read from memory is shared by concurrent callers, so
// adding platforms to it must work on a copy (the race detector checks),
// and the grown record must be what later callers see.
func TestRememberedPackageRecordGrows(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	open := func(pl string) error {
		a, err := h.engine.OpenArchive(t.Context(), h.provider(), mustVersion(t, "1.0.0"), mustPlatform(t, pl))
		if err != nil {
			return err
		}
		return a.Close()
	}
	// A record with one platform, then read (and remembered) again.
	for range 2 {
		if err := open(platforms[0]); err != nil {
			t.Fatalf("open archive: %v", err)
		}
	}
	var wg sync.WaitGroup
	pkgs := make([]*Package, 4)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				pkg, err := h.packages("1.0.0")
				if err != nil {
					t.Errorf("package: %v", err)
					return
				}
				pkgs[i/2] = pkg
				return
			}
			if err := open(platforms[0]); err != nil {
				t.Errorf("open archive: %v", err)
			}
		}()
	}
	wg.Wait()
	h.waitIdle()
	for i, pkg := range pkgs {
		if pkg != nil && len(pkg.Archives) != len(platforms) {
			t.Errorf("package %d lists %d platforms, want %d", i, len(pkg.Archives), len(platforms))
		}
	}
	// Every platform is now known without asking the origin again.
	hits := h.origin.Hits(fakeorigin.Download)
	for _, pl := range platforms {
		if err := open(pl); err != nil {
			t.Errorf("open %s archive: %v", pl, err)
		}
	}
	h.waitIdle()
	if n := h.origin.Hits(fakeorigin.Download); n != hits {
		t.Errorf("package metadata fetched %d more times, want 0", n-hits)
	}
}

// readCountingStore counts the reads of each record from the cache.
type readCountingStore struct {
	Store
	mu    sync.Mutex
	reads map[string]int
}

func (s *readCountingStore) GetMeta(key string, v any) (time.Time, error) {
	s.mu.Lock()
	s.reads[key]++
	s.mu.Unlock()
	return s.Store.GetMeta(key, v)
}

// since returns the reads of key since the last call for it.
func (s *readCountingStore) since(key string, last map[string]int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.reads[key] - last[key]
	last[key] = s.reads[key]
	return n
}

// A cold archive request reads each of its version's records from the
// cache once, and again only where something may have been stored since:
// the package record after a fetch that stored the version list (an
// import may have set a record aside meanwhile), the version list when it
// is refreshed (the listing before the refresh dates new releases).
func TestColdArchiveReadsEachRecordOnce(t *testing.T) {
	t.Parallel()
	counts := &readCountingStore{reads: map[string]int{}}
	h := newHarness(t, harnessOptions{wrap: func(s Store) Store { counts.Store = s; return counts }})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, platforms)
	p := h.provider()
	last := map[string]int{}
	listKey := "versions/" + p.String()
	pkgKey := func(v string) string { return "package/" + p.String() + "/" + v }

	// Nothing cached: the list is fetched and stored during the fetch.
	if r := h.read(t.Context(), "1.0.0", "linux_amd64"); r.err != nil {
		t.Fatal(r.err)
	}
	if n := counts.since(pkgKey("1.0.0"), last); n > 2 {
		t.Errorf("first request: package record read %d times from the cache, want at most 2", n)
	}
	if n := counts.since(listKey, last); n > 2 {
		t.Errorf("first request: version list read %d times from the cache, want at most 2", n)
	}

	// The list cached and fresh: nothing is stored but the new record,
	// and each record is read once.
	if r := h.read(t.Context(), "2.0.0", "linux_amd64"); r.err != nil {
		t.Fatal(r.err)
	}
	if n := counts.since(pkgKey("2.0.0"), last); n != 1 {
		t.Errorf("package record of a new version read %d times from the cache, want 1", n)
	}
	if n := counts.since(listKey, last); n > 1 {
		t.Errorf("version list read %d times from the cache for a new version, want at most 1", n)
	}

	// Warm: the stored record is read once more (storing it forgot what
	// was remembered), then remembered.
	for i, want := range []int{1, 0} {
		if r := h.read(t.Context(), "2.0.0", "linux_amd64"); r.err != nil {
			t.Fatal(r.err)
		}
		if n := counts.since(pkgKey("2.0.0"), last); n != want {
			t.Errorf("warm request %d: package record read %d times from the cache, want %d", i+1, n, want)
		}
	}
	h.waitIdle()
}

package cache

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// Archives the owner says may not be evicted stay over the limit, and the
// least recently used of the others goes; at Open, Options.Evictable
// decides until SetEvictable is called.
func TestEvictionKeepsWhatMayNotBeEvicted(t *testing.T) {
	const size = testChunk * 3
	dir := t.TempDir()
	var evicted []string
	s := openLimited(t, dir, 10*size, &evicted)
	var blobs [][]byte
	for i := range 4 {
		blobs = append(blobs, randomBytes(size, uint64(300+i)))
		put(t, s, blobs[i])
	}
	s.Close()

	// Reopened with a limit of two archives and nothing evictable yet.
	s, err := Open(Options{Dir: dir, ChunkSize: testChunk, MaxBytes: 2 * size, Evictable: func(string) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.settle()
	if n, _ := s.Stats(); n != 4 {
		t.Fatalf("evicted at Open before the owner said what may go: %d archives left", n)
	}
	keep := map[string]bool{shaOf(blobs[0]): true, shaOf(blobs[1]): true, shaOf(blobs[2]): true}
	s.SetEvictable(func(sha string) bool { return !keep[sha] })
	s.settle()
	for i, b := range blobs {
		if got, want := cached(s, b), i < 3; got != want {
			t.Errorf("blob %d cached = %v, want %v", i, got, want)
		}
	}
}

// EvictBlob never deletes an archive from under a reader.
func TestEvictBlobInUse(t *testing.T) {
	s := openLimited(t, "", 0, new([]string))
	data := randomBytes(testChunk*2, 400)
	put(t, s, data)
	r, err := s.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EvictBlob(shaOf(data)); !errors.Is(err, ErrInUse) {
		t.Errorf("EvictBlob of an open archive: %v, want ErrInUse", err)
	}
	readBlob(t, s, data)
	r.Close()
	info, err := s.EvictBlob(shaOf(data))
	if err != nil || info.Size != int64(len(data)) {
		t.Fatalf("EvictBlob: %+v, %v", info, err)
	}
	if cached(s, data) {
		t.Error("still cached")
	}
	if _, err := s.EvictBlob(shaOf(data)); !errors.Is(err, ErrNotFound) {
		t.Errorf("EvictBlob of a removed archive: %v, want ErrNotFound", err)
	}
}

// EvictBlob removes an archive committed before the store was opened,
// also without a size limit (when the count keeps no entry per archive),
// and still never from under a reader.
func TestEvictBlobAfterReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	data := randomBytes(testChunk*2, 401)
	put(t, s, data)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	r, err := s.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EvictBlob(shaOf(data)); !errors.Is(err, ErrInUse) {
		t.Errorf("EvictBlob of an open archive: %v, want ErrInUse", err)
	}
	r.Close()
	info, err := s.EvictBlob(shaOf(data))
	if err != nil || info.Size != int64(len(data)) {
		t.Fatalf("EvictBlob after a reopen: %+v, %v", info, err)
	}
	if cached(s, data) {
		t.Error("still cached")
	}
	if _, err := s.EvictBlob(shaOf(randomBytes(10, 402))); !errors.Is(err, ErrNotFound) {
		t.Errorf("EvictBlob of an archive never stored: %v, want ErrNotFound", err)
	}
}

// UnlessInUse runs its function only while none of the archives is read
// (ErrInUse otherwise, the function not run), returns the function's
// error, and deletes nothing; the function may commit one of the
// archives again (what waits for an eviction to end would otherwise wait
// for ever on the check); an archive not cached is skipped.
func TestUnlessInUse(t *testing.T) {
	s := openLimited(t, "", 0, new([]string))
	a, b := randomBytes(testChunk*2, 410), randomBytes(testChunk, 411)
	put(t, s, a)
	put(t, s, b)
	absent := shaOf(randomBytes(10, 412))
	shas := []string{shaOf(a), shaOf(b), absent}

	r, err := s.OpenBlob(shaOf(b))
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := s.UnlessInUse(shas, func() error { ran = true; return nil }); !errors.Is(err, ErrInUse) || ran {
		t.Errorf("UnlessInUse with one archive read: %v (ran: %v), want ErrInUse, not run", err, ran)
	}
	r.Close()

	refused := errors.New("the record cannot be changed")
	if err := s.UnlessInUse(shas, func() error { return refused }); !errors.Is(err, refused) {
		t.Errorf("UnlessInUse whose function fails: %v", err)
	}
	readBlob(t, s, a)

	err = s.UnlessInUse(shas, func() error {
		done := make(chan struct{})
		go func() {
			defer close(done)
			put(t, s, a) // a writer of the same archive commits meanwhile
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a writer of an archive UnlessInUse checked waited 10s while its function ran")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("UnlessInUse: %v", err)
	}
	if !cached(s, a) || !cached(s, b) {
		t.Error("UnlessInUse deleted an archive")
	}
	if err := s.UnlessInUse([]string{"not a sha256"}, func() error { t.Error("ran for a bad sha256"); return nil }); err == nil {
		t.Error("UnlessInUse of a bad sha256: no error")
	}
}

// EvictBlob of an archive the size limit is evicting at that moment waits
// for that eviction and reports what it deleted: the archive is gone, as
// the caller asked, and the caller counts its bytes (retention's report
// of a prune), instead of being told it is in use by a reader.
func TestEvictBlobWhileTheSizeLimitEvictsIt(t *testing.T) {
	s, a, release := evictionHeld(t)
	type result struct {
		info BlobInfo
		err  error
	}
	got := make(chan result, 1)
	go func() {
		info, err := s.EvictBlob(shaOf(a))
		got <- result{info, err}
	}()
	select {
	case r := <-got:
		close(release)
		t.Fatalf("EvictBlob returned (%+v, %v) while the eviction of the same archive was under way", r.info, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	r := <-got
	if r.err != nil || r.info.SHA256 != shaOf(a) || r.info.Size != int64(len(a)) {
		t.Errorf("EvictBlob during the size limit's eviction: %+v, %v; want a's info", r.info, r.err)
	}
	if cached(s, a) {
		t.Error("a is still cached")
	}
	if _, err := s.EvictBlob(shaOf(a)); !errors.Is(err, ErrNotFound) {
		t.Errorf("EvictBlob once a is gone: %v, want ErrNotFound", err)
	}
}

// WouldEvict lists what a pass would evict of a cache that evicts
// nothing now, in the pass's order (least recently used first), passing
// over the archives in use, those may refuses and those gone, and counting
// the bytes of gone as freed; it deletes nothing, and a pass then evicts
// what it listed.
func TestWouldEvictListsWhatAPassTakes(t *testing.T) {
	const size = testChunk * 2
	s, err := Open(Options{InMemory: true, ChunkSize: testChunk, MaxBytes: 2 * size, Evictable: func(string) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.waitCount()
	var blobs [][]byte
	for i := range 5 {
		blobs = append(blobs, randomBytes(size, uint64(400+i)))
		put(t, s, blobs[i])
	}
	a, b, c, d, e := shaOf(blobs[0]), shaOf(blobs[1]), shaOf(blobs[2]), shaOf(blobs[3]), shaOf(blobs[4])
	readBlob(t, s, blobs[0]) // a: the most recently used
	reader, err := s.OpenBlob(b)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	all := func(string) bool { return true }
	shas := func(infos []BlobInfo) []string {
		var out []string
		for _, info := range infos {
			if info.Size != size {
				t.Errorf("archive %s listed with size %d, want %d", info.SHA256, info.Size, size)
			}
			out = append(out, info.SHA256)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		gone map[string]int64
		may  func(string) bool
		want []string
	}{
		{"least recently used first, the one in use passed over", nil, all, []string{c, d, e}},
		{"what may not go passed over", nil, func(sha string) bool { return sha != d }, []string{c, e, a}},
		{"what goes first freeing its bytes", map[string]int64{c: size, e: size}, all, []string{d}},
		{"nothing over the limit", map[string]int64{c: size, d: size, e: size}, all, nil},
	} {
		if got := shas(s.WouldEvict(tc.gone, tc.may)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %d archives listed, want %d (%v)", tc.name, len(got), len(tc.want), slices.Equal(got, tc.want))
		}
	}
	if n, _ := s.Stats(); n != 5 {
		t.Fatalf("%d archives left after the listings, want the 5 put", n)
	}
	want := s.WouldEvict(nil, all)
	s.SetEvictable(all)
	s.settle()
	for _, info := range want {
		if _, err := s.StatBlob(info.SHA256); !errors.Is(err, ErrNotFound) {
			t.Errorf("archive %s listed, and not evicted by the pass: %v", info.SHA256, err)
		}
	}
	if n, _ := s.Stats(); n != 2 {
		t.Errorf("%d archives left after the pass, want 2", n)
	}

	unlimited, err := Open(Options{InMemory: true, ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	defer unlimited.Close()
	put(t, unlimited, blobs[0])
	if got := unlimited.WouldEvict(nil, all); got != nil {
		t.Errorf("without a size limit: %d archives listed", len(got))
	}
}

// EvictBlob of an archive that a writer commits while the eviction is
// under way (retention removing a version whose package a client is
// fetching for the first time) leaves the archive to that writer: the
// writer is not yet closed, so the archive is in use, and its clients
// still read it through the writer. EvictBlob says so (ErrInUse), and
// removes it once the writer is closed.
func TestEvictBlobOfAnArchiveCommittedMeanwhile(t *testing.T) {
	s := openLimited(t, "", 0, new([]string))
	data := randomBytes(testChunk*3+5, 402)
	sha := shaOf(data)
	w, err := s.NewBlobWriter(sha)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	follower := w.Follow()
	defer follower.Close()
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}

	claimed, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.hooks.evicting = func(string) {
		once.Do(func() {
			close(claimed)
			<-release
		})
	}
	type result struct {
		info BlobInfo
		err  error
	}
	evicted := make(chan result, 1)
	go func() {
		info, err := s.EvictBlob(sha)
		evicted <- result{info, err}
	}()
	<-claimed // not committed yet: nothing to delete so far
	if _, err := w.Commit("h1:test"); err != nil {
		close(release)
		t.Fatal(err)
	}
	close(release)
	if r := <-evicted; !errors.Is(r.err, ErrInUse) {
		t.Errorf("EvictBlob of an archive committed, its writer open: %+v, %v; want ErrInUse", r.info, r.err)
	}
	if !cached(s, data) {
		t.Error("the archive its writer just committed, and has not closed, is gone")
	}
	got := make([]byte, len(data))
	if n, err := follower.ReadAt(got, 0); err != nil || !bytes.Equal(got[:n], data) {
		t.Errorf("a client of the writer read %d bytes (%v), not the archive", n, err)
	}
	readBlob(t, s, data)

	follower.Close()
	w.Close()
	if info, err := s.EvictBlob(sha); err != nil || info.Size != int64(len(data)) {
		t.Fatalf("EvictBlob once the writer is closed: %+v, %v", info, err)
	}
	if cached(s, data) {
		t.Error("still cached")
	}
	if n, err := RigOf(s).ChunkCount(); err != nil || n != 0 {
		t.Errorf("%d chunks left (%v), want 0", n, err)
	}
	if archives, bytes := s.Stats(); archives != 0 || bytes != 0 {
		t.Errorf("Stats = %d archives, %d bytes; want none", archives, bytes)
	}
}

// The size limit's pass that picks an archive whose entry outlived its
// record (the count at Open enters every archive its snapshot holds, one
// deleted since among them), as a writer stores that archive again, leaves
// it to the writer that commits it meanwhile, and goes on to the next
// least recently used.
func TestEvictionOfAnArchiveCommittedMeanwhile(t *testing.T) {
	const size = testChunk * 4
	var logged logbuf.Buffer
	var mu sync.Mutex
	var evicted []string
	s, err := Open(Options{InMemory: true, ChunkSize: testChunk, MaxBytes: 2 * size,
		Logger:  slog.New(slog.NewTextHandler(&logged, nil)),
		OnEvict: recordEvictions(&mu, &evicted)})
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	t.Cleanup(func() { s.Close() })
	a, b, x := randomBytes(size, 403), randomBytes(size, 404), randomBytes(size, 405)
	put(t, s, a)
	put(t, s, b)
	// The entry the count leaves of x, committed before the store was
	// opened and deleted after the count's snapshot was taken.
	s.evict.lru.add(shaOf(x), time.Unix(1, 0))

	picked, release := make(chan string, 1), make(chan struct{})
	var once sync.Once
	s.hooks.evicting = func(sha string) {
		once.Do(func() {
			picked <- sha
			<-release
		})
	}
	w, err := s.NewBlobWriter(shaOf(x))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	follower := w.Follow()
	defer follower.Close()
	if _, err := w.Write(x); err != nil { // over the limit as it is staged
		t.Fatal(err)
	}
	select {
	case sha := <-picked:
		if sha != shaOf(x) {
			close(release)
			t.Fatalf("evicting %s, want x, the least recently used entry", sha)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no eviction with the archives over the limit")
	}
	if _, err := w.Commit("h1:test"); err != nil {
		close(release)
		t.Fatal(err)
	}
	close(release)
	s.settle()

	if !cached(s, x) {
		t.Error("the archive a writer just committed, and has not closed, was evicted")
	}
	got := make([]byte, len(x))
	if n, err := follower.ReadAt(got, 0); err != nil || !bytes.Equal(got[:n], x) {
		t.Errorf("a client of the writer read %d bytes (%v), not the archive", n, err)
	}
	mu.Lock()
	if len(evicted) != 1 || evicted[0] != shaOf(a) {
		t.Errorf("evicted %d archives (a: %v), want a, the least recently used of those not in use", len(evicted), slices.Contains(evicted, shaOf(a)))
	}
	mu.Unlock()
	if strings.Contains(logged.String(), "evicting archive") {
		t.Errorf("the pass gave up at the archive committed meanwhile:\n%s", logged.String())
	}
	if archives, total := s.Stats(); archives != 2 || total != 2*size {
		t.Errorf("Stats = %d archives, %d bytes; want b and x", archives, total)
	}
}

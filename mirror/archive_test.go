package mirror

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

func TestConcurrentColdDownloadsShareOneFetch(t *testing.T) {
	t.Parallel()
	const clients = 20
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{ArchiveSize: 1 << 20}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	want := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	// Warm the metadata so that all clients race for the archive itself.
	if _, err := h.packages("1.0.0"); err != nil {
		t.Fatal(err)
	}

	joined := make(chan struct{}, clients)
	h.engine.archives.SetHooks(fetch.Hooks{Join: func(string, *fetch.Download) { joined <- struct{}{} }})
	release := h.origin.GateArchives()
	var wg sync.WaitGroup
	results := make([]archive, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = h.read(context.Background(), "1.0.0", "linux_amd64")
		}()
	}
	// The origin holds the download half-way until every client has
	// reached the mirror, so they all overlap with the one fetch.
	for range clients {
		<-joined
	}
	release()
	wg.Wait()

	sources := map[records.Source]int{}
	for i, r := range results {
		if r.err != nil || !bytes.Equal(r.body, want) {
			t.Fatalf("client %d: err %v, %d bytes", i, r.err, len(r.body))
		}
		sources[r.source]++
	}
	if n := h.origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 1 {
		t.Fatalf("origin archive fetches = %d, want exactly 1", n)
	}
	if sources[records.Miss] != 1 || sources[records.Coalesced] != clients-1 {
		t.Errorf("sources %v, want one miss and %d coalesced", sources, clients-1)
	}
}

// The context given to OpenArchive stops that reader, never the download.
func TestReaderHonoursItsContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: Config{HoldBack: 1024}, origin: fakeorigin.Options{ArchiveSize: 1 << 20}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	release := h.origin.GateArchives()
	defer release()

	ctx, cancel := context.WithCancel(context.Background())
	a, err := h.engine.OpenArchive(ctx, h.provider(), mustVersion(t, "1.0.0"), mustPlatform(t, "linux_amd64"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Source != records.Miss || a.Content() != nil {
		t.Fatalf("source %v, seekable %v; want a miss being streamed", a.Source, a.Content() != nil)
	}
	// Read what has arrived (the origin holds the second half back); the
	// next Read waits for more, until the context ends.
	buf := make([]byte, 64<<10)
	first := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		got := 0
		for {
			n, err := a.Read(buf)
			if got == 0 && n > 0 {
				close(first)
			}
			got += n
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case <-first:
	case err := <-errc:
		t.Fatalf("Read while the origin is mid-download: %v", err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after the context ended: %v, want context.Canceled", err)
	}
	a.Close()
	release()
	h.waitCommitted(sha)
	if n := h.origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 1 {
		t.Errorf("origin archive fetches = %d, want 1", n)
	}
}

// A tampered download is never read whole: Read fails, and nothing is cached.
func TestTamperedDownloadFailsReaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.TamperArchive(ns, typ, "1.0.0", "linux_amd64", true)
	want := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")

	r := h.read(context.Background(), "1.0.0", "linux_amd64")
	if !errors.Is(r.err, verify.ErrIntegrity) {
		t.Fatalf("reading a tampered archive: err %v after %d bytes, want an integrity error", r.err, len(r.body))
	}
	if len(r.body) >= len(want) {
		t.Errorf("reader got %d bytes of a %d-byte archive that failed verification", len(r.body), len(want))
	}
	h.waitIdle()
	if _, err := h.store.StatBlob(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("tampered archive in the cache: %v", err)
	}
}

// EnsureArchive caches an archive with no reader, and knows when it is there.
func TestEnsureArchive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	p, v, pl := h.provider(), mustVersion(t, "1.0.0"), mustPlatform(t, "linux_amd64")
	src, err := h.engine.EnsureArchive(t.Context(), p, v, pl)
	if err != nil || src != records.Miss {
		t.Fatalf("first EnsureArchive: %v, %v; want a miss", src, err)
	}
	if _, err := h.store.StatBlob(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")); err != nil {
		t.Fatalf("archive not cached when EnsureArchive returned: %v", err)
	}
	if src, err := h.engine.EnsureArchive(t.Context(), p, v, pl); err != nil || src != records.Hit {
		t.Fatalf("second EnsureArchive: %v, %v; want a hit", src, err)
	}
	r := h.read(t.Context(), "1.0.0", "linux_amd64")
	if r.err != nil || r.source != records.Hit || !bytes.Equal(r.body, h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")) {
		t.Fatalf("reading the ensured archive: %v, source %v", r.err, r.source)
	}

	h.origin.TamperArchive(ns, typ, "1.0.0", "windows_amd64", true)
	if _, err := h.engine.EnsureArchive(t.Context(), p, v, mustPlatform(t, "windows_amd64")); !errors.Is(err, verify.ErrIntegrity) {
		t.Fatalf("EnsureArchive of a tampered archive: %v, want an integrity error", err)
	}
	if _, err := h.engine.EnsureArchive(t.Context(), p, v, mustPlatform(t, "plan9_mips")); !errors.Is(err, records.ErrPlatformNotFound) {
		t.Fatalf("EnsureArchive of a platform the version lacks: %v, want ErrPlatformNotFound", err)
	}
}

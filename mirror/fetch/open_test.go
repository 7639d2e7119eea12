package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

type noCopies struct{}

func (noCopies) Archive(context.Context, string, string, string, func()) (io.ReadCloser, int64, func(context.Context), error) {
	return nil, 0, nil, nil
}
func (noCopies) ShareArchive(context.Context, string, string) {}
func (noCopies) Distrust(string)                              {}

type noOrigin struct{}

func (noOrigin) OpenArchive(context.Context, addrs.Provider, string) (io.ReadCloser, int64, error) {
	return nil, 0, errors.New("no origin")
}

type noMetrics struct{}

func (noMetrics) CacheLookup(string, bool)    {}
func (noMetrics) Coalesced(string)            {}
func (noMetrics) VerificationFailed(string)   {}
func (noMetrics) ArchiveFetchStarted() func() { return func() {} }
func (noMetrics) ArchiveFetchWaiting() func() { return func() {} }
func (noMetrics) CacheWriteFailed()           {}

// blobOf is a Blob whose origin serves data, once release (when not nil)
// is closed.
func blobOf(data []byte, release <-chan struct{}) Blob {
	sum := sha256.Sum256(data)
	return Blob{SHA256: hex.EncodeToString(sum[:]), Filename: "file", Label: "file",
		Open: func(ctx context.Context) (io.ReadCloser, int64, error) {
			if release != nil {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, 0, ctx.Err()
				}
			}
			return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
		}}
}

// idle reports whether the lifetime counts no work within d: whether a
// shutdown would wait for nothing.
func idle(life *lifetime.Lifetime, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return life.Wait(ctx) == nil
}

// newFetcher is a fetcher on an in-memory cache, with no origin and
// nothing beyond the cache, and its cache and lifetime.
func newFetcher(t *testing.T) (*Fetcher, *cache.Store, *lifetime.Lifetime) {
	t.Helper()
	store := memStore(t)
	life := lifetime.New(time.Minute, nil, nil)
	fr, err := New(Config{ArchiveTimeout: time.Minute, MaxArchiveBytes: 1 << 20, HoldBack: 8, Logger: slog.New(slog.DiscardHandler)},
		Parts{Life: life, Copies: noCopies{}}, noOrigin{}, store, noMetrics{})
	if err != nil {
		t.Fatal(err)
	}
	return fr, store, life
}

// An opened archive's work is counted from before the cache is looked in
// until the archive is closed, however it was opened (downloaded or
// cached), and an Open that fails, or whose caller gives up waiting for
// the download, leaves none counted: a shutdown waits for every archive
// handed out, and for nothing else. Once the lifetime is stopped, Open
// fails at once.
func TestOpenCountsTheArchiveWorkOnce(t *testing.T) {
	fr, _, life := newFetcher(t)
	ctx := t.Context()
	data := []byte("the bytes of a file fetched once and then served from the cache")
	b := blobOf(data, nil)

	for _, want := range []records.Source{records.Miss, records.Hit} {
		arc, err := fr.OpenBlob(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if arc.Source != want {
			t.Fatalf("opened from %v, want %v", arc.Source, want)
		}
		if got, err := io.ReadAll(arc); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %q, %v", got, err)
		}
		if idle(life, 50*time.Millisecond) {
			t.Fatalf("an open archive (%v) is not counted as work", want)
		}
		if err := arc.Close(); err != nil {
			t.Fatal(err)
		}
		if !idle(life, 5*time.Second) {
			t.Fatalf("work is still counted once the archive (%v) is closed and its download ended", want)
		}
	}

	failing := blobOf([]byte("another file"), nil)
	failing.Open = func(context.Context) (io.ReadCloser, int64, error) { return nil, 0, errors.New("the origin is down") }
	if _, err := fr.OpenBlob(ctx, failing); err == nil {
		t.Fatal("OpenBlob of a file its origin does not give: no error")
	}
	if !idle(life, 5*time.Second) {
		t.Fatal("a failed Open left work counted")
	}

	release := make(chan struct{})
	slow := blobOf([]byte("a third file, slow to come"), release)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fr.OpenBlob(gone, slow); !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenBlob for a caller gone while the download starts: %v, want context.Canceled", err)
	}
	if idle(life, 50*time.Millisecond) {
		t.Fatal("the download the caller left is not counted as work")
	}
	close(release)
	if !idle(life, 5*time.Second) {
		t.Fatal("work is still counted once the download a caller gave up on ended")
	}

	life.Stop()
	if _, err := fr.OpenBlob(ctx, b); !errors.Is(err, records.ErrShutDown) {
		t.Fatalf("OpenBlob once stopped: %v, want records.ErrShutDown", err)
	}
}

// Import returns with the writer that committed the archive closed,
// whatever the download does after it told its waiters it was done: the
// archive is then the cache's alone, and retention may remove it at
// once. Before, the download let go of its own hold on the writer after
// it told the import, and a prune right after an import could find the
// archive still in use.
func TestImportReturnsWithItsWriterClosed(t *testing.T) {
	fr, store, life := newFetcher(t)
	// The download, once it told its waiters, waits here until the
	// archive was looked at.
	ended, proceed := make(chan struct{}), make(chan struct{})
	fr.SetHooks(Hooks{Done: func() { close(ended); <-proceed }})
	t.Cleanup(func() { close(proceed) })
	data := []byte("the bytes of a file handed in by an import")
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	src := Source{
		Open: func(context.Context) (io.ReadCloser, int64, error) {
			return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
		},
		Check:     func(context.Context, io.ReaderAt, int64) error { return nil },
		Label:     "file",
		LocalOnly: true,
	}
	done := make(chan error, 1)
	go func() {
		imp := life.BeginImport()
		defer imp.End()
		_, _, err := fr.Import(t.Context(), imp, addrs.Provider{}, records.ArchiveRecord{Filename: "file", SHA256: sha}, src)
		done <- err
	}()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the import's download never ended")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Import did not return once its download ended")
	}
	if _, err := store.EvictBlob(sha); err != nil {
		t.Errorf("the archive just imported is still held: %v", err)
	}
}

// memStore is an in-memory cache, closed when the test ends.
func memStore(t *testing.T) *cache.Store {
	t.Helper()
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// TestStoredWaitsForTheCommit: an archive whose origin announced no
// length, read to its end, is in the cache once Stored returns nil, and
// Reopen opens it from there with its length; Stored of a cached archive returns
// at once, and one whose fetch has not ended returns its caller's
// context's error when that ends first.
func TestStoredWaitsForTheCommit(t *testing.T) {
	fr, _, _ := newFetcher(t)
	ctx := t.Context()
	data := []byte("the bytes of a file whose origin announced no length")
	b := blobOf(data, nil)
	open := b.Open
	b.Open = func(ctx context.Context) (io.ReadCloser, int64, error) {
		rc, _, err := open(ctx)
		return rc, -1, err
	}
	arc, err := fr.OpenBlob(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if arc.Source != records.Miss || arc.Size != -1 {
		t.Fatalf("opened from %v with size %d, want a download of no length", arc.Source, arc.Size)
	}
	if got, err := io.ReadAll(arc); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %q, %v", got, err)
	}
	if err := arc.Stored(ctx); err != nil {
		t.Fatalf("Stored of an archive read to its end: %v", err)
	}
	cached, err := arc.Reopen()
	arc.Close()
	if err != nil {
		t.Fatalf("Reopen of the archive Stored said was stored: %v", err)
	}
	defer cached.Close()
	if got, err := io.ReadAll(cached); cached.Size != int64(len(data)) || cached.Content() == nil || err != nil || !bytes.Equal(got, data) {
		t.Errorf("reopened: size %d, seekable %v, read %q, %v; want the cached archive, %d bytes", cached.Size, cached.Content() != nil, got, err, len(data))
	}
	// The same answer to the same caller: fetched, not found cached (the
	// door's X-Tfmirror-Cache, its access log and the origins' hit counts
	// say so).
	if cached.Source != records.Miss {
		t.Errorf("reopened: source %v, want %v, the archive's as opened", cached.Source, records.Miss)
	}
	if cached.Stored(ctx) != nil {
		t.Errorf("Stored of a cached archive: %v", cached.Stored(ctx))
	}
	if _, err := cached.Reopen(); err == nil {
		t.Error("Reopen of an archive opened from the cache: no error")
	}

	// An origin that answers, then sends nothing until released.
	release := make(chan struct{})
	defer close(release)
	stalled := blobOf([]byte("a file slow to come"), nil)
	stalled.Open = func(context.Context) (io.ReadCloser, int64, error) {
		return io.NopCloser(io.MultiReader(bytes.NewReader([]byte("a file ")), waitReader(release))), 19, nil
	}
	slow, err := fr.OpenBlob(ctx, stalled)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := slow.Stored(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stored of an archive still being fetched, its caller's context ended: %v", err)
	}
}

// waitReader blocks until release is closed, then reads the end of a file.
type waitReader <-chan struct{}

func (w waitReader) Read([]byte) (int, error) {
	<-w
	return 0, io.EOF
}

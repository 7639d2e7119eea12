package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// An import interrupted (Ctrl-C, the admin socket's caller gone) while
// its file is read closes the bundle under the fetch that reads it: the
// read fails, and that is the interruption, not a fault of the mirror or
// of the file: the fetch says so at info level, not as a failed fetch at
// error level, and nothing is cached.
func TestInterruptedImportIsNotAFailedFetch(t *testing.T) {
	store := memStore(t)
	var logs logbuf.Buffer
	life := lifetime.New(time.Minute, nil, nil)
	fr, err := New(Config{ArchiveTimeout: time.Minute, MaxArchiveBytes: 1 << 20, HoldBack: 8, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		Parts{Life: life, Copies: noCopies{}}, noOrigin{}, store, noMetrics{})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("the bytes of a file in a bundle "), 1024)
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	ctx, cancel := context.WithCancel(context.Background())
	closed := make(chan struct{}) // the bundle, closed once the import returned
	reading := make(chan struct{})
	src := Source{
		Open: func(context.Context) (io.ReadCloser, int64, error) {
			close(reading)
			<-closed
			return nil, 0, errors.New("statat terraform-provider-x_1.0.0_linux_amd64.zip: file already closed")
		},
		Check: func(context.Context, io.ReaderAt, int64) error { return nil },
		Label: "file", LocalOnly: true,
	}
	imp := life.BeginImport()
	defer imp.End()
	go func() {
		<-reading
		cancel()
	}()
	if _, _, err := fr.Import(ctx, imp, addrs.Provider{}, records.ArchiveRecord{Filename: "file", SHA256: sha}, src); !errors.Is(err, context.Canceled) {
		t.Fatalf("an interrupted import: %v, want context.Canceled", err)
	}
	close(closed)
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	if err := life.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if strings.Contains(out, "level=ERROR") || !strings.Contains(out, "interrupted") {
		t.Errorf("an interrupted import's fetch logged:\n%s\nwant one line at info level saying it was interrupted", out)
	}
	if _, err := store.StatBlob(sha); err == nil {
		t.Error("the file of an interrupted import was cached")
	}
}

// fullStore is a cache whose writes fail as a disk below its reserve
// fails them: every staged archive's commit.
type fullStore struct{ *cache.Store }

func (s fullStore) NewBlobWriter(sha string) (cache.BlobWriter, error) {
	w, err := s.Store.NewBlobWriter(sha)
	return fullWriter{w}, err
}

type fullWriter struct{ cache.BlobWriter }

func (fullWriter) Commit(string) (cache.BlobInfo, error) {
	return cache.BlobInfo{}, fmt.Errorf("%w: free disk space below the reserve (--disk-reserve)", cache.ErrNotWritable)
}

// An import whose verified file the cache cannot store (a disk below its
// reserve) says why: the cache's refusal, where it had said only that
// the archive was "not found in cache" after it was verified.
func TestImportNotStoredSaysWhy(t *testing.T) {
	life := lifetime.New(time.Minute, nil, nil)
	fr, err := New(Config{ArchiveTimeout: time.Minute, MaxArchiveBytes: 1 << 20, HoldBack: 8, Logger: slog.New(slog.DiscardHandler)},
		Parts{Life: life, Copies: noCopies{}}, noOrigin{}, fullStore{memStore(t)}, noMetrics{})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("the bytes of a file in a bundle "), 64)
	sum := sha256.Sum256(data)
	src := Source{
		Open: func(context.Context) (io.ReadCloser, int64, error) {
			return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
		},
		Check: func(context.Context, io.ReaderAt, int64) error { return nil },
		Label: "file", LocalOnly: true,
	}
	imp := life.BeginImport()
	defer imp.End()
	_, _, err = fr.Import(t.Context(), imp, addrs.Provider{}, records.ArchiveRecord{Filename: "file", SHA256: hex.EncodeToString(sum[:])}, src)
	if !errors.Is(err, cache.ErrNotWritable) || !strings.Contains(err.Error(), "below the reserve") {
		t.Errorf("an import the cache cannot store: %v, want the cache's refusal", err)
	}
}

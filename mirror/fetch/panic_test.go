package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
)

// panicsAfter gives n bytes, then panics, as a bug met on an origin's
// archive would.
type panicsAfter struct{ n int }

func (r *panicsAfter) Read(p []byte) (int, error) {
	if r.n == 0 {
		var m map[string]int
		m["a file of the archive"]++ // assignment to entry in nil map
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

// A download that panics (a bug of the mirror's, on its own goroutine,
// which no handler's recovery reaches) fails for its callers: the
// process, serving every other client, goes on. The panic is logged at
// error with its stack and the file's name, nothing is cached, the
// download leaves the work a shutdown waits for, and the file is
// downloaded anew when asked again.
func TestDownloadThatPanicsFailsItsCallers(t *testing.T) {
	store := memStore(t)
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	life := lifetime.New(time.Minute, nil, log)
	fr, err := New(Config{ArchiveTimeout: time.Minute, MaxArchiveBytes: 1 << 20, HoldBack: 8, Logger: log},
		Parts{Life: life, Copies: noCopies{}}, noOrigin{}, store, noMetrics{})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("the bytes of a file whose download meets a bug")
	b := blobOf(data, nil)
	good := b.Open
	b.Open = func(context.Context) (io.ReadCloser, int64, error) {
		return io.NopCloser(&panicsAfter{n: 10}), int64(len(data)), nil
	}
	arc, err := fr.OpenBlob(t.Context(), b)
	if err == nil {
		_, err = io.ReadAll(arc)
		arc.Close()
	}
	if !errors.Is(err, workgroup.ErrPanicked) {
		t.Fatalf("a download that panicked: %v, want workgroup.ErrPanicked", err)
	}
	out := logged.String()
	for _, want := range []string{"level=ERROR", "nil map", "file=file", "panic_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}
	if !idle(life, 5*time.Second) {
		t.Fatal("the download that panicked is still counted as work")
	}
	if _, err := store.StatBlob(b.SHA256); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("the file whose download panicked is in the cache: %v", err)
	}
	b.Open = good
	arc, err = fr.OpenBlob(t.Context(), b)
	if err != nil {
		t.Fatalf("the file asked again: %v", err)
	}
	defer arc.Close()
	if got, err := io.ReadAll(arc); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the file asked again: %q, %v", got, err)
	}
}

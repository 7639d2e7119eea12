package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// brokenCopies has every archive but held's, and breaks off after its
// first bytes.
type brokenCopies struct {
	noCopies
	held string
}

func (c brokenCopies) Archive(_ context.Context, sha, _, _ string, _ func()) (io.ReadCloser, int64, func(context.Context), error) {
	if sha == c.held {
		return nil, 0, nil, nil
	}
	return io.NopCloser(io.MultiReader(bytes.NewReader([]byte("some bytes")), errReader{})), 1000, nil, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("the shared store broke off") }

// gatedOrigin holds the archive at URL held until its context ends, and
// counts the opens of any other.
type gatedOrigin struct {
	held   string
	others atomic.Int64
}

func (o *gatedOrigin) OpenArchive(ctx context.Context, _ addrs.Provider, url string) (io.ReadCloser, int64, error) {
	if url == o.held {
		<-ctx.Done()
		return nil, 0, ctx.Err()
	}
	o.others.Add(1)
	return nil, 0, errors.New("not served")
}

type waitingMetrics struct {
	noMetrics
	waiting atomic.Int64
}

func (m *waitingMetrics) ArchiveFetchWaiting() func() {
	m.waiting.Add(1)
	return func() { m.waiting.Add(-1) }
}

// A download from the shared tier that broke off and goes on from the
// origin is a download from an origin: it waits for one of the
// MaxDownloads slots like any other, and the origin is not asked for it
// while they are all taken.
func TestResumeFromOriginTakesASlot(t *testing.T) {
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	life := lifetime.New(time.Minute, nil)
	t.Cleanup(func() { life.Stop(); life.Cancel(); idle(life, time.Minute) })
	held := records.ArchiveRecord{Filename: "held.zip", SHA256: string(bytes.Repeat([]byte("a"), 64)), URL: "held"}
	resumed := records.ArchiveRecord{Filename: "resumed.zip", SHA256: string(bytes.Repeat([]byte("b"), 64)), URL: "resumed"}
	origin := &gatedOrigin{held: held.URL}
	met := &waitingMetrics{}
	fr, err := New(Config{ArchiveTimeout: time.Minute, MaxArchiveBytes: 1 << 20, MaxDownloads: 1, Logger: slog.New(slog.DiscardHandler)},
		Parts{Life: life, Copies: brokenCopies{held: held.SHA256}}, origin, store, met)
	if err != nil {
		t.Fatal(err)
	}
	p := addrs.Provider{Hostname: "example.com", Namespace: "ns", Type: "t"}
	f1, _, err := fr.join(p, held) // takes the one slot, held by its origin
	if err != nil {
		t.Fatal(err)
	}
	defer f1.release()
	for deadline := time.Now().Add(time.Minute); len(fr.slots) != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first download took no slot")
		}
	}
	f2, _, err := fr.join(p, resumed)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.release()
	for deadline := time.Now().Add(time.Minute); met.waiting.Load() == 0; time.Sleep(time.Millisecond) {
		if n := origin.others.Load(); n != 0 {
			t.Fatalf("the origin was asked for the rest of an archive %d times while the one slot was taken", n)
		}
		if time.Now().After(deadline) {
			t.Fatal("the resumed download neither waited for a slot nor asked the origin")
		}
	}
}

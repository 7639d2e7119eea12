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
	held := records.ArchiveRecord{Filename: "held.zip", SHA256: string(bytes.Repeat([]byte("a"), 64)), URL: "held"}
	resumed := records.ArchiveRecord{Filename: "resumed.zip", SHA256: string(bytes.Repeat([]byte("b"), 64)), URL: "resumed"}
	origin := &gatedOrigin{held: held.URL}
	met := &waitingMetrics{}
	behindTheSlot(t, brokenCopies{held: held.SHA256}, origin, met, held, resumed)
	for deadline := time.Now().Add(time.Minute); met.waiting.Load() == 0; time.Sleep(time.Millisecond) {
		if n := origin.others.Load(); n != 0 {
			t.Fatalf("the origin was asked for the rest of an archive %d times while the one slot was taken", n)
		}
		if time.Now().After(deadline) {
			t.Fatal("the resumed download neither waited for a slot nor asked the origin")
		}
	}
}

// leasingCopies grants the shared tier's lease on every archive but
// held's (which the tier neither has nor leases), counting the leases
// it holds and the times it was asked for leased.
type leasingCopies struct {
	noCopies
	held, leased string
	asked        atomic.Int64 // Archive calls for leased
	holding      atomic.Int64 // leases granted and not released
}

func (c *leasingCopies) Archive(_ context.Context, sha, _, _ string, _ func()) (io.ReadCloser, int64, func(context.Context), error) {
	if sha != c.leased {
		return nil, 0, nil, nil
	}
	c.asked.Add(1)
	c.holding.Add(1)
	var once atomic.Bool
	return nil, 0, func(context.Context) {
		if once.CompareAndSwap(false, true) {
			c.holding.Add(-1)
		}
	}, nil
}

// releasedOrigin holds the archive at URL held until released is
// closed, then fails it; it fails any other at once, counting the opens
// made while copies held a lease.
type releasedOrigin struct {
	held       string
	released   chan struct{}
	copies     *leasingCopies
	opens      atomic.Int64
	openLeased atomic.Int64
}

func (o *releasedOrigin) OpenArchive(ctx context.Context, _ addrs.Provider, url string) (io.ReadCloser, int64, error) {
	if url == o.held {
		select {
		case <-o.released:
		case <-ctx.Done():
		}
		return nil, 0, errors.New("not served")
	}
	o.opens.Add(1)
	if o.copies.holding.Load() > 0 {
		o.openLeased.Add(1)
	}
	return nil, 0, errors.New("not served")
}

// A download waiting for one of this replica's download slots holds no
// lease of the shared tier's: another replica asking for the same
// archive would otherwise wait (up to the tier's holder wait) behind
// this replica's queue. It asks the tier again once it has a slot, and
// downloads from the origin under the lease then.
func TestQueuedDownloadHoldsNoSharedLease(t *testing.T) {
	held := records.ArchiveRecord{Filename: "held.zip", SHA256: string(bytes.Repeat([]byte("a"), 64)), URL: "held"}
	queued := records.ArchiveRecord{Filename: "queued.zip", SHA256: string(bytes.Repeat([]byte("b"), 64)), URL: "queued"}
	copies := &leasingCopies{held: held.SHA256, leased: queued.SHA256}
	origin := &releasedOrigin{held: held.URL, released: make(chan struct{}), copies: copies}
	met := &waitingMetrics{}
	f2 := behindTheSlot(t, copies, origin, met, held, queued)
	for deadline := time.Now().Add(time.Minute); met.waiting.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second download did not wait for a slot")
		}
	}
	if n := copies.holding.Load(); n != 0 {
		t.Fatalf("a download waiting for a slot holds %d shared leases, want none", n)
	}
	close(origin.released) // the first download ends, its slot free
	<-f2.done
	if n := origin.opens.Load(); n != 1 {
		t.Fatalf("the origin was asked for the queued archive %d times, want 1", n)
	}
	if origin.openLeased.Load() != 1 {
		t.Fatal("the queued archive was downloaded from the origin without the shared lease")
	}
	if n := copies.asked.Load(); n != 2 {
		t.Fatalf("the shared tier was asked for the queued archive %d times, want 2 (before the wait and with the slot)", n)
	}
	for deadline := time.Now().Add(time.Minute); copies.holding.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d shared leases left held after the download ended", copies.holding.Load())
		}
	}
}

// behindTheSlot starts, on a fetcher of one download slot over copies
// and origin, the download of held (which takes the slot and keeps it
// while origin holds it), then that of next, which it returns (both let
// go of when the test ends).
func behindTheSlot(t *testing.T, copies Copies, origin Origin, met Metrics, held, next records.ArchiveRecord) *Download {
	t.Helper()
	_, f2 := behindTheSlotOf(t, copies, origin, met, held, next)
	return f2
}

// behindTheSlotOf is behindTheSlot, returning the fetcher too.
func behindTheSlotOf(t *testing.T, copies Copies, origin Origin, met Metrics, held, next records.ArchiveRecord) (*Fetcher, *Download) {
	t.Helper()
	store := memStore(t)
	life := lifetime.New(time.Minute, nil, nil)
	t.Cleanup(func() { life.Stop(); life.Cancel(); idle(life, time.Minute) })
	fr, err := New(Config{ArchiveTimeout: time.Minute, MaxArchiveBytes: 1 << 20, MaxDownloads: 1, Logger: slog.New(slog.DiscardHandler)},
		Parts{Life: life, Copies: copies}, origin, store, met)
	if err != nil {
		t.Fatal(err)
	}
	p := addrs.Provider{Hostname: "example.com", Namespace: "ns", Type: "t"}
	f1, _, err := fr.join(p, held) // takes the one slot, held by its origin
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f1.release)
	for deadline := time.Now().Add(time.Minute); len(fr.slots) != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first download took no slot")
		}
	}
	f2, _, err := fr.join(p, next)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f2.release)
	return fr, f2
}

// leasedElsewhereCopies grants the shared tier's lease on leased the
// first time it is asked; asked again, it finds another replica holding
// the lease and waits (calling onWait, as the tier does) until other is
// closed, then finds nothing: the other replica gave up. It has no other
// archive.
type leasedElsewhereCopies struct {
	noCopies
	leased  string
	other   chan struct{}
	waiting chan struct{} // closed once it waits for the other replica
	asked   atomic.Int64
}

func (c *leasedElsewhereCopies) Archive(ctx context.Context, sha, _, _ string, onWait func()) (io.ReadCloser, int64, func(context.Context), error) {
	if sha != c.leased {
		return nil, 0, nil, nil
	}
	if c.asked.Add(1) == 1 {
		return nil, 0, func(context.Context) {}, nil
	}
	if onWait != nil {
		onWait()
	}
	close(c.waiting)
	select {
	case <-c.other:
	case <-ctx.Done():
	}
	return nil, 0, nil, nil
}

// openedOrigin holds the archive at URL held until released is closed;
// it fails every other at once, saying which it was asked for on opened.
type openedOrigin struct {
	held     string
	released chan struct{}
	opened   chan string
}

func (o *openedOrigin) OpenArchive(ctx context.Context, _ addrs.Provider, url string) (io.ReadCloser, int64, error) {
	if url == o.held {
		select {
		case <-o.released:
		case <-ctx.Done():
		}
	} else {
		o.opened <- url
	}
	return nil, 0, errors.New("not served")
}

// A queued download that, once it has a slot, finds another replica
// downloading the archive waits for that replica without the slot: this
// replica's other downloads go on meanwhile, where they would wait up to
// the tier's holder wait behind it.
func TestDownloadWaitingForAnotherReplicaHoldsNoSlot(t *testing.T) {
	held := records.ArchiveRecord{Filename: "held.zip", SHA256: string(bytes.Repeat([]byte("a"), 64)), URL: "held"}
	queued := records.ArchiveRecord{Filename: "queued.zip", SHA256: string(bytes.Repeat([]byte("b"), 64)), URL: "queued"}
	other := records.ArchiveRecord{Filename: "other.zip", SHA256: string(bytes.Repeat([]byte("c"), 64)), URL: "other"}
	copies := &leasedElsewhereCopies{leased: queued.SHA256, other: make(chan struct{}), waiting: make(chan struct{})}
	origin := &openedOrigin{held: held.URL, released: make(chan struct{}), opened: make(chan string, 3)}
	met := &waitingMetrics{}
	fr, f2 := behindTheSlotOf(t, copies, origin, met, held, queued)
	for deadline := time.Now().Add(time.Minute); met.waiting.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second download did not wait for a slot")
		}
	}
	close(origin.released) // the first download ends: the queued one takes its slot and asks the tier again
	select {
	case <-copies.waiting:
	case <-time.After(time.Minute):
		t.Fatal("the queued download did not ask the shared tier again once it had a slot")
	}
	p := addrs.Provider{Hostname: "example.com", Namespace: "ns", Type: "t"}
	f3, _, err := fr.join(p, other)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f3.release)
	select {
	case url := <-origin.opened:
		if url != other.URL {
			t.Fatalf("the origin was asked for %q, want %q", url, other.URL)
		}
	case <-time.After(time.Minute):
		t.Fatal("another archive's download waited for the slot of a download waiting for another replica")
	}
	close(copies.other) // the other replica gives up: the queued download takes a slot and asks the origin
	<-f2.done
	if url := <-origin.opened; url != queued.URL {
		t.Fatalf("the origin was asked for %q, want %q", url, queued.URL)
	}
}

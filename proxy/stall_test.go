package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/httpserve"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// archiveObserver keeps the observed archive requests.
type archiveObserver struct {
	mu   sync.Mutex
	seen []observedRequest
}

type observedRequest struct {
	code  int
	bytes int64
	end   time.Time
}

func (o *archiveObserver) ObserveRequest(route string, code int, _ time.Duration, bytes int64, _ bool) {
	if route != "archive" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, observedRequest{code: code, bytes: bytes, end: time.Now()})
}

func (o *archiveObserver) requests() []observedRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]observedRequest(nil), o.seen...)
}

// TestStalledArchiveReaderCutOff: through the front door as the process
// serves it (internal/httpserve), a client that asks for an archive being
// downloaded and never reads it is cut off once the mirror's writes to it
// have waited the stall bound, while the download goes on: a second
// client of the same archive gets all of it, verified, and the archive is
// cached. The stalled client is counted as served (200, the status it
// was sent), not as a server error, and nothing is logged as an error.
// Before, its handler waited in its write for good, holding the
// connection and the archive's reader (and Shutdown waiting on it).
func TestStalledArchiveReaderCutOff(t *testing.T) {
	t.Parallel()
	const (
		stall = 500 * time.Millisecond
		size  = 16 << 20 // more than the socket buffers of a client that reads nothing take
		rate  = 4 << 20  // the origin sends it in some 4 s: the stalled client is cut off well before
	)
	logs := &observed.Logs{}
	h := newHarness(t, harnessOptions{cfg: Config{Logger: slog.New(logs)}, engine: mirror.Config{Logger: slog.New(logs)}})
	const version, pl = "1.0.0", "linux_amd64"
	h.origin.AddProvider(ns, typ, []string{version}, []string{pl})
	h.origin.SetArchiveBytes(ns, typ, version, pl, enginetest.ZipOfSize(t, typ, size, 1))
	want := h.origin.SHA256(ns, typ, version, pl)
	h.origin.SetArchiveRate(rate)

	obs := &archiveObserver{}
	srv := httpserve.NewWriteStall(Instrument(h.server, slog.New(logs), obs), nil, stall)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	// The stalled client asks first, so that the download is its.
	stalled, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fmt.Fprintf(stalled, "GET %s HTTP/1.1\r\nHost: mirror\r\n\r\n", archivePath(version, pl))
	asked := time.Now()
	for deadline := time.Now().Add(30 * time.Second); h.origin.ArchiveHits(ns, typ, version, pl) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the mirror did not ask the origin for the archive")
		}
	}

	type result struct {
		status int
		body   []byte
		err    error
		end    time.Time
	}
	done := make(chan result, 1)
	go func() {
		c := &http.Client{Timeout: time.Minute}
		resp, err := c.Get("http://" + ln.Addr().String() + archivePath(version, pl))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		done <- result{status: resp.StatusCode, body: body, err: err, end: time.Now()}
	}()
	var reader result
	select {
	case reader = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the reading client did not get the archive")
	}
	sum := sha256.Sum256(reader.body)
	if reader.err != nil || reader.status != http.StatusOK || hex.EncodeToString(sum[:]) != want {
		t.Fatalf("the reading client got %d, %d bytes of sha256 %x (%v), want the archive of sha256 %s", reader.status, len(reader.body), sum, reader.err, want)
	}

	// The stalled client's connection was closed: reading it now ends
	// short of the archive, not with the client's own timeout.
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, stalled)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the stalled client's connection is still open after %d bytes", n)
	}
	if n >= size {
		t.Fatalf("the stalled client got %d bytes, all of the archive", n)
	}

	// Both were counted, as served; the stalled one ended first, while
	// the download went on.
	var seen []observedRequest
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if seen = obs.requests(); len(seen) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("archive requests observed %+v; the reader got the archive at %v, %v after the stalled client asked", seen, reader.end, reader.end.Sub(asked))
	if len(seen) != 2 {
		t.Fatalf("%d archive requests observed, want 2: %+v", len(seen), seen)
	}
	for _, s := range seen {
		if s.code != http.StatusOK {
			t.Errorf("an archive request was counted with status %d, want 200: %+v", s.code, seen)
		}
	}
	if first := seen[0]; first.bytes >= size || !first.end.Before(reader.end) {
		t.Errorf("the stalled client was not cut off before the download ended: %+v (the reader ended at %v)", seen, reader.end)
	}
	h.waitCommitted(want)
	if hits := h.origin.ArchiveHits(ns, typ, version, pl); hits != 1 {
		t.Errorf("the origin was asked for the archive %d times, want 1", hits)
	}
	for _, r := range logs.AtLeast(slog.LevelError) {
		t.Errorf("logged at %v: %s", r.Level, r.Message)
	}
}

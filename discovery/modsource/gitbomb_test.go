package modsource

import (
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// endlessRepo is a Git smart-HTTP server for one repository whose pack
// never ends: one blob declared as 10 GiB, of incompressible bytes. It
// counts the bytes of pack it managed to send.
type endlessRepo struct {
	*fakeGit
	sent atomic.Int64
	done chan struct{} // closed when the pack's sender has stopped
}

const endlessCommit = "0123456789abcdef0123456789abcdef01234567"

func newEndlessRepo() *endlessRepo {
	e := &endlessRepo{fakeGit: oneTagGit(endlessCommit, nil), done: make(chan struct{})}
	e.sendPack = e.endlessPack
	return e
}

// endlessPack streams the 10 GiB blob's pack to w until the client
// hangs up.
func (e *endlessRepo) endlessPack(w io.Writer, r *http.Request) {
	defer close(e.done)
	counted := &countingWriter{w: w, n: &e.sent}
	counted.Write([]byte("PACK"))
	binary.Write(counted, binary.BigEndian, uint32(2))
	binary.Write(counted, binary.BigEndian, uint32(1))
	// A blob of 10 GiB: type 3, size in 4 + 7*n bits.
	size := uint64(10 << 30)
	hdr := []byte{0x30 | byte(size&0x0f) | 0x80}
	for size >>= 4; size != 0; size >>= 7 {
		c := byte(size & 0x7f)
		if size>>7 != 0 {
			c |= 0x80
		}
		hdr = append(hdr, c)
	}
	counted.Write(hdr)
	zw, _ := zlib.NewWriterLevel(counted, zlib.NoCompression)
	rng := rand.NewChaCha8([32]byte{7})
	buf := make([]byte, 64<<10)
	for total := int64(0); total < 10<<30; total += int64(len(buf)) {
		rng.Read(buf)
		if _, err := zw.Write(buf); err != nil {
			return // the client hung up
		}
		if r.Context().Err() != nil {
			return
		}
	}
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// A Git repository "of 10 GiB": the fetch stops once it has received
// about --module-max-bytes, and the server stops sending soon after, far
// short of the 10 GiB.
func TestFetchGitStopsAtTheDownloadLimit(t *testing.T) {
	repo := newEndlessRepo()
	srv := httptest.NewTLSServer(repo)
	defer srv.Close()
	limits := defaultLimits
	limits.MaxDownloadBytes = 4 << 20
	f := &Fetcher{HTTP: srv.Client(), Limits: limits, TempDir: t.TempDir()}
	a, err := Parse("git::" + srv.URL + "/huge.git?ref=v1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Fetch(context.Background(), a, io.Discard)
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "bytes to download") {
		t.Fatalf("endless pack: %v, want a LimitError about the download", err)
	}
	select {
	case <-repo.done:
	case <-time.After(time.Minute):
		t.Fatalf("the server was still sending a minute after the fetch gave up (%d bytes sent)", repo.sent.Load())
	}
	// What the kernel's socket buffers took besides the limit.
	sent := repo.sent.Load()
	t.Logf("pack bytes sent by the server: %d (limit %d)", sent, limits.MaxDownloadBytes)
	if sent < limits.MaxDownloadBytes || sent > limits.MaxDownloadBytes+32<<20 {
		t.Errorf("the server sent %d bytes of pack; want about the %d-byte limit", sent, limits.MaxDownloadBytes)
	}
}

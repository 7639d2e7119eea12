package proxy

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
)

// A client that closes its side of the connection for writing once it
// has sent its request (a TCP proxy in front passing on a half-close)
// still reads: net/http ends the request's context then, as for a client
// gone. An archive streamed of no stated length must then not end with
// the chunked encoding's clean end: the client would hold part of the
// archive as if whole. Its client went away for the mirror: the
// response broken off is not counted as one the mirror broke off.
func TestHalfClosedClientNeverGetsCleanEndOfShortArchive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{ArchiveSize: 1 << 20}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.SetArchiveLengthHidden(true)
	release := h.origin.GateArchives()
	defer release()

	obs := &observed.Requests{}
	srv := httptest.NewServer(Instrument(h.server, slog.New(slog.DiscardHandler), obs))
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: mirror\r\n\r\n", archivePath("1.0.0", "linux_amd64"))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength != -1 {
		t.Fatalf("status %d, Content-Length %d: want 200 of no stated length", resp.StatusCode, resp.ContentLength)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	h.origin.WaitArchiveStarted()
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("the response ended cleanly after %d bytes of an archive of %d: the client holds a truncated archive as if whole",
			64<<10+len(got), len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")))
	}
	release()
	h.waitIdle()
	for deadline := time.Now().Add(time.Minute); len(obs.Seen()) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := obs.Seen(); len(got) != 1 || got[0].Aborted {
		t.Errorf("requests observed as aborted: %v, want one, not aborted (its client went away)", got)
	}
}

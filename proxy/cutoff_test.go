package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// An archive streamed while it downloads from an origin that states no
// length goes to the client chunked. When the mirror's shutdown cuts the
// request off (httperr.ErrCutOff) the client must see a broken transfer,
// not a clean end of a shorter body: only a broken transfer tells it that
// the bytes it holds are not the archive (the access log calls such a
// response aborted, see recorder.cutOff).
func TestCutOffArchiveOfNoStatedLengthIsBroken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{ArchiveSize: 1 << 20}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.SetArchiveLengthHidden(true)
	release := h.origin.GateArchives()
	defer release()

	// The mirror served as serve does: the requests' contexts end only
	// when the shutdown cuts them off.
	base, cutOff := context.WithCancelCause(context.Background())
	defer cutOff(nil)
	srv := httptest.NewUnstartedServer(h.server)
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL + archivePath("1.0.0", "linux_amd64"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength != -1 {
		t.Fatalf("status %d, Content-Length %d: want 200 of no stated length", resp.StatusCode, resp.ContentLength)
	}
	// Part of the archive reached the client; the origin is mid-download.
	if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	cutOff(httperr.ErrCutOff)
	got, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("the cut-off response ended cleanly after %d bytes of an archive of %d: the client holds a truncated archive as if whole",
			64<<10+len(got), len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")))
	}
	release()
	h.waitIdle()
}

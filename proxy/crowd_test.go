package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// crowdClient is one client of an archive being downloaded: its response
// (headers read) and, once read, its body.
type crowdClient struct {
	cancel context.CancelFunc
	resp   *http.Response
	body   []byte
	err    error
}

// A crowd asks for one cold archive at once: the origin is asked once,
// the first client (whose request started the download) going away
// halfway through neither stops the download nor restarts it, every
// other client gets the archive's verified bytes whole, the archive is
// cached, and no request is counted or logged as a server error.
func TestCrowdOfClientsFirstGoesAway(t *testing.T) {
	t.Parallel()
	const clients = 100
	logs := &observed.Logs{}
	h := newHarness(t, harnessOptions{cfg: Config{Logger: slog.New(logs)}, engine: mirror.Config{Logger: slog.New(logs), HoldBack: 1024}})
	const version, pl = "1.0.0", "linux_amd64"
	want, release := gatedArchive(t, h, 1<<20, 7)
	defer release()

	obs := &observed.Requests{}
	front := httptest.NewServer(Instrument(h.server, slog.New(logs), obs))
	defer front.Close()
	client := front.Client()
	open := func() *crowdClient {
		ctx, cancel := context.WithCancel(context.Background())
		c := &crowdClient{cancel: cancel}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+archivePath(version, pl), nil)
		c.resp, c.err = client.Do(req)
		return c
	}

	first := open()
	if first.err != nil || first.resp.StatusCode != http.StatusOK {
		t.Fatalf("first client: %v", first.err)
	}
	h.origin.WaitArchiveStarted()
	// The first client has bytes of the first half.
	head := make([]byte, 1000)
	if _, err := io.ReadFull(first.resp.Body, head); err != nil {
		t.Fatalf("first client's first bytes: %v", err)
	}

	others := make([]*crowdClient, clients-1)
	var wg sync.WaitGroup
	for i := range others {
		wg.Add(1)
		go func() { defer wg.Done(); others[i] = open() }()
	}
	wg.Wait()
	for i, c := range others {
		if c.err != nil || c.resp.StatusCode != http.StatusOK {
			t.Fatalf("client %d: %v", i+1, c.err)
		}
	}
	// The first client goes away halfway.
	first.cancel()
	first.resp.Body.Close()
	release()

	for i, c := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.resp.Body.Close()
			c.body, c.err = io.ReadAll(c.resp.Body)
			if c.err != nil || !bytes.Equal(c.body, want) {
				t.Errorf("client %d: %d of %d bytes, err %v", i+1, len(c.body), len(want), c.err)
			}
		}()
	}
	wg.Wait()
	h.waitCommitted(h.origin.SHA256(ns, typ, version, pl))
	if n := h.origin.ArchiveHits(ns, typ, version, pl); n != 1 {
		t.Errorf("the origin was asked for the archive %d times, want 1", n)
	}
	front.Close() // every handler has returned
	for _, code := range obs.Codes() {
		if code >= 500 {
			t.Errorf("a request counted with status %d", code)
		}
	}
	for _, r := range logs.AtLeast(slog.LevelWarn) {
		t.Errorf("logged at %v: %s", r.Level, r.Message)
	}
}

// Every client of an archive being downloaded goes away: the download
// goes on without them and the archive is cached (docs/how-it-works.md),
// and the next client is served from the cache without a new origin
// download.
func TestEveryClientGoneDownloadStillCached(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	const version, pl = "1.0.0", "linux_amd64"
	want, release := gatedArchive(t, h, 1<<20, 3)
	defer release()

	var cancels []context.CancelFunc
	var bodies []io.Closer
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := h.openArchive(ctx, version, pl)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("client: %v", err)
		}
		cancels = append(cancels, cancel)
		bodies = append(bodies, resp.Body)
	}
	h.origin.WaitArchiveStarted()
	for i := range cancels {
		cancels[i]()
		bodies[i].Close()
	}
	release()
	h.waitCommitted(h.origin.SHA256(ns, typ, version, pl))
	r := h.get(archivePath(version, pl))
	if r.status != http.StatusOK || !bytes.Equal(r.body, want) || r.header.Get("X-Tfmirror-Cache") != "hit" {
		t.Fatalf("after every client left: status %d, %d bytes, cache %q", r.status, len(r.body), r.header.Get("X-Tfmirror-Cache"))
	}
	if n := h.origin.ArchiveHits(ns, typ, version, pl); n != 1 {
		t.Errorf("the origin was asked for the archive %d times, want 1", n)
	}
}

// HEAD and a range request for an archive being downloaded: the HEAD
// waits for the download's outcome and gets the archive's headers and
// length once it is verified (never a 200 for an archive then refused:
// TestHeadOfARefusedArchive), the range request an answer its client can
// take (the whole archive, 200, or the range, 206), never bytes of a
// response that claims to be what it is not.
func TestHeadAndRangeDuringDownload(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	const version, pl = "1.0.0", "linux_amd64"
	want, release := gatedArchive(t, h, 1<<20, 5)
	defer release()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := h.openArchive(ctx, version, pl)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h.origin.WaitArchiveStarted()

	heads := make(chan response, 1)
	go func() { heads <- h.do(ctx, http.MethodHead, archivePath(version, pl)) }()
	done := make(chan response, 1)
	go func() { done <- h.do(ctx, http.MethodGet, archivePath(version, pl), "Range", "bytes=100-199") }()
	select {
	case head := <-heads:
		t.Fatalf("HEAD answered %d before the download ended", head.status)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	head := <-heads
	if head.status != http.StatusOK || head.header.Get("Content-Length") != strconv.Itoa(len(want)) || len(head.body) != 0 {
		t.Errorf("HEAD during the download: status %d, Content-Length %q, want 200 and %d", head.status, head.header.Get("Content-Length"), len(want))
	}
	rg := <-done
	switch rg.status {
	case http.StatusOK:
		if !bytes.Equal(rg.body, want) {
			t.Errorf("range request answered 200 with %d bytes, not the archive", len(rg.body))
		}
	case http.StatusPartialContent:
		if !bytes.Equal(rg.body, want[100:200]) {
			t.Errorf("range request answered 206 with other bytes")
		}
	default:
		t.Errorf("range request: status %d", rg.status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(body, want) {
		t.Errorf("first client: %d bytes, err %v", len(body), err)
	}
	h.waitCommitted(h.origin.SHA256(ns, typ, version, pl))
	if n := h.origin.ArchiveHits(ns, typ, version, pl); n != 1 {
		t.Errorf("the origin was asked for the archive %d times, want 1", n)
	}
}

// A slow client of an archive being downloaded, still reading when the
// download ended and the archive was committed (and others were served
// from the cache), gets the rest of the same verified bytes.
func TestSlowClientOutlivesTheDownload(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	const version, pl = "1.0.0", "linux_amd64"
	want, release := gatedArchive(t, h, 4<<20, 9)
	defer release()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := h.openArchive(ctx, version, pl)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h.origin.WaitArchiveStarted()
	head := make([]byte, 1000)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	release()
	// Stored while the slow client, which has read 1000 bytes, still
	// holds its answer open (the fetch's end, which waitCommitted waits
	// for, counts open answers too, and this one ends only once the
	// rest fits in the connection's buffers).
	enginetest.WaitStored(t, h.store, h.origin.SHA256(ns, typ, version, pl))
	for range 3 {
		if r := h.get(archivePath(version, pl)); r.status != http.StatusOK || !bytes.Equal(r.body, want) {
			t.Fatalf("client after the commit: status %d, %d bytes", r.status, len(r.body))
		}
	}
	if n := h.origin.ArchiveHits(ns, typ, version, pl); n != 1 {
		t.Errorf("the origin was asked for the archive %d times, want 1", n)
	}
	rest, err := io.ReadAll(resp.Body)
	if got := append(head, rest...); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("slow client: %d of %d bytes, err %v", len(got), len(want), err)
	}
}

// A client that goes away while the mirror fetches a module's package
// (or makes its zip) is counted with 499 and logged at debug, as one
// waiting for a provider archive is: never as a server error.
func TestClientGoneWhileModulePackageFetched(t *testing.T) {
	t.Parallel()
	logs := &observed.Logs{}
	h := newHarness(t, harnessOptions{cfg: Config{Logger: slog.New(logs)}, engine: mirror.Config{Logger: slog.New(logs)}})
	h.origin.AddTarball("net.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("#")}))
	h.origin.AddModule("acme", "net", "aws", "1.0.0", h.origin.TarballURL("net.tar.gz"))
	h.origin.SetLatency(time.Second)
	obs := &observed.Requests{}
	handler := Instrument(h.server, slog.New(logs), obs)
	paths := []string{modBase + "acme/net/aws/1.0.0/" + modulePackageFile, modBase + "acme/net/aws/1.0.0/" + moduleZipFile}
	for i, code := range observed.AskGone(handler, paths) {
		if code != httperr.StatusClientClosedRequest {
			t.Errorf("%s: status %d, want %d", paths[i], code, httperr.StatusClientClosedRequest)
		}
	}
	obs.Expect(t, paths, httperr.StatusClientClosedRequest)
	h.waitIdle()
	for _, r := range logs.AtLeast(slog.LevelWarn) {
		t.Errorf("logged at %v: %s", r.Level, r.Message)
	}
}

// gatedArchive gives provider ns/typ 1.0.0 for linux_amd64 an archive of
// size bytes (of seed) at h's origin, whose answers wait for release: the
// archive and release.
func gatedArchive(t *testing.T, h *harness, size int, seed uint64) (want []byte, release func()) {
	t.Helper()
	const version, pl = "1.0.0", "linux_amd64"
	h.origin.AddProvider(ns, typ, []string{version}, []string{pl})
	h.origin.SetArchiveBytes(ns, typ, version, pl, enginetest.ZipOfSize(t, typ, size, seed))
	return h.origin.Archive(ns, typ, version, pl), h.origin.GateArchives()
}

// openArchive starts a GET of the archive of version for pl, its body
// left to read.
func (h *harness) openArchive(ctx context.Context, version, pl string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.http.URL+archivePath(version, pl), nil)
	if err != nil {
		return nil, err
	}
	return h.http.Client().Do(req)
}

package proxy

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
)

// An origin that breaks off an archive mid-stream, while several clients
// stream the one download, fails every one of them with a broken
// transfer (never a clean end of a shorter body), with or without a
// stated length; nothing is stored, and the responses are counted as
// broken off by the mirror.
func TestOriginBreakingOffFailsEveryClient(t *testing.T) {
	t.Parallel()
	for _, hidden := range []bool{false, true} {
		t.Run(map[bool]string{false: "length", true: "chunked"}[hidden], func(t *testing.T) {
			t.Parallel()
			logs := &observed.Logs{}
			h := newHarness(t, harnessOptions{cfg: Config{Logger: slog.New(logs)}, origin: fakeorigin.Options{ArchiveSize: 1 << 20}})
			h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
			h.origin.SetArchiveLengthHidden(hidden)
			sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
			obs := &observed.Requests{}
			srv := httptest.NewServer(Instrument(h.server, slog.New(logs), obs))
			defer srv.Close()
			release := h.origin.GateArchives()
			defer release()

			const clients = 3
			var wg sync.WaitGroup
			errs := make([]error, clients)
			lens := make([]int, clients)
			started := make(chan struct{}, clients)
			for i := range clients {
				wg.Go(func() {
					resp, err := srv.Client().Get(srv.URL + archivePath("1.0.0", "linux_amd64"))
					if err != nil {
						errs[i] = err
						started <- struct{}{}
						return
					}
					defer resp.Body.Close()
					if _, err := io.ReadFull(resp.Body, make([]byte, 1024)); err != nil {
						errs[i] = err
						started <- struct{}{}
						return
					}
					started <- struct{}{}
					b, err := io.ReadAll(resp.Body)
					lens[i] = 1024 + len(b)
					if err == nil {
						t.Errorf("client %d: the response ended cleanly after %d bytes (Content-Length %d) though the origin broke off", i, lens[i], resp.ContentLength)
					}
				})
			}
			for range clients {
				<-started
			}
			h.origin.Close()
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("client %d: %v before the origin broke off", i, err)
				}
			}
			h.waitIdle()
			if _, err := h.store.StatBlob(sha); err == nil {
				t.Error("the archive the origin broke off is cached")
			}
			if n := h.origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 1 {
				t.Errorf("origin archive fetches = %d, want 1", n)
			}
		})
	}
}

package mirror

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
	"github.com/tfmirror/tfmirror/v2/verify"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// A zip bomb within the size limits takes long to check: the check runs
// under the download's context (the one Config.ArchiveTimeout bounds), so
// Shutdown stops it; the archive is then neither released nor cached, and
// no verification failure is counted (the archive was not judged), and
// the log says the check was stopped by the shutdown, not that it failed.
func TestArchiveCheckStopsWithTheDownload(t *testing.T) {
	t.Parallel()
	const version, pl = "1.0.0", "linux_amd64"
	// 4 GiB of zeros in 4 MiB, allowed: seconds to inflate.
	bomb := verifytest.Zeros("terraform-provider-"+typ+"_v"+version, 4<<30)
	limits := verify.Limits{MaxUnpackedBytes: 8 << 30}

	// stagedWhole waits until the fetch of sha has staged all of the
	// archive and its check began.
	stagedWhole := func(t *testing.T, w *fetchWatcher) *fetch.Download {
		t.Helper()
		for {
			w.mu.Lock()
			var f *fetch.Download
			if len(w.fetches) > 0 {
				f = w.fetches[0]
			}
			w.mu.Unlock()
			if f == nil {
				t.Fatal("no fetch was started")
			}
			st := f.State()
			if st.Err != nil {
				t.Fatalf("the fetch failed before its check: %v", st.Err)
			}
			if st.Checking {
				return f
			}
			<-st.Changed
		}
	}
	check := func(t *testing.T, h *harness, met *refusalMetrics, r archive, sha string) {
		t.Helper()
		if r.err == nil {
			t.Fatalf("got the whole archive (%d bytes) without an error", len(r.body))
		}
		if errors.Is(r.err, verify.ErrIntegrity) {
			t.Errorf("reader: %v; the check was stopped, not failed", r.err)
		}
		if _, err := h.store.StatBlob(sha); !errors.Is(err, cache.ErrNotFound) {
			t.Errorf("archive in the cache: %v", err)
		}
		if n, err := cachetest.ChunkCount(h.store); n != 0 || err != nil {
			t.Errorf("ChunkCount = %d, %v; want nothing left behind", n, err)
		}
		for _, reason := range verify.Reasons() {
			if n := met.count(string(reason)); n != 0 {
				t.Errorf("%d verification failures (%s) for a check that was stopped", n, reason)
			}
		}
	}

	t.Run("shutdown", func(t *testing.T) {
		met := &refusalMetrics{}
		logs := &logRecorder{t: t}
		h := newHarness(t, harnessOptions{cfg: Config{Metrics: met, ArchiveLimits: limits, Logger: logs.logger()}})
		h.origin.AddProvider(ns, typ, []string{version}, platforms)
		h.origin.SetArchiveBytes(ns, typ, version, pl, bomb)
		sha := h.origin.SHA256(ns, typ, version, pl)
		joined := make(chan struct{}, 4)
		fetches := watchFetches(h, sha, joined)
		done := make(chan archive, 1)
		go func() { done <- h.read(context.Background(), version, pl) }()
		<-joined // the read has started the fetch
		stagedWhole(t, fetches)
		// No grace period: Shutdown cancels the check and waits for it.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := h.engine.Shutdown(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Shutdown: %v, want context.Canceled (work was under way)", err)
		}
		check(t, h, met, <-done, sha)
		l := logs.String()
		if !strings.Contains(l, `level=INFO msg="archive fetch stopped by shutdown; nothing was cached"`) || !strings.Contains(l, "stage=check") {
			t.Errorf("no log line saying the shutdown stopped the check; log:\n%s", l)
		}
		if strings.Contains(l, "archive fetch failed") {
			t.Errorf("the stopped check was logged as a failure; log:\n%s", l)
		}
	})
}

package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
)

type pinger struct {
	err error
	noDiskReport
}

// noDiskReport is a cache that knows nothing of its disk, and stops
// writing only when a write fails (as an in-memory cache).
type noDiskReport struct{}

func (noDiskReport) Writable() error                  { return nil }
func (noDiskReport) FreeBytes() int64                 { return -1 }
func (noDiskReport) Reserve() int64                   { return -1 }
func (noDiskReport) DiskBudget() (int64, int64, bool) { return 0, 0, false }
func (noDiskReport) DamagedArchives() int             { return 0 }

func (p pinger) Ping() error { return p.err }

// A shared store that is down degrades the mirror but leaves it ready: it
// still serves its cache and the origins. A cache that cannot be written
// is not ready, whatever the shared store says.
func TestReadyzSharedStore(t *testing.T) {
	t.Parallel()
	down := func() error { return errors.New("shared store unavailable: connection refused") }
	tests := []struct {
		name       string
		h          http.HandlerFunc
		wantCode   int
		wantStatus string
	}{
		{"no shared store", Readyz(&HealthSource{Store: pinger{}}), 200, "ok"},
		{"shared store up", Readyz(&HealthSource{Store: pinger{}, Shared: reachableShared}), 200, "ok"},
		{"shared store down", Readyz(&HealthSource{Store: pinger{}, Shared: setAsideShared(down())}), 200, "degraded"},
		{"shared store failing, still asked", Readyz(&HealthSource{Store: pinger{}, Shared: failingShared(errors.New("the last call failed"))}), 200, "ok"},
		{"cache not writable", Readyz(&HealthSource{Store: pinger{err: errors.New("disk full")}, Shared: setAsideShared(down())}), 503, "unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.h(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			var body map[string]string
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.wantCode || body["status"] != tc.wantStatus {
				t.Errorf("%d %v, want %d status %q", rec.Code, body, tc.wantCode, tc.wantStatus)
			}
			if tc.wantStatus == "degraded" && body["shared_store"] == "" {
				t.Error("degraded without saying why")
			}
		})
	}
}

// realPinger counts the pings of a real cache.
type realPinger struct {
	*cache.Store
	pings atomic.Int64
}

func (p *realPinger) Ping() error { p.pings.Add(1); return p.Store.Ping() }

// Many load balancer nodes probing at once never make /readyz fail, and
// cost the cache one check between them (per HealthTTL).
func TestReadyzConcurrentProbes(t *testing.T) {
	t.Parallel()
	store := &realPinger{Store: enginetest.OpenStore(t, t.TempDir(), cache.Options{})}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	src := &HealthSource{Store: store, Now: func() time.Time { return now }}
	srv := httptest.NewServer(Readyz(src))
	defer srv.Close()
	client := srv.Client()
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for range 64 {
		wg.Go(func() {
			for range 20 {
				resp, err := client.Get(srv.URL)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %s", resp.StatusCode, body))
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of 1280 concurrent probes failed; first: %v", n, firstErr.Load())
	}
	if n := store.pings.Load(); n != 1 {
		t.Errorf("1280 probes within a second pinged the cache %d times, want 1", n)
	}
}

// TestHealthNamesNoPath: why the cache does not write is shown to
// everyone (in /readyz's reason and the status page's health block, also
// without a token when client authentication is on), while the
// configuration that names the data directory is not: below the disk
// reserve, or when its free space cannot be read, the reason says so
// without naming the directory.
func TestHealthNamesNoPath(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "private-data-dir")
	for _, tc := range []struct {
		name string
		free func(string) (int64, error)
		want string
	}{
		{"below the reserve", func(string) (int64, error) { return 1 << 20, nil }, "below the 64 MiB reserve"},
		{"free space unknown", func(string) (int64, error) { return 0, syscall.EIO }, "input/output error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := cache.Open(cache.Options{Dir: dir, DiskReserve: 64 << 20, FreeSpace: tc.free, SpaceCheckInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			src := &HealthSource{Store: s}
			rec := httptest.NewRecorder()
			Readyz(src).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			h := src.Check()
			if rec.Code != http.StatusServiceUnavailable || h.Cache != HealthCacheNotWritable {
				t.Fatalf("readyz %d %s, health %+v: want the cache not writable", rec.Code, rec.Body, h)
			}
			for _, text := range []string{rec.Body.String(), h.CacheError} {
				if strings.Contains(text, "private-data-dir") {
					t.Errorf("%q names the data directory", text)
				}
				if !strings.Contains(text, tc.want) {
					t.Errorf("%q does not say %q", text, tc.want)
				}
			}
		})
	}
}

// A cache whose test write fails is logged once per check, whoever ran the
// check: a metrics scrape that reads it first (CacheWritable) logs it, and
// /readyz within HealthTTL, answering from that check, does not log it
// again; the next check logs it again.
func TestFailedCheckLoggedWhoeverRanIt(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))
	now := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	src := &HealthSource{Store: pinger{err: errors.New("write 000012.vlog: input/output error")},
		Now: func() time.Time { return now }, Log: log}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(logged.String(), "readiness check failed")
	}
	if src.CacheWritable() {
		t.Fatal("a cache whose test write fails reads as writable")
	}
	if n := count(); n != 1 {
		t.Fatalf("the scrape's check logged %d failures, want 1:\n%s", n, logged.String())
	}
	rec := httptest.NewRecorder()
	Readyz(src)(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d, want 503", rec.Code)
	}
	if n := count(); n != 1 {
		t.Errorf("/readyz answering from the same check logged again: %d failures logged", n)
	}
	now = now.Add(HealthTTL)
	Readyz(src)(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if n := count(); n != 2 {
		t.Errorf("the next check logged %d failures in all, want 2", n)
	}
}

// reachableShared is a HealthSource.Shared of a shared store that is
// reachable.
func reachableShared() (setAside, failing error) { return nil, nil }

// setAsideShared is a HealthSource.Shared of a shared store set aside
// for why.
func setAsideShared(why error) func() (error, error) {
	return func() (error, error) { return why, nil }
}

// failingShared is a HealthSource.Shared of a shared store still used
// whose last calls failed, as why says.
func failingShared(why error) func() (error, error) {
	return func() (error, error) { return nil, why }
}

package mirror

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
	"github.com/tfmirror/tfmirror/v2/verify/verifytest"
)

// refusalMetrics counts verification failures by reason; the rest is discarded.
type refusalMetrics struct {
	noMetrics
	mu      sync.Mutex
	refused map[string]int
}

func (m *refusalMetrics) VerificationFailed(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refused == nil {
		m.refused = map[string]int{}
	}
	m.refused[reason]++
}

func (m *refusalMetrics) count(reason string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused[reason]
}

// logRecorder keeps the text of every log line (and passes it to t.Log).
type logRecorder struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecorder) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logRecorder) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// zipOf returns a zip with the named entries, each holding its name.
func zipOf(t *testing.T, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range names {
		f, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(name)) //nolint:errcheck // memory
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fetchWatcher records the downloads of one archive that readers join or
// start, through the fetcher's Join hook, so that a test can ask whether
// a download was ever released to its readers (marked verified).
type fetchWatcher struct {
	mu      sync.Mutex
	fetches []*fetch.Download
}

// watchFetches installs the watcher on h's engine. joined, if not nil,
// receives one value for every join.
func watchFetches(h *harness, sha string, joined chan<- struct{}) *fetchWatcher {
	w := &fetchWatcher{}
	h.engine.archives.SetHooks(fetch.Hooks{Join: func(joinedSHA string, f *fetch.Download) {
		if joinedSHA == sha && f != nil {
			w.mu.Lock()
			if !slices.Contains(w.fetches, f) {
				w.fetches = append(w.fetches, f)
			}
			w.mu.Unlock()
		}
		if joined != nil {
			joined <- struct{}{}
		}
	}})
	return w
}

// released returns how many downloads were seen, and how many of them were
// ever released to their readers.
func (w *fetchWatcher) released() (seen, released int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.fetches {
		if f.State().Verified {
			released++
		}
	}
	return len(w.fetches), released
}

// isRefused reports whether err is a verification failure for reason.
func isRefused(err error, reason verify.Reason) bool {
	var verr *verify.Error
	return errors.As(err, &verr) && verr.Reason == reason
}

// An origin that signs an archive Terraform cannot install (the sha256
// matches the signed SHA256SUMS) must see it refused alike for every
// reader streaming it: none gets the whole body without an error, nothing
// is cached, and each fetch is one bad_archive failure, without errors
// from readers reading a writer that was aborted under them.
func TestSignedUninstallableArchiveIsRefusedForEveryReader(t *testing.T) {
	t.Parallel()
	const version, pl, readers = "1.0.0", "linux_amd64", 16
	garbage := make([]byte, 100<<10)
	rand.NewChaCha8([32]byte{1}).Read(garbage) //nolint:errcheck // never fails
	exe := "terraform-provider-" + typ + "_v" + version
	tests := []struct {
		name string
		data []byte
		want verify.Reason
	}{
		{"not a zip", garbage, verify.ReasonBadArchive},
		{"zip without the provider executable", zipOf(t, "README.md", "terraform-provider-"+typ+"x_v1.0.0", "docs/terraform-provider-"+typ), verify.ReasonBadArchive},
		// Terraform refuses to unpack it: no package it can install.
		{"zip with an entry climbing out of its directory", zipOf(t, exe, "../../.bashrc"), verify.ReasonBadArchive},
		// Zip bombs: a few MiB that unpack to many GiB.
		{"6 GiB of zeros", verifytest.Zeros(exe, 6<<30), verify.ReasonTooLarge},
		// 64 entries of 32 MiB: 2 GiB declared, within the default limit.
		{"overlapping entries", verifytest.Overlapping(exe, 64, 32<<20), verify.ReasonBadArchive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			met := &refusalMetrics{}
			logs := &logRecorder{t: t}
			h := newHarness(t, harnessOptions{cfg: Config{Metrics: met, Logger: logs.logger()}})
			h.origin.AddProvider(ns, typ, []string{version}, platforms)
			h.origin.SetArchiveBytes(ns, typ, version, pl, tc.data)
			sha := h.origin.SHA256(ns, typ, version, pl)
			// Warm the metadata, so that all readers race for the archive.
			if _, err := h.packages(version, pl); err != nil {
				t.Fatalf("package metadata: %v", err)
			}

			joined := make(chan struct{}, readers)
			fetches := watchFetches(h, sha, joined)
			release := h.origin.GateArchives()
			var wg sync.WaitGroup
			results := make([]archive, readers)
			for i := range readers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = h.read(context.Background(), version, pl)
				}()
			}
			for range readers {
				<-joined
			}
			release()
			wg.Wait()
			h.waitIdle()

			for i, r := range results {
				switch {
				case r.err == nil:
					t.Errorf("reader %d got the whole archive (%d bytes) without an error", i, len(r.body))
				case !isRefused(r.err, tc.want):
					t.Errorf("reader %d: %v (opened %v, %d bytes), want the %s refusal", i, r.err, r.opened, len(r.body), tc.want)
				}
			}
			// Every reader joined before the origin sent the archive: one fetch.
			if n := h.origin.ArchiveHits(ns, typ, version, pl); n != 1 {
				t.Fatalf("origin archive fetches = %d, want 1", n)
			}
			if seen, released := fetches.released(); seen != 1 || released != 0 {
				t.Errorf("downloads seen %d, released to readers %d; want 1, 0", seen, released)
			}
			if _, err := h.store.StatBlob(sha); !errors.Is(err, cache.ErrNotFound) {
				t.Errorf("refused archive in the cache: %v", err)
			}
			if n, err := cachetest.ChunkCount(h.store); n != 0 || err != nil {
				t.Errorf("ChunkCount = %d, %v; want nothing left behind", n, err)
			}
			if n := met.count(string(tc.want)); n != 1 {
				t.Errorf("%s verification failures = %d, want 1 (one per fetch)", tc.want, n)
			}
			if l := logs.String(); strings.Contains(l, "blob writer is closed") {
				t.Errorf("a reader read the aborted writer; log:\n%s", l)
			}

			// Asked again, the archive is fetched and refused again.
			r := h.read(context.Background(), version, pl)
			if r.err == nil {
				t.Errorf("second reader got the whole archive (%d bytes) without an error", len(r.body))
			} else if !isRefused(r.err, tc.want) {
				t.Errorf("second reader: %v, want the %s refusal", r.err, tc.want)
			}
			h.waitIdle()
			if n := h.origin.ArchiveHits(ns, typ, version, pl); n != 2 {
				t.Errorf("origin archive fetches after asking again = %d, want 2", n)
			}
			if seen, released := fetches.released(); seen != 2 || released != 0 {
				t.Errorf("downloads seen %d, released to readers %d; want 2, 0", seen, released)
			}
			if n := met.count(string(tc.want)); n != 2 {
				t.Errorf("%s verification failures after asking again = %d, want 2", tc.want, n)
			}
			if n, err := cachetest.ChunkCount(h.store); n != 0 || err != nil {
				t.Errorf("ChunkCount after asking again = %d, %v; want nothing left behind", n, err)
			}
		})
	}
}

// With a full disk and no memory left for the chunks it could not store,
// the engine cannot read the whole archive back to check it: the archive
// is then not released (not even to a reader that kept up), and the fetch
// fails as such, not as a verification failure.
func TestArchiveNotReleasedWhenItCannotBeChecked(t *testing.T) {
	t.Parallel()
	const version, pl = "1.0.0", "linux_amd64"
	met := &refusalMetrics{}
	logs := &logRecorder{t: t}
	disk := &switchableFailure{on: true}
	h := newHarness(t, harnessOptions{
		cfg:    Config{Metrics: met, Logger: logs.logger()},
		origin: fakeorigin.Options{ArchiveSize: 256 << 10},
		store:  cache.Options{FailWrites: disk.fail, ChunkSize: 16 << 10, MaxUnstagedBytes: -1},
	})
	h.origin.AddProvider(ns, typ, []string{version}, platforms)
	sha := h.origin.SHA256(ns, typ, version, pl)
	fetches := watchFetches(h, sha, nil)

	r := h.read(context.Background(), version, pl)
	if r.err == nil {
		t.Errorf("got the whole archive (%d bytes) although it could not be checked", len(r.body))
	} else if !errors.Is(r.err, cache.ErrChunkDropped) {
		t.Errorf("reader: %v, want the dropped chunks' error", r.err)
	}
	h.waitIdle()
	if seen, released := fetches.released(); seen != 1 || released != 0 {
		t.Errorf("downloads seen %d, released to readers %d; want 1, 0", seen, released)
	}
	if _, err := h.store.StatBlob(sha); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("archive in the cache: %v", err)
	}
	l := logs.String()
	if !strings.Contains(l, "archive fetch failed") || !strings.Contains(l, cache.ErrChunkDropped.Error()) {
		t.Errorf("the fetch did not fail for the dropped chunks; log:\n%s", l)
	}
	if strings.Contains(l, "archive served") {
		t.Errorf("the archive was released; log:\n%s", l)
	}
	for _, reason := range verify.Reasons() {
		if n := met.count(string(reason)); n != 0 {
			t.Errorf("%d verification failures (%s) for an archive that could not be checked", n, reason)
		}
	}

	// Once the disk has room again the archive is fetched, checked and cached.
	disk.set(false)
	if r := h.read(context.Background(), version, pl); r.err != nil || !bytes.Equal(r.body, h.origin.Archive(ns, typ, version, pl)) {
		t.Fatalf("after the disk recovered: err %v, %d bytes", r.err, len(r.body))
	}
	h.waitCommitted(sha)
}

// A platform the origin once had no package for is asked for again after
// the versions TTL, or once the version list is refreshed, and not on
// every request before that.
func TestMissingPlatformIsAskedForAgain(t *testing.T) {
	t.Parallel()
	const version, pl = "1.0.0", "linux_amd64"
	var now atomic.Int64
	setup := func(t *testing.T) *harness {
		now.Store(time.Now().UnixNano())
		h := newHarness(t, harnessOptions{cfg: Config{
			VersionsTTL: 10 * time.Minute,
			Now:         func() time.Time { return time.Unix(0, now.Load()) },
			Platforms:   []string{pl},
		}})
		h.origin.AddProvider(ns, typ, []string{version}, platforms)
		return h
	}
	// listed reports whether the version's package metadata, for every
	// platform (what VERSION.json shows), has pl.
	listed := func(t *testing.T, h *harness) bool {
		t.Helper()
		pkg, err := h.packages(version)
		if err != nil {
			t.Fatalf("package metadata: %v", err)
		}
		return slices.ContainsFunc(pkg.Archives, func(a PlatformArchive) bool { return a.Platform == pl })
	}
	notFound := func(h *harness) bool {
		return errors.Is(h.read(context.Background(), version, pl).err, records.ErrPlatformNotFound)
	}
	// The origin lists the platform but answers 404 for its package once.
	missingOnce := func(t *testing.T, h *harness, first func() bool) {
		t.Helper()
		h.origin.SetFailNextN(fakeorigin.Download, 1, http.StatusNotFound)
		if first() {
			t.Fatal("platform served although the origin had no package for it")
		}
		for range 3 {
			if listed(t, h) {
				t.Fatal("within the TTL: platform listed, want it still missing")
			}
			if r := h.read(context.Background(), version, pl); !errors.Is(r.err, records.ErrPlatformNotFound) {
				t.Fatalf("within the TTL: archive opened %v, err %v; want ErrPlatformNotFound", r.opened, r.err)
			}
		}
		if n := h.origin.Hits(fakeorigin.Download); n != 1 {
			t.Fatalf("package metadata requests within the TTL = %d, want 1", n)
		}
	}
	archiveOK := func(t *testing.T, h *harness) {
		t.Helper()
		r := h.read(context.Background(), version, pl)
		if r.err != nil || !bytes.Equal(r.body, h.origin.Archive(ns, typ, version, pl)) {
			t.Fatalf("archive: err %v, %d bytes", r.err, len(r.body))
		}
		h.waitIdle()
	}

	t.Run("after the TTL", func(t *testing.T) {
		h := setup(t)
		missingOnce(t, h, func() bool { return !notFound(h) })
		now.Add(int64(11 * time.Minute))
		archiveOK(t, h)
		if !listed(t, h) {
			t.Error("package metadata lacks the platform the origin now has")
		}
		if n := h.origin.Hits(fakeorigin.Download); n != 2 {
			t.Errorf("package metadata requests = %d, want 2", n)
		}
	})

	t.Run("when the version list is refreshed", func(t *testing.T) {
		h := setup(t)
		if _, _, err := h.engine.Versions(context.Background(), h.provider()); err != nil { // the list is stored now
			t.Fatalf("version list: %v", err)
		}
		now.Add(int64(5 * time.Minute))
		missingOnce(t, h, func() bool { return listed(t, h) })
		// The list is due for a refresh; the finding is not yet.
		now.Add(int64(6 * time.Minute))
		if !listed(t, h) {
			t.Fatal("package metadata with a refreshed version list lacks the platform the origin now has")
		}
		if n := h.origin.Hits(fakeorigin.Versions); n != 2 {
			t.Errorf("version list requests = %d, want 2", n)
		}
		archiveOK(t, h)
	})

	// The answer made before is served when asking again fails.
	t.Run("origin failing when asked again", func(t *testing.T) {
		h := setup(t)
		missingOnce(t, h, func() bool { return listed(t, h) })
		now.Add(int64(11 * time.Minute))
		h.origin.SetKindStatus(fakeorigin.Download, http.StatusServiceUnavailable)
		if listed(t, h) {
			t.Fatal("platform listed although the origin failed")
		}
		if r := h.read(context.Background(), version, pl); !errors.Is(r.err, records.ErrPlatformNotFound) {
			t.Fatalf("archive: opened %v, err %v; want ErrPlatformNotFound", r.opened, r.err)
		}
		if n := h.origin.Hits(fakeorigin.Download); n < 2 {
			t.Fatalf("package metadata requests = %d: the platform was not asked for again", n)
		}
	})
}

// An origin may list one version in several spellings; the engine asks
// for the canonical one when it is listed, and a platform is missing only
// when no spelling has a package for it.
func TestVersionSpellings(t *testing.T) {
	t.Parallel()
	const version = "1.0.0"
	tests := []struct {
		name  string
		setup func(o *fakeorigin.Origin)
		// want maps each platform served to the origin's spelling it
		// comes from (its archive is that spelling's).
		want map[string]string
	}{
		{
			name: "alias listed first, without packages",
			setup: func(o *fakeorigin.Origin) {
				o.AddProvider(ns, typ, []string{"1.0"}, nil)
				o.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
			},
			want: map[string]string{"darwin_arm64": "1.0.0", "linux_amd64": "1.0.0", "windows_amd64": "1.0.0"},
		},
		{
			name: "platforms split between the spellings",
			setup: func(o *fakeorigin.Origin) {
				o.AddProvider(ns, typ, []string{"1.0"}, []string{"linux_amd64", "windows_amd64"})
				o.AddProvider(ns, typ, []string{"1.0.0"}, []string{"darwin_arm64", "linux_amd64"})
			},
			want: map[string]string{"darwin_arm64": "1.0.0", "linux_amd64": "1.0.0", "windows_amd64": "1.0"},
		},
		{
			name:  "only a short spelling",
			setup: func(o *fakeorigin.Origin) { o.AddProvider(ns, typ, []string{"1.0"}, platforms) },
			want:  map[string]string{"darwin_arm64": "1.0", "linux_amd64": "1.0", "windows_amd64": "1.0"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			tc.setup(h.origin)
			pkg, err := h.packages(version)
			if err != nil {
				t.Fatalf("package metadata: %v", err)
			}
			if len(pkg.Archives) != len(tc.want) {
				t.Errorf("package metadata has %d platforms, want %d: %+v", len(pkg.Archives), len(tc.want), pkg.Archives)
			}
			for pl, spelling := range tc.want {
				i := slices.IndexFunc(pkg.Archives, func(a PlatformArchive) bool { return a.Platform == pl })
				if i < 0 {
					t.Errorf("package metadata lacks %s", pl)
					continue
				}
				if got, want := pkg.Archives[i].SHA256, h.origin.SHA256(ns, typ, spelling, pl); got != want {
					t.Errorf("%s: sha256 %s, want %s (of the origin's %s)", pl, got, want, spelling)
				}
				r := h.read(context.Background(), version, pl)
				if r.err != nil || !bytes.Equal(r.body, h.origin.Archive(ns, typ, spelling, pl)) {
					t.Errorf("%s archive: err %v, %d bytes (want the origin's %s)", pl, r.err, len(r.body), spelling)
				}
				h.waitIdle()
			}
			rec, ok := h.engine.memo.CachedPackage(h.provider(), mustVersion(t, version))
			if !ok || len(rec.Missing) != 0 {
				t.Errorf("package record %+v: want one with no platform missing", rec)
			}
		})
	}
}

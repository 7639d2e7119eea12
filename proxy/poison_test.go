package proxy

import (
	"archive/zip"
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/internal/fakeorigin"
	"github.com/tfmirror/tfmirror/verify"
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

// An origin that signs an archive Terraform cannot install (the sha256
// matches the signed SHA256SUMS) must see it refused alike for every client
// streaming it: none gets the whole body with a clean 200, nothing is
// cached, and each fetch is one bad_archive failure, without errors from
// clients reading a writer that was aborted under them.
func TestSignedUninstallableArchiveIsRefusedForEveryClient(t *testing.T) {
	const version, pl, clients = "1.0.0", "linux_amd64", 16
	garbage := make([]byte, 100<<10)
	rand.NewChaCha8([32]byte{1}).Read(garbage) //nolint:errcheck // never fails
	tests := []struct {
		name string
		data []byte
	}{
		{"not a zip", garbage},
		{"zip without the provider executable", zipOf(t, "README.md", "terraform-provider-"+typ+"x_v1.0.0", "docs/terraform-provider-"+typ)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			met := &refusalMetrics{}
			logs := &logRecorder{t: t}
			h := newHarness(t, harnessOptions{cfg: Config{
				Metrics: met,
				Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			}})
			h.origin.AddProvider(ns, typ, []string{version}, platforms)
			h.origin.SetArchiveBytes(ns, typ, version, pl, tc.data)
			sha := h.origin.SHA256(ns, typ, version, pl)
			// Warm the metadata, so that all clients race for the archive.
			if r := h.get(providerPath(version + ".json")); r.status != http.StatusOK {
				t.Fatalf("VERSION.json: status %d: %s", r.status, r.body)
			}

			joined := make(chan struct{}, clients)
			h.server.archives.onJoin = func() { joined <- struct{}{} }
			release := h.origin.GateArchives()
			var wg sync.WaitGroup
			results := make([]response, clients)
			for i := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = h.get(archivePath(version, pl))
				}()
			}
			for range clients {
				<-joined
			}
			release()
			wg.Wait()
			h.waitIdle()

			for i, r := range results {
				if r.status == http.StatusOK && r.err == nil {
					t.Errorf("client %d got the whole archive (%d bytes) with status 200", i, len(r.body))
				}
			}
			// A client whose response failed before anything of it was
			// written may retry (the HTTP client does so for a GET on a
			// reused connection): that is one more fetch, refused alike.
			fetches := h.origin.ArchiveHits(ns, typ, version, pl)
			if fetches < 1 {
				t.Fatal("the archive was never fetched")
			}
			if _, err := h.store.StatBlob(sha); !errors.Is(err, cache.ErrNotFound) {
				t.Errorf("refused archive in the cache: %v", err)
			}
			if n, err := h.store.ChunkCount(); n != 0 || err != nil {
				t.Errorf("ChunkCount = %d, %v; want nothing left behind", n, err)
			}
			if n := met.count(string(verify.ReasonBadArchive)); n != fetches {
				t.Errorf("bad_archive verification failures = %d, want %d (one per fetch)", n, fetches)
			}
			if l := logs.String(); strings.Contains(l, "blob writer is closed") {
				t.Errorf("a client read the aborted writer; log:\n%s", l)
			}

			// Asked again, the archive is fetched and refused again.
			r := h.get(archivePath(version, pl))
			if r.status == http.StatusOK && r.err == nil {
				t.Errorf("second request got the whole archive (%d bytes) with status 200", len(r.body))
			}
			h.waitIdle()
		})
	}
}

// With a full disk and no memory left for the chunks it could not store,
// the mirror cannot read the whole archive back to check it: the archive
// is then not released (not even to a client that kept up), and the fetch
// fails as such, not as a verification failure.
func TestArchiveNotReleasedWhenItCannotBeChecked(t *testing.T) {
	const version, pl = "1.0.0", "linux_amd64"
	met := &refusalMetrics{}
	logs := &logRecorder{t: t}
	disk := &switchableFailure{on: true}
	h := newHarness(t, harnessOptions{
		cfg: Config{
			Metrics: met,
			Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		},
		origin: fakeorigin.Options{ArchiveSize: 256 << 10},
		store:  cache.Options{FailWrites: disk.fail, ChunkSize: 16 << 10, MaxUnstagedBytes: -1},
	})
	h.origin.AddProvider(ns, typ, []string{version}, platforms)
	sha := h.origin.SHA256(ns, typ, version, pl)

	r := h.get(archivePath(version, pl))
	if r.status == http.StatusOK && r.err == nil {
		t.Errorf("got the whole archive (%d bytes) although it could not be checked", len(r.body))
	}
	h.waitIdle()
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
	if r := h.get(archivePath(version, pl)); r.status != http.StatusOK || r.err != nil || !bytes.Equal(r.body, h.origin.Archive(ns, typ, version, pl)) {
		t.Fatalf("after the disk recovered: status %d err %v, %d bytes", r.status, r.err, len(r.body))
	}
	h.waitCommitted(sha)
}

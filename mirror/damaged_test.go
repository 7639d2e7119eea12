package mirror

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// cachedThenDamaged caches every platform's archive of version 1.0.0
// (3 MiB each) in a harness it then stops, and damages the first
// platform's archive on disk, whose bytes it returns with the harness
// and its options to start it again with. With a size limit the
// value-log files are 4 MiB: the first archive's chunks are in a file
// that is not the last.
func cachedThenDamaged(t *testing.T) (*harness, harnessOptions, []byte) {
	t.Helper()
	const size = 3 << 20
	opts := harnessOptions{cacheDir: t.TempDir(), origin: fakeorigin.Options{ArchiveSize: size},
		store: cache.Options{MaxBytes: 64 << 20}}
	h := newHarness(t, opts)
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	for _, pl := range platforms {
		if a := h.read(t.Context(), "1.0.0", pl); a.err != nil {
			t.Fatal(a.err)
		}
		h.waitCommitted(sha256Of(h.origin.Archive(ns, typ, "1.0.0", pl)))
	}
	h.stop()
	want := h.origin.Archive(ns, typ, "1.0.0", platforms[0])
	damageArchiveOnDisk(t, opts.cacheDir, want)
	return h, opts, want
}

// A cached archive whose bytes the disk changed is never read whole: the
// read that finds the damage fails, and the next request fetches the
// archive again from the origin, verifies it and replaces the damaged
// copy.
func TestDamagedCachedArchiveIsFetchedAgain(t *testing.T) {
	t.Parallel()
	h, opts, want := cachedThenDamaged(t)

	h.start(opts)
	hits := h.origin.Hits(fakeorigin.Archive)
	a := h.read(t.Context(), "1.0.0", platforms[0])
	if a.err == nil {
		t.Fatalf("a damaged cached archive was read whole (%d bytes, equal to the archive: %v)", len(a.body), bytes.Equal(a.body, want))
	}
	a = h.read(t.Context(), "1.0.0", platforms[0])
	if a.err != nil || !bytes.Equal(a.body, want) {
		t.Fatalf("after the damage was found: %v, %d bytes (equal: %v)", a.err, len(a.body), bytes.Equal(a.body, want))
	}
	if a.source != records.Miss {
		t.Errorf("source %v, want a fetch from the origin", a.source)
	}
	if n := h.origin.Hits(fakeorigin.Archive) - hits; n != 1 {
		t.Errorf("the origin was asked for the archive %d times, want once", n)
	}
	h.waitCommitted(sha256Of(want))
	if a := h.read(t.Context(), "1.0.0", platforms[0]); a.err != nil || !bytes.Equal(a.body, want) || a.source != records.Hit {
		t.Fatalf("the archive fetched again is not cached whole: %v, %v, %d bytes", a.err, a.source, len(a.body))
	}
}

// An archive an earlier release stored (its record without the checksums
// of its chunks) and the disk damaged is found damaged when it is first
// opened, before any byte of it is read: the first request already
// fetches it again from the origin and gets the archive whole.
func TestDamagedArchiveOfAnEarlierReleaseIsFetchedAtOnce(t *testing.T) {
	t.Parallel()
	h, opts, want := cachedThenDamaged(t)
	store, err := cache.Open(cache.Options{Dir: opts.cacheDir, MaxBytes: opts.store.MaxBytes})
	if err != nil {
		t.Fatal(err)
	}
	n, err := cachetest.DropChunkSums(store)
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil || n != len(platforms) {
		t.Fatalf("records rewritten as an earlier release wrote them: %d, %v", n, err)
	}

	h.start(opts)
	hits := h.origin.Hits(fakeorigin.Archive)
	a := h.read(t.Context(), "1.0.0", platforms[0])
	if a.err != nil || !bytes.Equal(a.body, want) || a.source != records.Miss {
		t.Fatalf("first request: %v, %v, %d bytes (equal: %v), want the archive fetched again", a.err, a.source, len(a.body), bytes.Equal(a.body, want))
	}
	if n := h.origin.Hits(fakeorigin.Archive) - hits; n != 1 {
		t.Errorf("the origin was asked for the archive %d times, want once", n)
	}
}

// damageArchiveOnDisk flips a byte of the second chunk of archive, as
// the closed cache in dir holds it in a value-log file that is not the
// last.
func damageArchiveOnDisk(t *testing.T, dir string, archive []byte) {
	t.Helper()
	target := archive[1<<20+4096 : 1<<20+4160]
	logs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	flipped := false
	for _, name := range logs[:len(logs)-1] {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, target); i >= 0 {
			b[i+7] ^= 0x55
			if err := os.WriteFile(name, b, 0o600); err != nil {
				t.Fatal(err)
			}
			flipped = true
		}
	}
	if !flipped {
		t.Fatalf("the archive's second chunk is in none of the value-log files but the last (%d files)", len(logs))
	}
}

// An archive found damaged stays refused after a restart: the first
// client after it is not sent the damaged copy again (a broken
// transfer), while the origin cannot give it the archive is refused
// before a byte is sent and kept (a check of the cache reports it), and
// once the origin answers it is fetched again and replaces the damaged
// copy, for good.
func TestDamagedArchiveStaysRefusedAfterRestart(t *testing.T) {
	t.Parallel()
	h, opts, want := cachedThenDamaged(t)
	sha := sha256Of(want)

	h.start(opts)
	if a := h.read(t.Context(), "1.0.0", platforms[0]); a.err == nil || !a.opened {
		t.Fatalf("the read that finds the damage: opened %v, %v; want a broken transfer", a.opened, a.err)
	}
	h.stop()

	// Restarted with the origin down: refused before a byte is sent,
	// and kept.
	h.origin.SetDown(http.StatusServiceUnavailable)
	h.start(opts)
	a := h.read(t.Context(), "1.0.0", platforms[0])
	if a.err == nil || a.opened {
		t.Fatalf("after a restart, with the origin down: opened %v, %d bytes (equal: %v), %v; want the archive refused before it is opened",
			a.opened, len(a.body), bytes.Equal(a.body, want), a.err)
	}
	if _, err := h.store.StatBlob(sha); !errors.Is(err, cache.ErrDamaged) {
		t.Errorf("the damaged copy after a restart: %v, want it kept and marked (cache.ErrDamaged)", err)
	}
	var failed []cachecheck.Result
	if err := h.engine.CacheChecker().VerifyCache(t.Context(), func(r cachecheck.Result) {
		if r.Problem != "" {
			failed = append(failed, r)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].SHA256 != sha || failed[0].Reason != "checksum_mismatch" {
		t.Errorf("the check of the cache after a restart reported %+v, want the damaged archive (checksum_mismatch)", failed)
	}
	h.stop()

	// Restarted with the origin back: fetched again, whole.
	h.origin.SetDown(0)
	h.start(opts)
	hits := h.origin.Hits(fakeorigin.Archive)
	a = h.read(t.Context(), "1.0.0", platforms[0])
	if a.err != nil || !bytes.Equal(a.body, want) || a.source != records.Miss {
		t.Fatalf("after a restart, with the origin up: %v, %v, %d bytes (equal: %v); want it fetched again whole",
			a.err, a.source, len(a.body), bytes.Equal(a.body, want))
	}
	if n := h.origin.Hits(fakeorigin.Archive) - hits; n != 1 {
		t.Errorf("the origin was asked for the archive %d times, want once", n)
	}
	h.waitCommitted(sha)
	h.stop()
	h.start(opts)
	if a := h.read(t.Context(), "1.0.0", platforms[0]); a.err != nil || !bytes.Equal(a.body, want) || a.source != records.Hit {
		t.Fatalf("the copy that replaced the damaged one, after a restart: %v, %v, %d bytes", a.err, a.source, len(a.body))
	}
}

func sha256Of(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

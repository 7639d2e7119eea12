package mirror

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// A cached archive whose bytes the disk changed is never read whole: the
// read that finds the damage fails, and the next request fetches the
// archive again from the origin, verifies it and replaces the damaged
// copy.
func TestDamagedCachedArchiveIsFetchedAgain(t *testing.T) {
	t.Parallel()
	const size = 3 << 20
	// With a size limit the value-log files are 4 MiB: the first
	// archive's chunks are in a file that is not the last.
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
	target := want[1<<20+4096 : 1<<20+4160]
	logs, _ := filepath.Glob(filepath.Join(opts.cacheDir, "*.vlog"))
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

func sha256Of(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

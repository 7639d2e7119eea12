package cache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// A byte a failing disk changed in a table of the database (where the
// commit records are) hides from a pass over the records every record
// after it, though each is still read by its key: the chunks of those
// archives are not taken for an interrupted write's and removed, and the
// compaction after deletions, which would write the table again without
// what follows the damage, is not run. The damage is logged.
func TestDamagedTableLosesNoArchive(t *testing.T) {
	opts, datas := damagedStore(t, 100, 1.0/3) // among the commit records

	var logged logbuf.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.waitCount() // and the clean-up after it
	if n, _ := s.Stats(); n >= len(datas) {
		t.Fatalf("the count saw %d archives: the damage hid none of their records", n)
	}
	// A deletion, and the compaction that follows deletions.
	if err := RigOf(s).DeleteBlob(shaOf(datas[0])); err != nil {
		t.Fatal(err)
	}
	s.gc.settleDeletes()

	whole := 0
	for _, d := range datas[1:] {
		r, err := s.OpenBlob(shaOf(d))
		if err != nil {
			continue
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err == nil && bytes.Equal(got, d) {
			whole++
		}
	}
	t.Logf("%d of %d archives read whole", whole, len(datas)-1)
	// Those whose record or chunk key is in the damaged block are lost;
	// a block holds a few dozen at most.
	if whole < len(datas)-50 {
		t.Errorf("%d of %d archives still read whole after one byte of a table was damaged", whole, len(datas)-1)
	}
	if !strings.Contains(logged.String(), "level=ERROR") || !strings.Contains(logged.String(), "table") {
		t.Errorf("the damaged table was not logged as an error:\n%s", logged.String())
	}
}

// TestDamagedTableEvictsNothing: what the size limit may evict is decided
// by a pass over the records (retention reads which archives cannot be
// fetched again: Blobs.SetEvictable), which a damaged table cuts short,
// so that an imported archive whose record is hidden would be taken for
// one that may go. Once a table is found damaged, the size limit evicts
// nothing until the next start, and says why once.
func TestDamagedTableEvictsNothing(t *testing.T) {
	opts, _ := damagedStore(t, 500, 2.0/3)

	var logged logbuf.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	opts.MaxBytes = 20 * (70 << 10) // far below what is cached
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.waitCount()
	before, _ := s.Stats()
	s.SetEvictable(func(string) bool { return true })
	if err := RigOf(s).Evict(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.Stats(); after != before {
		t.Errorf("the size limit evicted %d of %d archives with a table damaged", before-after, before)
	}
	if !strings.Contains(logged.String(), "level=ERROR") || !strings.Contains(logged.String(), "table") {
		t.Errorf("the damaged table was not logged as an error:\n%s", logged.String())
	}
}

// damagedStore is a store's directory holding 300 archives of one chunk
// each (above the value threshold: the chunks are in the value log, the
// records and the chunks' keys in one table), with one byte of that
// table changed at the fraction at of it, as a failing disk would; and
// the options it was written with, and the archives.
func damagedStore(t *testing.T, seed uint64, at float64) (Options, [][]byte) {
	t.Helper()
	dir := t.TempDir()
	opts := Options{Dir: dir, DiskReserve: -1, ChunkSize: 128 << 10}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	var datas [][]byte
	for i := range 300 {
		d := randomBytes(70<<10, seed+uint64(i))
		datas = append(datas, d)
		put(t, s, d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("%d tables, want 1", len(ssts))
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	b[int(float64(len(b))*at)] ^= 0xff
	if err := os.WriteFile(ssts[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	return opts, datas
}

// TestDamagedTableRetentionRemovesNothing: what retention removes is
// decided by passes over the records too (the archives no record names,
// those of no version it reads that cannot be fetched again), which a
// damaged table cuts short: an imported archive whose record it hides
// would be taken for one no record names. Once a table is found damaged,
// EvictBlob removes nothing (ErrTablesDamaged) until the next start.
func TestDamagedTableRetentionRemovesNothing(t *testing.T) {
	opts, datas := damagedStore(t, 900, 2.0/3)
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.waitCount()
	sha := ""
	for _, d := range datas {
		if _, err := s.StatBlob(shaOf(d)); err == nil {
			sha = shaOf(d)
			break
		}
	}
	if sha == "" {
		t.Fatal("no archive is cached: nothing to check")
	}
	if _, err := s.EvictBlob(sha); !errors.Is(err, ErrTablesDamaged) {
		t.Errorf("EvictBlob with a table damaged: %v, want ErrTablesDamaged", err)
	}
	if _, err := s.StatBlob(sha); err != nil {
		t.Errorf("EvictBlob removed an archive with a table damaged: %v", err)
	}
}

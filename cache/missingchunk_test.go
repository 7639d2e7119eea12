package cache

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// damagedThenReplaced checks that the committed archive data, whose
// stored bytes cannot all be read back, is damaged as a changed byte is:
// reading it fails with ErrDamaged, it is marked (DamagedArchives) and
// not found from then on, so that it is fetched again, and the next
// verified copy committed takes its place. Otherwise it is found, opened
// and failed mid-body on every request, and a fresh verified download is
// dropped in its favour.
func damagedThenReplaced(t *testing.T, s *Store, data []byte) {
	t.Helper()
	sha := shaOf(data)
	r, err := s.OpenBlob(sha)
	if err != nil {
		t.Fatalf("OpenBlob: %v", err)
	}
	_, rerr := io.ReadAll(r)
	r.Close()
	if !errors.Is(rerr, ErrDamaged) {
		t.Errorf("reading the archive: %v, want ErrDamaged", rerr)
	}
	if n := s.DamagedArchives(); n != 1 {
		t.Errorf("DamagedArchives = %d, want 1", n)
	}
	if _, err := s.StatBlob(sha); !errors.Is(err, ErrNotFound) {
		t.Errorf("StatBlob of the archive that cannot be read: %v, want ErrNotFound (fetched again)", err)
	}
	put(t, s, data) // a fresh verified download
	readBlob(t, s, data)
	if n := s.DamagedArchives(); n != 0 {
		t.Errorf("DamagedArchives = %d once a verified copy replaced it, want 0", n)
	}
}

// stageOf is the stage of the committed archive data.
func stageOf(t *testing.T, s *Store, data []byte) string {
	t.Helper()
	var stage string
	if err := s.db.view(func(txn *badger.Txn) error {
		rec, err := readRecord(txn, shaOf(data))
		stage = rec.Stage
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return stage
}

// TestMissingChunkIsDamagedAndReplaced: a chunk gone from under a
// committed archive (lost where it is stored) is damage: the archive is
// not served, and is replaced by the next verified copy.
func TestMissingChunkIsDamagedAndReplaced(t *testing.T) {
	s := openTest(t, t.TempDir())
	data := randomBytes(5*testChunk+17, 3)
	put(t, s, data)
	if err := s.db.deleteKeys([][]byte{chunkKey(stageOf(t, s, data), 2)}); err != nil {
		t.Fatal(err)
	}
	damagedThenReplaced(t, s, data)
}

// TestTruncatedValueLogIsDamagedAndReplaced: a value log cut short under
// a committed archive (a damaged disk or file system), rather than
// changed, is damage too.
func TestTruncatedValueLogIsDamagedAndReplaced(t *testing.T) {
	dir := t.TempDir()
	const chunk = 128 << 10 // above the value threshold: chunks go to the value log
	data := randomBytes(48*chunk-5000, 9)
	opts := Options{Dir: dir, ChunkSize: chunk, MaxBytes: 64 << 20}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	put(t, s, data)
	s.Close()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	sort.Strings(logs)
	if len(logs) < 2 {
		t.Fatalf("%d value logs, want the archive over more than one", len(logs))
	}
	fi, err := os.Stat(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(logs[0], fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	s, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	t.Cleanup(func() { s.Close() })
	damagedThenReplaced(t, s, data)
}

// TestChunkOfADeletedArchiveIsNoDamage: an archive deleted while a reader
// has it open (its record goes first, then its chunks) fails that reader,
// and is not taken for damage: nothing is marked.
func TestChunkOfADeletedArchiveIsNoDamage(t *testing.T) {
	s := openTest(t, t.TempDir())
	data := randomBytes(3*testChunk+5, 4)
	put(t, s, data)
	stage := stageOf(t, s, data)
	r, err := s.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	keys := [][]byte{blobKey(shaOf(data))}
	for i := range 4 {
		keys = append(keys, chunkKey(stage, i))
	}
	if err := s.db.deleteKeys(keys); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); err == nil || errors.Is(err, ErrDamaged) {
		t.Errorf("reading the deleted archive: %v, want an error other than ErrDamaged", err)
	}
	if n := s.DamagedArchives(); n != 0 {
		t.Errorf("DamagedArchives = %d, want 0", n)
	}
}

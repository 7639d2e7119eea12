package cache

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// copyChecked copies any part of a chunk and says whether the whole
// chunk has its checksum, wherever a byte of it changed: in the part
// copied, before it or after it.
func TestCopyCheckedWholeChunkWhateverPartIsCopied(t *testing.T) {
	val := randomBytes(3*copyStride+123, 5)
	want := chunkSum(val)
	for _, off := range []int{0, 1, copyStride - 1, copyStride, 2*copyStride + 7, len(val) - 1, len(val)} {
		for _, size := range []int{0, 1, 100, copyStride, copyStride + 1, len(val)} {
			p := make([]byte, size)
			n, ok := copyChecked(p, val, off, want)
			if wantN := min(size, len(val)-off); n != wantN || !ok || !bytes.Equal(p[:n], val[off:off+n]) {
				t.Fatalf("off %d, %d bytes: copied %d (want %d), ok %v", off, size, n, wantN, ok)
			}
			for _, changed := range []int{0, off - 1, off, off + n - 1, off + n, len(val) - 1} {
				if changed < 0 || changed >= len(val) {
					continue
				}
				val[changed] ^= 0x40
				if _, ok := copyChecked(p, val, off, want); ok {
					t.Errorf("off %d, %d bytes: byte %d changed, and the chunk checked", off, size, changed)
				}
				val[changed] ^= 0x40
			}
		}
	}
}

// asEarlierRelease rewrites the commit record of s's one archive as a
// release before chunk checksums wrote it: without them.
func asEarlierRelease(t *testing.T, s *Store) {
	t.Helper()
	if n, err := (Rig{s.Blobs}).DropChunkSums(); err != nil || n != 1 {
		t.Fatalf("records rewritten without their checksums: %d, %v; want the one archive's", n, err)
	}
}

func recordOf(t *testing.T, s *Store, sha string) blobRecord {
	t.Helper()
	var rec blobRecord
	err := s.db.view(func(txn *badger.Txn) (err error) {
		rec, err = readRecord(txn, sha)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// An archive committed by a release before chunk checksums is read
// whole against its sha256 when it is first opened, by any number of
// readers at once, each of which gets its bytes; its record then has the
// checksums every writer records, and a byte the disk changes after that
// is found as in any archive.
func TestArchiveOfAnEarlierReleaseGetsItsChecksums(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), ChunkSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := randomBytes(10*(64<<10)+77, 3)
	info := put(t, s, data)
	written := recordOf(t, s, info.SHA256).Sums
	if len(written) != 11*sumSize {
		t.Fatalf("the writer recorded %d bytes of checksums for 11 chunks", len(written))
	}
	asEarlierRelease(t, s)

	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			b, err := s.OpenBlob(info.SHA256)
			if err != nil {
				t.Error(err)
				return
			}
			defer b.Close()
			got, err := io.ReadAll(b)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("read %d bytes, %v", len(got), err)
			}
		})
	}
	wg.Wait()
	if got := recordOf(t, s, info.SHA256).Sums; !bytes.Equal(got, written) {
		t.Fatalf("record after the first reads has checksums %x, the writer recorded %x", got, written)
	}

	if err := (Rig{s.Blobs}).FlipBlobByte(info.SHA256, 5*(64<<10)+9); err != nil {
		t.Fatal(err)
	}
	b, err := s.OpenBlob(info.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := io.ReadAll(b); !errors.Is(err, ErrDamaged) {
		t.Fatalf("reading an archive a byte of which changed: %v", err)
	}
}

// An archive of an earlier release whose stored bytes no longer have
// its sha256, or miss a chunk, is damaged when it is first opened: no
// byte of it is handed out, it is not found (so that it is fetched
// again), logged once and marked, and is not found from then on.
func TestArchiveOfAnEarlierReleaseDamaged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(s *Store, rec blobRecord) error
		detail string
	}{
		{"a byte changed", func(s *Store, rec blobRecord) error {
			return Rig{s.Blobs}.FlipBlobByte(rec.SHA256, rec.Size-1)
		}, "its bytes have sha256"},
		{"a chunk missing", func(s *Store, rec blobRecord) error {
			return s.db.update(entryCost(64, 0), func(txn *badger.Txn) error { return txn.Delete(chunkKey(rec.Stage, 1)) })
		}, "the chunk is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logbuf.Buffer
			s, err := Open(Options{Dir: t.TempDir(), ChunkSize: 64 << 10, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			data := randomBytes(3*(64<<10), 4)
			info := put(t, s, data)
			asEarlierRelease(t, s)
			if err := tc.damage(s, recordOf(t, s, info.SHA256)); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				b, err := s.OpenBlob(info.SHA256)
				if err == nil {
					b.Close()
					t.Fatal("a damaged archive of an earlier release opened")
				}
				// Not cached, as one marked damaged: fetched again.
				if !errors.Is(err, ErrDamaged) || !errors.Is(err, ErrNotFound) {
					t.Fatalf("opening it: %v", err)
				}
			}
			if _, err := s.StatBlob(info.SHA256); !errors.Is(err, ErrNotFound) {
				t.Fatalf("StatBlob of the damaged archive: %v", err)
			}
			if !recordOf(t, s, info.SHA256).Damaged {
				t.Fatal("the damaged archive's record is not marked")
			}
			if got := strings.Count(logs.String(), "is damaged where it is stored"); got != 1 {
				t.Fatalf("damage logged %d times:\n%s", got, logs.String())
			}
			if !strings.Contains(logs.String(), tc.detail) {
				t.Fatalf("the log does not say %q:\n%s", tc.detail, logs.String())
			}
			// A verified copy replaces it.
			put(t, s, data)
			b, err := s.OpenBlob(info.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if got, err := io.ReadAll(b); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("the replacing copy: %d bytes, %v", len(got), err)
			}
		})
	}
}

package cache

import (
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// openHeld opens dir with free bytes free (testReserve is the reserve).
func openHeld(dir string, free int64) (*Store, error) {
	return Open(Options{Dir: dir, ChunkSize: testChunk, DiskReserve: testReserve,
		FreeSpace: newFakeDisk(free).FreeSpace, SpaceCheckInterval: time.Hour})
}

// TestOpenOfAHeldDirectoryFails: a directory a store holds cannot be
// opened by another, whatever the free space of either: opened
// read-write, read-only (the disk below the reserve, where Badger's lock
// is shared) or without a database (below the reserve after a crash),
// the first store keeps it, and the second Open fails with the error a
// held directory always gave (Badger's "Cannot acquire directory lock"),
// rather than going on without the cache as if the directory were its
// own (a second serve then took the first one's admin socket). Once the
// first store is closed, the directory opens.
func TestOpenOfAHeldDirectoryFails(t *testing.T) {
	const room, full = 1 << 40, 0
	for _, tc := range []struct {
		name    string
		first   int64 // free space when the first store opens
		crashed bool  // its directory needs its logs replayed: below the reserve, no database
		second  int64 // when the second one does
		firstDB string
	}{
		{name: "both with room", first: room, second: room, firstDB: "read-write"},
		{name: "second below the reserve", first: room, second: full, firstDB: "read-write"},
		{name: "both below the reserve", first: full, second: full, firstDB: "read-only"},
		{name: "first below the reserve", first: full, second: room, firstDB: "read-only"},
		{name: "first without a database", first: full, crashed: true, second: full, firstDB: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data := randomBytes(3*testChunk+1, 7)
			if tc.crashed {
				dir = crashedCopy(t, data)
			} else {
				s := openTest(t, dir)
				put(t, s, data)
				s.Close()
			}
			first, err := openHeld(dir, tc.first)
			if err != nil {
				t.Fatal(err)
			}
			first.waitCount()
			defer first.Close()
			switch db := first.db; {
			case tc.firstDB == "read-write" && (db.bdb == nil || db.readOnly),
				tc.firstDB == "read-only" && (db.bdb == nil || !db.readOnly),
				tc.firstDB == "none" && db.bdb != nil:
				t.Fatalf("the first store is not opened %s", tc.firstDB)
			}

			second, err := openHeld(dir, tc.second)
			if err == nil {
				second.Close()
				t.Fatal("a second store opened the directory the first holds")
			}
			// Badger's own refusal, which serve printed for a held
			// directory before the store took the lock itself.
			bdb, berr := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
			if berr == nil {
				bdb.Close()
				t.Fatal("Badger opened the directory the first store holds")
			}
			if want := "cache: opening " + dir + ": " + berr.Error(); err.Error() != want ||
				!strings.Contains(want, "Cannot acquire directory lock") {
				t.Errorf("second Open: %q; want Badger's refusal of a held directory, %q", err, want)
			}
			if tc.firstDB != "none" {
				readBlob(t, first, data) // the first store still serves
			}

			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			second, err = openHeld(dir, tc.second)
			if err != nil {
				t.Fatalf("Open once the first store is closed: %v", err)
			}
			second.Close()
		})
	}
}

// crashedCopy is a directory holding data as a store left it when its
// process died: its write-ahead log not replayed, which a read-only open
// refuses.
func crashedCopy(t *testing.T, data []byte) string {
	t.Helper()
	live := t.TempDir()
	s := openTest(t, live)
	put(t, s, data)
	return storeFilesCopy(t, live)
}

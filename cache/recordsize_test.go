package cache

import (
	"errors"
	"strings"
	"testing"
)

// A record larger than the database stores in one value (a value-log
// file's size on disk, here the 4 MiB of a small cache; the value
// threshold in memory) is refused in one line naming it and both sizes,
// by PutMeta and by PutMetas, which store nothing; Badger's own error
// quoted a hex dump of the record's first KiB, an origin's answer. A
// large record within the bound is stored.
func TestRecordTooLargeRefusedInALine(t *testing.T) {
	disk := openLimited(t, t.TempDir(), 64<<20, new([]string))
	mem, err := Open(Options{InMemory: true, ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	for _, tc := range []struct {
		name string
		s    *Store
		big  int
		fits int
	}{
		{"on disk", disk, 5 << 20, 2 << 20},
		{"in memory", mem, 2 << 20, 512 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			big := strings.Repeat("v", tc.big)
			for what, put := range map[string]func() error{
				"PutMeta":  func() error { return tc.s.PutMeta("versions/big", big) },
				"PutMetas": func() error { return tc.s.PutMetas(map[string]any{"versions/big": big, "versions/small": "s"}) },
			} {
				err := put()
				if !errors.Is(err, ErrRecordTooLarge) || !strings.Contains(err.Error(), "versions/big") || strings.Contains(err.Error(), "\n") || len(err.Error()) > 300 {
					t.Errorf("%s of %d bytes: %.400v; want ErrRecordTooLarge in one line naming the record", what, tc.big, err)
				}
				for _, key := range []string{"versions/big", "versions/small"} {
					var v string
					if _, err := tc.s.GetMeta(key, &v); !errors.Is(err, ErrNotFound) {
						t.Errorf("%s: %s stored: %v", what, key, err)
					}
				}
			}
			fits := strings.Repeat("v", tc.fits)
			if err := tc.s.PutMeta("versions/fits", fits); err != nil {
				t.Fatal(err)
			}
			var got string
			if _, err := tc.s.GetMeta("versions/fits", &got); err != nil || got != fits {
				t.Errorf("a record of %d bytes: %d bytes read, %v", tc.fits, len(got), err)
			}
		})
	}
}

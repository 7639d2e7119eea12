package cache

import "testing"

// Headroom asks the file system each time and answers what lies above the
// reserve (plus the LSM tree); without free-space checks it cannot tell.
func TestHeadroom(t *testing.T) {
	disk := newFakeDisk(1 << 30)
	s := openSpace(t, t.TempDir(), disk)
	room, ok := s.Headroom()
	if want := int64(1<<30) - s.Reserve(); !ok || room != want {
		t.Fatalf("Headroom = %d, %v; want %d, true", room, ok, want)
	}
	calls := disk.calls.Load()
	disk.free.Store(testReserve / 2)
	if room, ok := s.Headroom(); !ok || room >= 0 || disk.calls.Load() != calls+1 {
		t.Errorf("Headroom below the reserve = %d, %v after %d statfs; want negative, true, asked once", room, ok, disk.calls.Load()-calls)
	}

	off, err := Open(Options{Dir: t.TempDir(), DiskReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if _, ok := off.Headroom(); ok {
		t.Error("Headroom without free-space checks says it can tell")
	}
}

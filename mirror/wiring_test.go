package mirror

import (
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// An engine wired wrongly stops at start and says what is missing,
// rather than failing each request later: the origin (for providers and
// modules) and the store are required, a nil pointer as much as a nil
// interface.
func TestNewRefusesWrongWiring(t *testing.T) {
	t.Parallel()
	origin := enginetest.OriginClient(t, enginetest.StartOrigin(t, fakeorigin.Options{}))
	store := enginetest.OpenStore(t, "", cache.Options{})
	t.Cleanup(func() { store.Close() })
	allowed := Config{AllowedOrigins: []string{originHost}}
	for _, tc := range []struct {
		name   string
		cfg    Config
		origin Origin
		store  Store
		want   string
	}{
		{"no origin", allowed, nil, store, "an origin is required"},
		{"a nil origin client", allowed, (*discovery.Client)(nil), store, "an origin is required"},
		{"no store", allowed, origin, nil, "a store is required"},
		{"a nil cache", allowed, origin, (*cache.Store)(nil), "a store is required"},
		{"no allowed origin", Config{}, origin, store, "at least one allowed origin"},
		{"an allowed origin that is no host name", Config{AllowedOrigins: []string{"a b"}}, origin, store, `allowed origin "a b"`},
		{"an unsigned host that is no allowed origin", Config{AllowedOrigins: []string{originHost}, UnsignedHosts: []string{"tf.corp.example"}},
			origin, store, "tf.corp.example is not an allowed origin"},
		{"a platform that is none", Config{AllowedOrigins: []string{originHost}, Platforms: []string{"linux"}}, origin, store, "platforms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.cfg, tc.origin, tc.store)
			if err == nil {
				e.Close()
				t.Fatal("New took it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// headroomStore reports a fixed headroom, as a cache on a disk with
// room above its reserve does.
type headroomStore struct {
	Store
	room int64
}

func (h headroomStore) Headroom() (int64, bool) { return h.room, true }

// DiskHeadroom is the store's: what the cache says of its disk, and
// ok false from a cache that does not check free space (in memory).
func TestDiskHeadroomIsTheStores(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{wrap: func(s Store) Store { return headroomStore{s, 3 << 20} }})
	if room, ok := h.engine.AirGap().DiskHeadroom(); !ok || room != 3<<20 {
		t.Errorf("DiskHeadroom = %d, %v; want %d, true", room, ok, 3<<20)
	}
	mem := newHarness(t, harnessOptions{})
	if room, ok := mem.engine.AirGap().DiskHeadroom(); ok {
		t.Errorf("DiskHeadroom of an in-memory cache = %d, true; want it unknown", room)
	}
}

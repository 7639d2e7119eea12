package mirror

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/providerlists"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// heldLists holds the origin's version list answers while held is set
// until release is closed, saying on asked when one is held.
type heldLists struct {
	Origin
	held    *atomic.Bool
	asked   chan struct{}
	release chan struct{}
}

func (o heldLists) Versions(ctx context.Context, p addrs.Provider) (discovery.VersionList, error) {
	if o.held.Load() {
		select {
		case o.asked <- struct{}{}:
		default:
		}
		select {
		case <-o.release:
		case <-ctx.Done():
			return discovery.VersionList{}, ctx.Err()
		}
	}
	return o.Origin.Versions(ctx, p)
}

// listWrites watches the version list under key once armed: read is
// closed once it was read, refreshed once a list naming fresh (the
// origin's newer listing) was stored; a list that does not name fresh (a
// removal's, of the list before) is stored only once one naming it was.
type listWrites struct {
	Store
	key, fresh string
	armed      atomic.Bool
	readOnce   sync.Once
	read       chan struct{}
	storeOnce  sync.Once
	refreshed  chan struct{}
}

func (s *listWrites) GetMeta(key string, v any) (time.Time, error) {
	at, err := s.Store.GetMeta(key, v)
	if key == s.key && s.armed.Load() {
		s.readOnce.Do(func() { close(s.read) })
	}
	return at, err
}

func (s *listWrites) names(v any) bool {
	list, ok := v.(*records.VersionList)
	return ok && slices.Contains(list.Names(), s.fresh)
}

func (s *listWrites) PutMeta(key string, v any) error {
	return s.put(key, v, func() error { return s.Store.PutMeta(key, v) })
}

func (s *listWrites) PutMetaAt(key string, v any, at time.Time) error {
	return s.put(key, v, func() error { return s.Store.PutMetaAt(key, v, at) })
}

func (s *listWrites) put(key string, v any, put func() error) error {
	if key != s.key || !s.armed.Load() {
		return put()
	}
	if s.names(v) {
		err := put()
		s.storeOnce.Do(func() { close(s.refreshed) })
		return err
	}
	select {
	case <-s.refreshed:
	case <-time.After(time.Minute): // the test fails below
	}
	return put()
}

// A version taken off its list by a removal (retention's prune of a
// version that cannot be fetched again) while the list is refreshed:
// the removal read the list before the refresh stored the origin's
// newer one, and stored what it read, without the version, after it,
// so that the versions the origin listed since (1.1.0) were gone from
// the list until its next refresh. The removal takes the version off the
// list in turn with its refreshes, as an import adds one: off the one
// the refresh stored.
func TestRemovalNotWrittenOverARefreshedList(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	start := time.Now().Truncate(time.Second) // the engine's clock starts at the cache's, the wall clock
	clock.Set(start)
	held := heldLists{held: new(atomic.Bool), asked: make(chan struct{}, 1), release: make(chan struct{})}
	key := records.VersionsKeyOf(originHost + "/" + ns + "/" + typ)
	writes := &listWrites{key: key, fresh: "1.1.0", read: make(chan struct{}), refreshed: make(chan struct{})}
	h := newHarness(t, harnessOptions{
		cfg:        Config{Now: clock.Now, VersionsTTL: time.Minute, StaleAfter: time.Minute},
		wrap:       func(s Store) Store { writes.Store = s; return writes },
		wrapOrigin: func(o Origin) Origin { held.Origin = o; return held },
	})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "0.9.0"}, []string{"linux_amd64"})
	p := h.provider()
	if _, _, err := h.engine.Versions(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	h.origin.AddProvider(ns, typ, []string{"1.1.0"}, []string{"linux_amd64"})
	clock.Add(2 * time.Minute) // the list is due for a refresh

	held.held.Store(true)
	refreshed := make(chan error, 1)
	go func() {
		_, _, err := h.engine.Versions(context.Background(), p)
		refreshed <- err
	}()
	select {
	case <-held.asked:
	case <-time.After(time.Minute):
		t.Fatal("the origin was not asked for the list")
	}
	writes.armed.Store(true)
	removed := make(chan error, 1)
	go func() { removed <- h.engine.Inventory().RemoveVersion("provider", p.String(), "0.9.0") }()
	select {
	case <-writes.read: // the removal read the list the refresh is about to replace
	case <-time.After(time.Minute):
		t.Fatal("the removal did not read the version list")
	}
	close(held.release)
	for name, ch := range map[string]chan error{"the refresh": refreshed, "the removal": removed} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s did not end", name)
		}
	}

	clock.Set(start) // the lists stored since are fresh
	list, st, err := h.engine.Versions(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := list.Names(), []string{"1.0.0", "1.1.0"}; !slices.Equal(got, want) || st.Fetched {
		t.Errorf("after a removal of 0.9.0 during a refresh, the mirror lists %v (fetched: %v), want %v from the cache", got, st.Fetched, want)
	}
}

// A removal stores the version list again without the version, and the
// list then counted its time to live from the removal: a list due for a
// refresh was served as fresh for another time to live, without the
// versions the origin listed since (1.1.0). The list stored again keeps
// its time of storing: it is refreshed when it was due.
func TestRemovalKeepsTheListsTimeToLive(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now())
	h := newHarness(t, harnessOptions{cfg: Config{Now: clock.Now, VersionsTTL: time.Hour}})
	h.origin.AddProvider(ns, typ, []string{"0.9.0", "1.0.0"}, []string{"linux_amd64"})
	p := h.provider()
	if _, _, err := h.engine.Versions(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	storedAt, err := h.store.GetMeta(records.VersionsKey(p), &records.VersionList{})
	if err != nil {
		t.Fatal(err)
	}
	h.origin.AddProvider(ns, typ, []string{"1.1.0"}, []string{"linux_amd64"})
	h.origin.RemoveVersion(ns, typ, "0.9.0") // withdrawn: the mirror is to let go of it too
	clock.Set(storedAt.Add(time.Hour))       // the list is due for a refresh, by the cache's time of storing

	if err := h.engine.Inventory().RemoveVersion("provider", p.String(), "0.9.0"); err != nil {
		t.Fatal(err)
	}
	list, st, err := h.engine.Versions(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := list.Names(), []string{"1.0.0", "1.1.0"}; !slices.Equal(got, want) || !st.Fetched {
		t.Errorf("the list due for a refresh when 0.9.0 was removed: listed %v (fetched: %v), want %v fetched from the origin", got, st.Fetched, want)
	}
}

// heldListWrite holds a write of the version list under key (an
// import's, a removal's) once armed, saying on reached that it is held,
// until release is closed.
type heldListWrite struct {
	Store
	key     string
	armed   atomic.Bool
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (s *heldListWrite) hold(key string) {
	if key == s.key && s.armed.Load() {
		s.once.Do(func() { close(s.reached) })
		<-s.release
	}
}

func (s *heldListWrite) PutMeta(key string, v any) error {
	s.hold(key)
	return s.Store.PutMeta(key, v)
}

func (s *heldListWrite) PutMetaAt(key string, v any, at time.Time) error {
	s.hold(key)
	return s.Store.PutMetaAt(key, v, at)
}

// waitForGoroutine waits until a goroutine's stack names every one of
// frames.
func waitForGoroutine(t *testing.T, frames ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	buf := make([]byte, 4<<20)
	for time.Now().Before(deadline) {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			found := true
			for _, f := range frames {
				found = found && strings.Contains(g, f)
			}
			if found {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no goroutine in %v", frames)
}

// A version the cached list lacks (1.1.0, published since) is looked up
// in a refresh of the list, forced: one asked for while a removal
// (retention's prune of a version that cannot be fetched again) or an
// import wrote the list, in turn with its refreshes, joined that write
// and took the list it stored, without the version, for the origin's
// answer: the version was answered as one the origin does not have. A
// caller of a refresh that joined a write of the list goes on to a
// refresh of its own.
func TestRefreshJoiningAListWriteAsksTheOrigin(t *testing.T) {
	for _, writer := range []string{"removal", "import"} {
		t.Run(writer, func(t *testing.T) {
			clock := enginetest.NewFakeClock()
			clock.Set(time.Now())
			key := records.VersionsKeyOf(originHost + "/" + ns + "/" + typ)
			held := &heldListWrite{key: key, reached: make(chan struct{}), release: make(chan struct{})}
			h := newHarness(t, harnessOptions{
				cfg:  Config{Now: clock.Now, VersionsTTL: time.Hour},
				wrap: func(s Store) Store { held.Store = s; return held },
			})
			h.origin.AddProvider(ns, typ, []string{"0.9.0", "1.0.0"}, []string{"linux_amd64", "windows_amd64"})
			p := h.provider()
			if _, _, err := h.engine.Versions(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			write := func() error { return h.engine.Inventory().RemoveVersion("provider", p.String(), "0.9.0") }
			if writer == "import" {
				src := &harness{t: t, origin: h.origin}
				src.start(harnessOptions{})
				v := mustVersion(t, "1.0.0")
				ev, err := src.engine.Evidence(t.Context(), p, v, []addrs.Platform{mustPlatform(t, "windows_amd64")})
				if err != nil {
					t.Fatal(err)
				}
				in := enginetest.ImportedFrom(ev, func(pl string) []byte { return h.origin.Archive(ns, typ, "1.0.0", pl) })
				in.Version = v
				write = func() error {
					_, err := h.engine.AirGap().Import(context.Background(), in)
					return err
				}
			}
			h.origin.AddProvider(ns, typ, []string{"1.1.0"}, []string{"linux_amd64"})
			clock.Add(2 * providerlists.MinForcedRefresh) // the list fresh, old enough to be refreshed for a version it lacks

			held.armed.Store(true)
			written := make(chan error, 1)
			go func() { written <- write() }()
			select {
			case <-held.reached:
			case <-time.After(time.Minute):
				t.Fatalf("the %s did not write the version list", writer)
			}
			asked := make(chan error, 1)
			go func() {
				_, err := h.packages("1.1.0", "linux_amd64")
				asked <- err
			}()
			waitForGoroutine(t, "providerlists.(*Lists).Versions", "lifetime.(*Lifetime).CoalesceWithin")
			close(held.release)
			for name, ch := range map[string]chan error{"the " + writer: written, "1.1.0": asked} {
				select {
				case err := <-ch:
					if err != nil {
						t.Errorf("%s: %v", name, err)
					}
				case <-time.After(time.Minute):
					t.Fatalf("%s did not end", name)
				}
			}
		})
	}
}

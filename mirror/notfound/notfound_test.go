package notfound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
)

// origin answers every call with answer(), counting the calls that reach it.
type origin struct {
	calls  atomic.Int64
	answer func() error
}

func (o *origin) call() error {
	o.calls.Add(1)
	return o.answer()
}

func (o *origin) Versions(context.Context, addrs.Provider) (discovery.VersionList, error) {
	if err := o.call(); err != nil {
		return discovery.VersionList{}, err
	}
	return discovery.VersionList{Versions: []discovery.VersionInfo{{Version: "1.0.0"}}}, nil
}

func (o *origin) Package(context.Context, addrs.Provider, string, addrs.Platform) (*discovery.Package, error) {
	if err := o.call(); err != nil {
		return nil, err
	}
	return &discovery.Package{}, nil
}

func (o *origin) FetchSums(context.Context, addrs.Provider, *discovery.Package, int64, int64) ([]byte, []byte, error) {
	return nil, nil, o.call()
}

func (o *origin) OpenArchive(context.Context, addrs.Provider, string) (io.ReadCloser, int64, error) {
	if err := o.call(); err != nil {
		return nil, 0, err
	}
	return io.NopCloser(strings.NewReader("")), 0, nil
}

func (o *origin) ArchiveSize(context.Context, addrs.Provider, string) (int64, error) {
	return 0, o.call()
}

func (o *origin) ModuleVersions(context.Context, addrs.Module) ([]string, error) {
	if err := o.call(); err != nil {
		return nil, err
	}
	return []string{"1.0.0"}, nil
}

func (o *origin) ModuleLocation(context.Context, addrs.Module, string) (discovery.ModuleDownload, error) {
	if err := o.call(); err != nil {
		return discovery.ModuleDownload{}, err
	}
	return discovery.ModuleDownload{Location: "https://example.com/m.tar.gz"}, nil
}

func (o *origin) OpenSource(context.Context, svchost.Hostname, string) (io.ReadCloser, int64, error) {
	return nil, 0, o.call()
}

func (o *origin) SourceHTTPClient(svchost.Hostname) *http.Client { return nil }

// metrics records what a Memory tells it.
type metrics struct {
	mu         sync.Mutex
	remembered map[string]int
	entries    map[string]int
}

func newMetrics() *metrics {
	return &metrics{remembered: map[string]int{}, entries: map[string]int{}}
}

func (m *metrics) NotFoundRemembered(origin string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.remembered[origin]++
}

func (m *metrics) NotFoundEntries(origin string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries[origin] = n
}

func (m *metrics) get(origin string) (remembered, entries int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.remembered[origin], m.entries[origin]
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const host = svchost.Hostname("registry.example.com")

var linux = addrs.Platform{OS: "linux", Arch: "amd64"}

func provider(name string) addrs.Provider {
	return addrs.Provider{Hostname: host, Namespace: "hashicorp", Type: name}
}

func notFound(what string) error { return fmt.Errorf("%w: %s", discovery.ErrNotFound, what) }

func newMemory(t *testing.T, ttl time.Duration, max int) (*Memory, *clock, *metrics) {
	t.Helper()
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	met := newMetrics()
	m, err := New(Config{TTL: ttl, MaxEntries: max, Origins: []svchost.Hostname{host}, Now: c.Now}, met)
	if err != nil {
		t.Fatal(err)
	}
	return m, c, met
}

// TestRemembersNotFound: an origin's not-found is answered from memory,
// the same error, for the period, and asked again after it.
func TestRemembersNotFound(t *testing.T) {
	m, c, met := newMemory(t, time.Minute, 0)
	o := &origin{answer: func() error { return notFound("provider registry.example.com/hashicorp/typo") }}
	po := m.Providers(o)
	var first error
	for i := range 10 {
		_, err := po.Versions(context.Background(), provider("typo"))
		if !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("call %d: %v, want ErrNotFound", i, err)
		}
		if first == nil {
			first = err
		} else if err.Error() != first.Error() {
			t.Fatalf("remembered answer %q differs from the origin's %q", err, first)
		}
	}
	if n := o.calls.Load(); n != 1 {
		t.Fatalf("origin asked %d times in the period, want 1", n)
	}
	if r, e := met.get(string(host)); r != 9 || e != 1 {
		t.Fatalf("metrics: remembered %d, entries %d; want 9, 1", r, e)
	}
	c.add(time.Minute - time.Nanosecond)
	po.Versions(context.Background(), provider("typo"))
	if n := o.calls.Load(); n != 1 {
		t.Fatalf("origin asked %d times just before the period ended, want 1", n)
	}
	c.add(time.Nanosecond)
	// The provider appeared at the origin meanwhile.
	o.answer = func() error { return nil }
	if _, err := po.Versions(context.Background(), provider("typo")); err != nil {
		t.Fatalf("after the period: %v, want the origin's list", err)
	}
	if n := o.calls.Load(); n != 2 {
		t.Fatalf("origin asked %d times after the period, want 2", n)
	}
	if _, e := met.get(string(host)); e != 0 {
		t.Fatalf("entries after a successful answer: %d, want 0", e)
	}
}

// TestFailuresNotRemembered: only the origin's not-found is remembered:
// a 5xx, a 429, a timeout, a host that is no provider registry and a
// caller's cancellation are asked again each time.
func TestFailuresNotRemembered(t *testing.T) {
	failures := map[string]error{
		"503":          &discovery.OriginError{Host: string(host), Op: discovery.OpVersions, StatusCode: 503},
		"429":          &discovery.OriginError{Host: string(host), Op: discovery.OpVersions, StatusCode: 429},
		"timeout":      &discovery.OriginError{Host: string(host), Op: discovery.OpVersions, Err: context.DeadlineExceeded},
		"no registry":  fmt.Errorf("%s: %w", host, discovery.ErrNoProviderService),
		"discovery":    &discovery.OriginError{Host: string(host), Op: discovery.OpDiscovery, StatusCode: 500},
		"canceled":     context.Canceled,
		"not allowed":  fmt.Errorf("%w: %s", discovery.ErrHostNotAllowed, host),
		"private addr": &discovery.OriginError{Host: string(host), Op: discovery.OpVersions, Err: discovery.ErrPrivateAddress},
	}
	for name, failure := range failures {
		t.Run(name, func(t *testing.T) {
			m, _, met := newMemory(t, time.Minute, 0)
			o := &origin{answer: func() error { return failure }}
			po, mo := m.Providers(o), m.Modules(o)
			mod := addrs.Module{Hostname: host, Namespace: "ns", Name: "name", System: "aws"}
			for range 3 {
				po.Versions(context.Background(), provider("p"))
				po.Package(context.Background(), provider("p"), "1.0.0", linux)
				mo.ModuleVersions(context.Background(), mod)
				mo.ModuleLocation(context.Background(), mod, "1.0.0")
			}
			if n := o.calls.Load(); n != 12 {
				t.Fatalf("origin asked %d times, want 12 (none remembered)", n)
			}
			if r, e := met.get(string(host)); r != 0 || e != 0 {
				t.Fatalf("metrics: remembered %d, entries %d; want 0, 0", r, e)
			}
		})
	}
}

// TestDisabled: a zero TTL remembers nothing, and every question is
// asked of the origin; a nil Memory is the origin itself.
func TestDisabled(t *testing.T) {
	m, _, met := newMemory(t, 0, 0)
	o := &origin{answer: func() error { return notFound("x") }}
	po, mo := m.Providers(o), m.Modules(o)
	for range 3 {
		po.Versions(context.Background(), provider("typo"))
		mo.ModuleVersions(context.Background(), addrs.Module{Hostname: host, Namespace: "ns", Name: "typo", System: "aws"})
	}
	if n := o.calls.Load(); n != 6 {
		t.Fatalf("origin asked %d times, want 6", n)
	}
	if r, e := met.get(string(host)); r != 0 || e != 0 || m.Entries(host) != 0 || m.TTL() != 0 {
		t.Fatalf("remembered %d, entries %d (%d), TTL %v; want nothing", r, e, m.Entries(host), m.TTL())
	}

	var none *Memory
	if po := none.Providers(o); po != o {
		t.Fatalf("Providers of a nil Memory is %T, want the origin itself", po)
	}
	if mo := none.Modules(o); mo != o {
		t.Fatalf("Modules of a nil Memory is %T, want the origin itself", mo)
	}
	none.ForgetProvider(provider("x")) // no panic
	none.ForgetModule(addrs.Module{Hostname: host})
	none.SetTTL(time.Minute)
	none.SetMaxEntries(1)
	if none.Entries(host) != 0 || none.TTL() != 0 || none.MaxEntries() != 0 {
		t.Fatal("a nil Memory holds entries")
	}
}

// TestSetTTL: a period changed while serving applies to the answers
// remembered already (a shorter one forgets those given longer ago, a
// longer one keeps them longer); zero forgets everything at once and
// remembers nothing more until a period is given again.
func TestSetTTL(t *testing.T) {
	m, c, met := newMemory(t, time.Hour, 0)
	o := &origin{answer: func() error { return notFound("x") }}
	po := m.Providers(o)
	ctx := context.Background()
	ask := func(names ...string) {
		for _, n := range names {
			po.Versions(ctx, provider(n))
		}
	}
	calls := func(want int64) {
		t.Helper()
		if n := o.calls.Load(); n != want {
			t.Fatalf("origin asked %d times, want %d", n, want)
		}
	}
	ask("a")
	c.add(10 * time.Minute)
	ask("b", "a", "b")
	calls(2)

	// a was given 10 minutes ago, b just now.
	m.SetTTL(5 * time.Minute)
	ask("b", "a")
	calls(3)
	m.SetTTL(time.Hour)
	c.add(30 * time.Minute)
	ask("b", "a")
	calls(3)

	m.SetTTL(0)
	if e := m.Entries(host); e != 0 {
		t.Fatalf("%d entries with a period of zero, want none", e)
	}
	if _, e := met.get(string(host)); e != 0 {
		t.Fatalf("entries gauge %d with a period of zero, want 0", e)
	}
	ask("a", "a", "b")
	calls(6)
	if e := m.Entries(host); e != 0 || m.TTL() != 0 {
		t.Fatalf("%d entries, TTL %v: remembered with a period of zero", e, m.TTL())
	}

	m.SetTTL(time.Minute)
	ask("a", "a")
	calls(7)
}

// TestSetMaxEntries: a bound lowered while serving drops the least
// recently used answers at once; one raised keeps more.
func TestSetMaxEntries(t *testing.T) {
	m, _, met := newMemory(t, time.Hour, 10)
	o := &origin{answer: func() error { return notFound("x") }}
	po := m.Providers(o)
	ctx := context.Background()
	for i := range 10 {
		po.Versions(ctx, provider(fmt.Sprint("p", i)))
	}
	m.SetMaxEntries(4)
	if e, max := m.Entries(host), m.MaxEntries(); e != 4 || max != 4 {
		t.Fatalf("%d entries, bound %d; want 4, 4", e, max)
	}
	if _, e := met.get(string(host)); e != 4 {
		t.Fatalf("entries gauge %d, want 4", e)
	}
	before := o.calls.Load()
	po.Versions(ctx, provider("p9")) // the newest, kept
	po.Versions(ctx, provider("p0")) // the oldest, dropped
	if n := o.calls.Load() - before; n != 1 {
		t.Fatalf("asked the origin %d times, want 1 (the oldest name only)", n)
	}
	m.SetMaxEntries(20)
	for i := range 20 {
		po.Versions(ctx, provider(fmt.Sprint("q", i)))
	}
	if e := m.Entries(host); e != 20 {
		t.Fatalf("%d entries after raising the bound, want 20", e)
	}
	m.SetMaxEntries(0)
	if m.MaxEntries() != DefaultMaxEntries {
		t.Fatalf("bound %d after 0, want the default %d", m.MaxEntries(), DefaultMaxEntries)
	}
}

// TestKeys: each question is remembered on its own: versions, each
// version's platform, modules' versions and locations; other origins
// than the configured are not remembered.
func TestKeys(t *testing.T) {
	m, _, _ := newMemory(t, time.Minute, 0)
	o := &origin{answer: func() error { return notFound("x") }}
	po, mo := m.Providers(o), m.Modules(o)
	ctx := context.Background()
	mod := addrs.Module{Hostname: host, Namespace: "ns", Name: "name", System: "aws"}
	other := addrs.Provider{Hostname: "other.example.com", Namespace: "hashicorp", Type: "typo"}
	ask := func() {
		po.Versions(ctx, provider("a"))
		po.Versions(ctx, provider("ab"))
		po.Package(ctx, provider("a"), "1.0.0", linux)
		po.Package(ctx, provider("a"), "1.0.0", addrs.Platform{OS: "darwin", Arch: "arm64"})
		po.Package(ctx, provider("a"), "1.0.1", linux)
		mo.ModuleVersions(ctx, mod)
		mo.ModuleLocation(ctx, mod, "1.0.0")
		mo.ModuleLocation(ctx, mod, "1.0.1")
		po.Versions(ctx, other)
		po.FetchSums(ctx, provider("a"), &discovery.Package{}, 1, 1)
	}
	ask()
	if n := o.calls.Load(); n != 10 {
		t.Fatalf("first round asked %d, want 10", n)
	}
	ask()
	// Remembered: the 8 not-founds of host; asked again: the other
	// origin's and the checksums (never remembered).
	if n := o.calls.Load(); n != 12 {
		t.Fatalf("after the second round asked %d, want 12", n)
	}
	if e := m.Entries(host); e != 8 {
		t.Fatalf("entries %d, want 8", e)
	}

	m.ForgetProvider(provider("a"))
	if e := m.Entries(host); e != 4 {
		t.Fatalf("entries after forgetting provider a: %d, want 4 (ab's and the module's kept)", e)
	}
	m.ForgetModule(mod)
	if e := m.Entries(host); e != 1 {
		t.Fatalf("entries after forgetting the module: %d, want 1", e)
	}
	ask()
	if n := o.calls.Load(); n != 12+9 {
		t.Fatalf("after forgetting, asked %d, want 21 (all but ab's versions, remembered still)", n)
	}
}

// TestSuccessForgets: a question the origin answers forgets the
// not-found remembered for it (when its period ended), and only that.
func TestSuccessForgets(t *testing.T) {
	m, c, _ := newMemory(t, time.Minute, 0)
	var found atomic.Bool
	o := &origin{answer: func() error {
		if found.Load() {
			return nil
		}
		return notFound("x")
	}}
	po := m.Providers(o)
	ctx := context.Background()
	po.Versions(ctx, provider("a"))
	po.Package(ctx, provider("a"), "1.0.0", linux)
	c.add(2 * time.Minute)
	found.Store(true)
	po.Versions(ctx, provider("a"))
	if e := m.Entries(host); e != 1 {
		t.Fatalf("entries %d, want 1 (the package's, not asked again)", e)
	}
}

// TestBound: however many names are asked for, at most MaxEntries
// answers are held, the least recently used dropped.
func TestBound(t *testing.T) {
	const max = 50
	m, _, met := newMemory(t, time.Hour, max)
	o := &origin{answer: func() error { return notFound("x") }}
	po := m.Providers(o)
	ctx := context.Background()
	for i := range 10 * max {
		po.Versions(ctx, provider(fmt.Sprintf("made-up-%d", i)))
		if e := m.Entries(host); e > max {
			t.Fatalf("after %d names, %d entries held, want at most %d", i+1, e, max)
		}
	}
	if _, e := met.get(string(host)); e != max {
		t.Fatalf("entries gauge %d, want %d", e, max)
	}
	before := o.calls.Load()
	// The newest are remembered, the oldest were dropped.
	po.Versions(ctx, provider(fmt.Sprintf("made-up-%d", 10*max-1)))
	if o.calls.Load() != before {
		t.Fatal("the newest name was asked of the origin again")
	}
	po.Versions(ctx, provider("made-up-0"))
	if o.calls.Load() != before+1 {
		t.Fatal("the oldest name was not dropped")
	}
}

// TestConcurrent: many goroutines asking for many names, with forgets,
// the clock moving and the period turned off and on again, under -race;
// the bound holds.
func TestConcurrent(t *testing.T) {
	const max = 20
	m, c, _ := newMemory(t, time.Minute, max)
	o := &origin{answer: func() error { return notFound("x") }}
	po, mo := m.Providers(o), m.Modules(o)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			ctx := context.Background()
			for i := range 200 {
				p := provider(fmt.Sprintf("p%d", (g*7+i)%60))
				po.Versions(ctx, p)
				po.Package(ctx, p, "1.0.0", linux)
				mo.ModuleVersions(ctx, addrs.Module{Hostname: host, Namespace: "ns", Name: p.Type, System: "aws"})
				if i%50 == 0 {
					m.ForgetProvider(p)
					c.add(10 * time.Second)
				}
				if g == 0 && i%40 == 20 {
					m.SetTTL(0)
					m.SetMaxEntries(max)
					m.SetTTL(time.Minute)
				}
				if e := m.Entries(host); e > max {
					t.Errorf("%d entries held, want at most %d", e, max)
				}
			}
		})
	}
	wg.Wait()
}

// TestModuleSpellings: a module's 404 answers again only the spelling
// the origin was asked in (a registry may match names with their case,
// and then another spelling may exist): the other spelling is asked of
// the origin; forgetting the module forgets every spelling.
func TestModuleSpellings(t *testing.T) {
	m, _, _ := newMemory(t, time.Hour, 0)
	o := &origin{answer: func() error { return notFound("x") }}
	mo := m.Modules(o)
	ctx := context.Background()
	spelt := func(ns, name string) addrs.Module {
		t.Helper()
		mod, err := addrs.NewModule(host, ns, name, "aws")
		if err != nil {
			t.Fatal(err)
		}
		return mod
	}
	upper, lower := spelt("Acme", "VPC"), spelt("acme", "vpc")
	if upper.String() != lower.String() {
		t.Fatal("two spellings of one module are two modules")
	}
	for range 2 {
		mo.ModuleVersions(ctx, upper)
		mo.ModuleLocation(ctx, upper, "1.0.0")
	}
	if n := o.calls.Load(); n != 2 {
		t.Fatalf("origin asked %d times for one spelling, want 2 (its versions and its location, once each)", n)
	}
	for range 2 {
		mo.ModuleVersions(ctx, lower)
		mo.ModuleLocation(ctx, lower, "1.0.0")
	}
	if n := o.calls.Load(); n != 4 {
		t.Fatalf("origin asked %d times, want 4: another spelling is asked once itself", n)
	}
	if e := m.Entries(host); e != 4 {
		t.Fatalf("%d entries, want 4", e)
	}
	m.ForgetModule(spelt("ACME", "vpc"))
	if e := m.Entries(host); e != 0 {
		t.Fatalf("%d entries after forgetting the module in a third spelling, want 0", e)
	}
}

package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// statusHarness returns a mirror that has cached version 1.0.0 of the test
// provider for linux_amd64 only.
func statusHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := newHarness(t, harnessOptions{cfg: cfg, origin: fakeorigin.Options{}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	if r := h.get(archivePath("1.0.0", "linux_amd64")); r.status != 200 || r.err != nil {
		t.Fatalf("archive: status %d err %v", r.status, r.err)
	}
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	return h
}

func TestStatusJSON(t *testing.T) {
	t.Parallel()
	h := statusHarness(t, Config{PublicURL: "https://mirror.example.com/", Version: "1.2.3"})
	r := h.get("/?format=json")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var st Status
	r.json(t, &st)
	if st.MirrorURL != "https://mirror.example.com/" || st.Version != "1.2.3" {
		t.Errorf("mirror_url %q version %q", st.MirrorURL, st.Version)
	}
	if len(st.AllowedOrigins) != 1 || st.AllowedOrigins[0] != originHost {
		t.Errorf("allowed_origins %v", st.AllowedOrigins)
	}
	size := int64(len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")))
	if st.Archives != 1 || st.Bytes != size {
		t.Errorf("cached_archives %d cached_bytes %d, want 1 and %d", st.Archives, st.Bytes, size)
	}
	if len(st.Providers) != 1 {
		t.Fatalf("providers %+v, want one", st.Providers)
	}
	p := st.Providers[0]
	if p.Address != originHost+"/"+ns+"/"+typ || len(p.Versions) != 1 || p.Versions[0].Version != "1.0.0" {
		t.Fatalf("provider %+v", p)
	}
	cached := map[string]bool{}
	for _, pl := range p.Versions[0].Platforms {
		cached[pl.Platform] = pl.Cached
		if pl.Cached && pl.Size != size {
			t.Errorf("%s: size %d, want %d", pl.Platform, pl.Size, size)
		}
	}
	if c, ok := cached["linux_amd64"]; !ok || !c {
		t.Errorf("linux_amd64 not listed as cached: %+v", p.Versions[0].Platforms)
	}
	for pl, c := range cached {
		if pl != "linux_amd64" && c {
			t.Errorf("%s listed as cached, but only linux_amd64 was fetched", pl)
		}
	}
}

// TestStatusPageNotFramed: the status page says no other site may show it
// in a frame (Content-Security-Policy's frame-ancestors, which default-src
// does not stand for, and X-Frame-Options for browsers without it), where
// any page could frame it and lay its own text over it (clickjacking: a
// configuration snippet to copy that is not the mirror's).
func TestStatusPageNotFramed(t *testing.T) {
	t.Parallel()
	h := statusHarness(t, Config{})
	r := h.get("/")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q: no frame-ancestors 'none'", csp)
	}
	if xfo := r.header.Get("X-Frame-Options"); xfo != "DENY" {
		t.Errorf("X-Frame-Options %q, want DENY", xfo)
	}
}

func TestStatusHTML(t *testing.T) {
	t.Parallel()
	h := statusHarness(t, Config{})
	r := h.get("/")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	body := string(r.body)
	// Without --public-url the block names the URL the page was asked on.
	host := strings.TrimPrefix(h.http.URL, "http://")
	wantBlock := "provider_installation {\n  network_mirror {\n    url = \"https://" + host + "/\"\n  }\n}"
	if !strings.Contains(body, wantBlock) {
		t.Errorf("page lacks the provider_installation block %q:\n%s", wantBlock, body)
	}
	row := "<td><code>" + originHost + "/<wbr>" + ns + "/<wbr>" + typ + "</code></td><td>1.0.0</td>"
	if !strings.Contains(body, row) {
		t.Errorf("page lacks the provider row %q:\n%s", row, body)
	}
	if !strings.Contains(body, `linux_amd64 <span class="ok"`) || strings.Count(body, "✓</span>") != 1 {
		t.Errorf("want exactly one cached mark, on linux_amd64:\n%s", body)
	}
	totals := fmt.Sprintf("1 archive cached, %d B in all.", len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")))
	if !strings.Contains(body, totals) {
		t.Errorf("page lacks the cache totals %q:\n%s", totals, body)
	}
}

func TestStatusHTMLEmptyCache(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	r := h.get("/")
	if r.status != 200 || !strings.Contains(string(r.body), "Nothing yet") || strings.Contains(string(r.body), `id="providers"`) {
		t.Errorf("empty cache page: status %d\n%s", r.status, r.body)
	}
}

func TestStatusTemplateEscapes(t *testing.T) {
	t.Parallel()
	const evil = `"><script>alert(1)</script><img src=x onerror=alert(2)>`
	st := &Status{
		MirrorURL:      "https://m.example/" + evil,
		Version:        evil,
		AllowedOrigins: []string{evil},
		Platforms:      []string{evil},
		Providers: []StatusProvider{{
			Address:  evil,
			Versions: []StatusVersion{{Version: evil, Platforms: []StatusPlatform{{Platform: evil, Cached: true, Size: 1}}}},
		}},
		Generated:  time.Unix(0, 0).UTC(),
		Health:     Health{Cache: HealthCacheNotWritable, CacheError: evil, SharedStore: HealthSharedDegraded, SharedStoreError: evil},
		Origins:    []OriginHealth{{Host: evil, State: "failing", LastError: &OriginFailure{Cause: evil}}},
		Policy:     &StatusPolicy{Rules: []string{evil}},
		ClientAuth: &AuthLimitStatus{FailedAttempts: map[string]uint64{evil: 1}, FailedTotal: 1},
	}
	st.OriginTrouble = originTrouble(st.Origins)
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, st); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, bad := range []string{"<script>", "<img", `"><script`, `"><img`} {
		if strings.Contains(out, bad) {
			t.Errorf("output contains unescaped %q:\n%s", bad, out)
		}
	}
	if n := strings.Count(out, "&lt;script&gt;alert(1)&lt;/script&gt;"); n < 12 {
		t.Errorf("hostile text shown escaped %d times, want at least 12 (every field):\n%s", n, out)
	}
}

// fakeHealthStore is a cache as the health block sees it.
type fakeHealthStore struct {
	pingErr       error
	free, reserve int64
	damaged       int
	noDiskReport
}

// budgetHealthStore is a cache with a size limit: it has a disk budget.
type budgetHealthStore struct {
	fakeHealthStore
	used, budget int64
}

func (f budgetHealthStore) DiskBudget() (used, budget int64, ok bool) { return f.used, f.budget, true }

func (f fakeHealthStore) Ping() error          { return f.pingErr }
func (f fakeHealthStore) FreeBytes() int64     { return f.free }
func (f fakeHealthStore) Reserve() int64       { return f.reserve }
func (f fakeHealthStore) DamagedArchives() int { return f.damaged }

func TestStatusHealthJSON(t *testing.T) {
	t.Parallel()
	full := fmt.Errorf("%w: 10 MiB free, below the 1.0 GiB reserve", cache.ErrNotWritable)
	down := func() error { return errors.New("shared store unavailable: connection refused") }
	failing := func() error { return errors.New("the last call failed, the last with a connection refused") }
	tests := []struct {
		name    string
		health  *HealthSource // nil: the harness's in-memory cache
		offline bool
		want    Health
	}{
		{name: "in-memory cache, no shared store",
			want: Health{Cache: HealthCacheWritable, DamagedArchives: ptr(0)}},
		{name: "cache not writable, shared store down",
			health: &HealthSource{Store: fakeHealthStore{pingErr: full, free: 10 << 20, reserve: 1 << 30}, Shared: setAsideShared(down())},
			want: Health{Cache: HealthCacheNotWritable, CacheError: full.Error(), DiskFreeBytes: ptr(int64(10 << 20)), DiskReserveBytes: ptr(int64(1 << 30)),
				SharedStore: HealthSharedDegraded, SharedStoreError: down().Error(), DamagedArchives: ptr(0)}},
		{name: "writable, disk known, shared store up",
			health: &HealthSource{Store: fakeHealthStore{free: 5 << 30, reserve: 1 << 30}, Shared: reachableShared},
			want:   Health{Cache: HealthCacheWritable, DiskFreeBytes: ptr(int64(5 << 30)), DiskReserveBytes: ptr(int64(1 << 30)), SharedStore: HealthSharedOK, DamagedArchives: ptr(0)}},
		{name: "shared store failing, still asked",
			health: &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1}, Shared: failingShared(failing())},
			want:   Health{Cache: HealthCacheWritable, SharedStore: HealthSharedFailing, SharedStoreError: failing().Error(), DamagedArchives: ptr(0)}},
		{name: "shared store set aside, whatever its last calls",
			health: &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1}, Shared: func() (error, error) { return down(), failing() }},
			want:   Health{Cache: HealthCacheWritable, SharedStore: HealthSharedDegraded, SharedStoreError: down().Error(), DamagedArchives: ptr(0)}},
		{name: "shared store objects refused",
			health: &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1}, Shared: reachableShared, SharedRejected: func() int64 { return 3 }},
			want:   Health{Cache: HealthCacheWritable, SharedStore: HealthSharedOK, SharedStoreRejected: 3, DamagedArchives: ptr(0)}},
		{name: "archives found damaged",
			health: &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1, damaged: 2}},
			want:   Health{Cache: HealthCacheWritable, DamagedArchives: ptr(2)}},
		{name: "disk checks off",
			health: &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1}},
			want:   Health{Cache: HealthCacheWritable, DamagedArchives: ptr(0)}},
		{name: "sealed", offline: true,
			want: Health{Cache: HealthCacheWritable, Offline: true, DamagedArchives: ptr(0)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{cfg: Config{Health: tc.health}, engine: mirror.Config{Offline: tc.offline}})
			r := h.get("/?format=json")
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			var st Status
			r.json(t, &st)
			if !reflect.DeepEqual(st.Health, tc.want) {
				t.Errorf("health %s, want %s", healthString(st.Health), healthString(tc.want))
			}
			// The JSON names the fields docs/operations.md documents, and only those.
			var raw struct {
				Health map[string]any `json:"health"`
			}
			r.json(t, &raw)
			for k := range raw.Health {
				if !slices.Contains([]string{"cache", "cache_error", "disk_free_bytes", "disk_reserve_bytes", "offline", "shared_store", "shared_store_error", "shared_store_rejected", "damaged_archives"}, k) {
					t.Errorf("undocumented health field %q", k)
				}
			}
			for _, k := range []string{"offline", "damaged_archives"} {
				if _, ok := raw.Health[k]; !ok {
					t.Errorf("health lacks %s: %v", k, raw.Health)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func healthString(h Health) string {
	b, _ := json.Marshal(h)
	return string(b)
}

// The health block names no provider, so it is shown to every request,
// also when client authentication hides the provider list.
func TestStatusHealthShownWithoutToken(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	a, err := NewAuth(AuthConfig{TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))}, SigningKey: bytes.Repeat([]byte{7}, 32), URLTTL: time.Hour, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	down := func() error { return errors.New("shared store unavailable: timeout") }
	h := newHarness(t, harnessOptions{cfg: Config{Auth: a, Health: &HealthSource{Store: fakeHealthStore{pingErr: cache.ErrNotWritable, free: 1, reserve: 2}, Shared: setAsideShared(down())}}})
	var st Status
	h.get("/?format=json").json(t, &st)
	if !st.ProvidersHidden {
		t.Fatal("providers not hidden without a token")
	}
	if st.Health.Cache != HealthCacheNotWritable || st.Health.SharedStore != HealthSharedDegraded {
		t.Errorf("health without a token: %s", healthString(st.Health))
	}
	body := string(h.get("/").body)
	for _, want := range []string{`Cache: <span class="bad">not writable</span>`, `Shared store: <span class="bad">degraded</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("page without a token lacks %q:\n%s", want, body)
		}
	}
}

func TestStatusHealthHTML(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		health  *HealthSource
		offline bool
		want    []string
		notWant []string
	}{
		{name: "healthy, online, no shared store",
			want:    []string{`<li id="health-cache">Cache: <span class="ok">writable</span>.</li>`, `<li id="health-offline">Online:`},
			notWant: []string{`id="health-shared"`, "Sealed", `id="health-damaged"`, `id="health-shared-store"`, `id="health-certificate"`}},
		{name: "shared store failing",
			health:  &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1}, Shared: failingShared(errors.New("the last call failed, the last with a timeout"))},
			want:    []string{`<li id="health-shared">Shared store: <span class="warn">failing</span>: the last call failed, the last with a timeout.</li>`},
			notWant: []string{"reachable"}},
		{name: "archives found damaged",
			health: &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1, damaged: 2}},
			want: []string{`<li id="health-damaged"><span class="bad">2 archives found damaged where they are stored</span>: kept and not served;`,
				"<code>tfmirror cache verify</code> names them (docs/operations.md, &ldquo;Checking the cache&rdquo;).</li>"}},
		{name: "an archive found damaged",
			health: &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1, damaged: 1}},
			want:   []string{`<span class="bad">1 archive found damaged where it is stored</span>`}},
		{name: "full disk, shared store down",
			health: &HealthSource{Store: fakeHealthStore{pingErr: fmt.Errorf("%w: disk full", cache.ErrNotWritable), free: 10 << 20, reserve: 1 << 30},
				Shared: setAsideShared(errors.New("shared store unavailable: refused"))},
			want: []string{`Cache: <span class="bad">not writable</span>: cache not writable: disk full.`,
				"; 10 MiB free on its disk, writes stop below 1.0 GiB.</li>",
				`Shared store: <span class="bad">degraded</span>`, "shared store unavailable: refused"}},
		{name: "size limit",
			health: &HealthSource{Store: budgetHealthStore{fakeHealthStore{free: 5 << 30, reserve: 1 << 30}, 300 << 20, 284 << 20}},
			want:   []string{`Cache: <span class="ok">writable</span>; 5.0 GiB free on its disk, writes stop below 1.0 GiB; the data directory takes 300 MiB of its 284 MiB budget.</li>`}},
		{name: "certificate expiring in months",
			health:  &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1}, Certificate: servedCert(100*24*time.Hour, false)},
			want:    []string{`<li id="health-certificate">TLS certificate served: expires ` + time.Now().Add(100*24*time.Hour).UTC().Format("2006-01-02")},
			notWant: []string{"within 14 days", "was refused", "Certificates clients can check"}},
		{name: "certificate expiring within days, its renewal refused",
			health: &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1}, Certificate: servedCert(3*24*time.Hour, true)},
			want: []string{`TLS certificate served: expires <span class="bad">` + time.Now().Add(3*24*time.Hour).UTC().Format("2006-01-02"),
				"</span>, within 14 days: every client refuses the mirror once it has expired; ",
				`<span class="bad">the last one read from the operator's files, or issued from the generated CA, was refused</span>, and the one in force stays (the log says why) (docs/operations.md, &ldquo;Certificates clients can check&rdquo;).</li>`}},
		{name: "origin CAs refused",
			health: &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1}, OriginCAsRefused: func() bool { return true }},
			want:   []string{`<li id="health-origin-cas"><span class="bad">The files of <code>origin_ca_file</code> changed and were refused</span>: origins are trusted with the CAs read from them before`}},
		{name: "origin CAs in force",
			health:  &HealthSource{Store: fakeHealthStore{free: -1, reserve: -1}, OriginCAsRefused: func() bool { return false }},
			notWant: []string{`id="health-origin-cas"`}},
		{name: "sealed, shared store up", offline: true,
			health: &HealthSource{Store: fakeHealthStore{free: 5 << 30, reserve: 1 << 30}, Shared: reachableShared},
			want: []string{`Cache: <span class="ok">writable</span>; 5.0 GiB free on its disk, writes stop below 1.0 GiB.</li>`,
				`<li id="health-offline">Sealed (<code>--offline</code>)`, `Shared store: <span class="ok">reachable</span>`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{cfg: Config{Health: tc.health}, engine: mirror.Config{Offline: tc.offline}})
			r := h.get("/")
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			body := string(r.body)
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q:\n%s", w, body)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(body, w) {
					t.Errorf("page has %q:\n%s", w, body)
				}
			}
		})
	}
}

// servedCert is a HealthSource.Certificate: a certificate expiring in
// left, refused or not.
func servedCert(left time.Duration, refused bool) func() (time.Time, bool) {
	expires := time.Now().Add(left)
	return func() (time.Time, bool) { return expires, refused }
}

// countingStore counts the status page's pings of the cache.
type countingStore struct {
	mu    sync.Mutex
	pings int
	err   error
	noDiskReport
}

func (c *countingStore) Ping() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pings++
	return c.err
}

func (c *countingStore) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pings
}

// pageHealth loads the status page's JSON and returns its health block.
func pageHealth(t *testing.T, h *harness) Health {
	t.Helper()
	r := h.get("/?format=json")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var st Status
	r.json(t, &st)
	return st.Health
}

// However often the status page is loaded, it pings the cache (a small
// write) at most once a second, and shows a change after that second.
func TestStatusHealthChecksAtMostOnceASecond(t *testing.T) {
	t.Parallel()
	store := &countingStore{}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var clock sync.Mutex
	h := newHarness(t, harnessOptions{cfg: Config{Health: &HealthSource{Store: store}, Now: func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return now
	}}})
	for range 20 {
		if got := pageHealth(t, h); got.Cache != HealthCacheWritable {
			t.Fatalf("health %s, want writable", healthString(got))
		}
	}
	if n := store.count(); n != 1 {
		t.Fatalf("20 views within a second pinged the cache %d times, want 1", n)
	}
	store.mu.Lock()
	store.err = fmt.Errorf("%w: disk full", cache.ErrNotWritable)
	store.mu.Unlock()
	clock.Lock()
	now = now.Add(HealthTTL)
	clock.Unlock()
	if got := pageHealth(t, h); got.Cache != HealthCacheNotWritable || store.count() != 2 {
		t.Fatalf("a second later: health %s after %d pings, want not writable after 2", healthString(got), store.count())
	}
}

// writableStore is a countingStore that can also say, without a write,
// that it has stopped writing, as *cache.Store does below the reserve.
type writableStore struct {
	countingStore
	stopped error
}

func (w *writableStore) Writable() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

// A cache that has stopped writing shows on the status page at once, as on
// /readyz, not a second later; while it writes, the page still pings at
// most once a second.
func TestStatusHealthShowsACacheThatStoppedWritingAtOnce(t *testing.T) {
	t.Parallel()
	store := &writableStore{}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	h := newHarness(t, harnessOptions{cfg: Config{Health: &HealthSource{Store: store}, Now: func() time.Time { return now }}})
	for range 5 {
		if got := pageHealth(t, h); got.Cache != HealthCacheWritable {
			t.Fatalf("health %s, want writable", healthString(got))
		}
	}
	if n := store.count(); n != 1 {
		t.Fatalf("5 views pinged the cache %d times, want 1", n)
	}
	reason := fmt.Errorf("%w: below the reserve", cache.ErrNotWritable)
	store.mu.Lock()
	store.stopped, store.err = reason, reason
	store.mu.Unlock()
	for range 3 {
		if got := pageHealth(t, h); got.Cache != HealthCacheNotWritable || !strings.Contains(got.CacheError, "reserve") {
			t.Fatalf("within the same second: health %s, want not writable below the reserve", healthString(got))
		}
	}
	if n := store.count(); n != 2 {
		t.Errorf("the cache was pinged %d times, want 2: once more when it stopped writing, then the memo", n)
	}
}

// scanCounter is an engine whose ListCachedAfter calls are counted.
type scanCounter struct {
	Engine
	scans atomic.Int64
}

func (c *scanCounter) ListCachedAfter(prefix, after string, fn func(mirror.CachedVersion) error) error {
	c.scans.Add(1)
	return c.Engine.ListCachedAfter(prefix, after, fn)
}

// However many views of the status page, HTML and JSON, come at once, the
// cache is scanned at most once a second; a second later the page shows
// what was cached meanwhile.
func TestStatusScansAtMostOnceASecond(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	var clock sync.Mutex
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	engine := &scanCounter{Engine: packagesOf(t, h.engine)}
	srv, err := New(Config{Health: &HealthSource{Store: h.store}, Now: func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return now
	}}, engine)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	view := func(path string) Status {
		resp, err := ts.Client().Get(ts.URL + path)
		if err != nil {
			t.Error(err)
			return Status{}
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
		var st Status
		if path != "/" {
			json.Unmarshal(body, &st)
		}
		return st
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			for range 10 {
				if i%2 == 0 {
					view("/")
				} else {
					view("/?format=json")
				}
			}
		})
	}
	wg.Wait()
	if n := engine.scans.Load(); n != 1 {
		t.Fatalf("320 views within a second scanned the cache %d times, want 1", n)
	}

	if r := h.get(archivePath("1.0.0", "linux_amd64")); r.status != 200 || r.err != nil {
		t.Fatalf("archive: status %d err %v", r.status, r.err)
	}
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	if st := view("/?format=json"); len(st.Providers) != 0 {
		t.Errorf("within the second: %d providers, want the remembered 0", len(st.Providers))
	}
	clock.Lock()
	now = now.Add(statusScanTTL)
	clock.Unlock()
	if st := view("/?format=json"); len(st.Providers) != 1 || engine.scans.Load() != 2 {
		t.Errorf("a second later: %d providers after %d scans, want 1 after 2", len(st.Providers), engine.scans.Load())
	}
}

// The status page lists the cache a page at a time: ?limit= versions,
// the next page from ?after= on (the JSON's next_after, the HTML's "Next"
// link), and ?prefix= keeps the providers whose address starts with it.
func TestStatusPages(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	vs := []string{"1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0"}
	h.origin.AddProvider(ns, typ, vs, platforms)
	h.origin.AddProvider(ns, "other", []string{"2.0.0"}, platforms)
	for _, v := range vs {
		if r := h.get(providerPath(v + ".json")); r.status != 200 {
			t.Fatalf("%s.json: %d %s", v, r.status, r.body)
		}
	}
	if r := h.get("/" + originHost + "/" + ns + "/other/2.0.0.json"); r.status != 200 {
		t.Fatalf("other 2.0.0.json: %d %s", r.status, r.body)
	}
	addr := originHost + "/" + ns + "/" + typ
	page := func(query string) Status {
		t.Helper()
		r := h.get("/?format=json&" + query)
		if r.status != 200 {
			t.Fatalf("?%s: %d %s", query, r.status, r.body)
		}
		var st Status
		r.json(t, &st)
		return st
	}
	listed := func(st Status) []string {
		var out []string
		for _, p := range st.Providers {
			for _, v := range p.Versions {
				out = append(out, p.Address+" "+v.Version)
			}
		}
		return out
	}

	// Three pages of two: random 1.0.0 to 1.4.0, then other 2.0.0 (key order: "other" < "random").
	var all []string
	query := "limit=2"
	for i := 0; ; i++ {
		if i == 4 {
			t.Fatalf("more than 3 pages: %v", all)
		}
		st := page(query)
		if st.Page.Limit != 2 || len(listed(st)) > 2 {
			t.Fatalf("page %d: limit %d, %d versions", i, st.Page.Limit, len(listed(st)))
		}
		all = append(all, listed(st)...)
		if st.Page.NextAfter == "" {
			if st.Page.Next != "" {
				t.Errorf("last page has next %q", st.Page.Next)
			}
			break
		}
		if want := "?after=" + url.QueryEscape(st.Page.NextAfter) + "&limit=2"; st.Page.Next != want {
			t.Errorf("next %q, want %q", st.Page.Next, want)
		}
		query = strings.TrimPrefix(st.Page.Next, "?")
	}
	want := []string{originHost + "/" + ns + "/other 2.0.0"}
	for _, v := range vs {
		want = append(want, addr+" "+v)
	}
	if !slices.Equal(all, want) {
		t.Errorf("pages listed %v, want %v", all, want)
	}

	// A prefix: only that provider; case does not matter.
	st := page("prefix=" + url.QueryEscape(strings.ToUpper(originHost+"/"+ns+"/RAN")))
	if got := listed(st); len(got) != len(vs) || got[0] != addr+" 1.0.0" || st.Page.NextAfter != "" {
		t.Errorf("prefix: listed %v, next %q", got, st.Page.NextAfter)
	}
	if st := page("prefix=nothing.example/"); len(st.Providers) != 0 {
		t.Errorf("prefix matching nothing listed %v", listed(st))
	}

	// The HTML page links the next page.
	r := h.get("/?limit=2")
	if r.status != 200 || !strings.Contains(string(r.body), `<p id="next"><a href="./?after=`) {
		t.Errorf("HTML page with more versions than the limit has no next link: %d\n%s", r.status, r.body)
	}

	// A prefix or cursor with a control or format character (a
	// right-to-left override, shown back on the page as the address
	// looked for) matches no address and is refused.
	for _, bad := range []string{"limit=0", "limit=1001", "limit=x", "after=" + strings.Repeat("a", 513),
		"prefix=" + url.QueryEscape("registry.terraform.io/‮moc.live"), "after=%00", "module_after=" + url.QueryEscape("a​b"), "prefix=%ff"} {
		if r := h.get("/?format=json&" + bad); r.status != 400 {
			t.Errorf("?%s: status %d, want 400", bad, r.status)
		}
	}
}

// The last check of the whole cache is on the status page, with what it
// found; before the first there is nothing to show.
func TestStatusCacheCheck(t *testing.T) {
	t.Parallel()
	h := statusHarness(t, Config{})
	if body := string(h.get("/").body); strings.Contains(body, `id="health-cache-check"`) {
		t.Errorf("a check is shown before any ran:\n%s", body)
	}
	if err := cachetest.FlipBlobByte(h.store, h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"), 1); err != nil {
		t.Fatal(err)
	}
	if err := h.engine.CacheChecker().VerifyCache(t.Context(), func(cachecheck.Result) {}); err != nil {
		t.Fatal(err)
	}
	if body := string(h.get("/").body); !strings.Contains(body, `<span class="bad">1 of 1 packages damaged</span>`) {
		t.Errorf("the page does not show the damaged package:\n%s", body)
	}
	var st Status
	h.get("/?format=json").json(t, &st)
	if c := st.CacheCheck; c == nil || c.Checked != 1 || c.Failed != 1 || c.At.IsZero() {
		t.Errorf("cache_check %+v, want 1 checked, 1 failed", c)
	}
}

// TestStatusCLIReleases: the page shows the CLI releases door's settings
// for the mirror's own URL, escaped, and the JSON carries them; for a door
// that serves no publisher, why, in their place.
func TestStatusCLIReleases(t *testing.T) {
	t.Parallel()
	snippet := func(u string) string { return "export TFENV_REMOTE=" + u + "releases/hashicorp <&>" }
	h := statusHarness(t, Config{PublicURL: "https://mirror.example.com/", CLIReleases: snippet})
	r := h.get("/")
	if !strings.Contains(string(r.body), `id="cli-releases-block"><code>export TFENV_REMOTE=https://mirror.example.com/releases/hashicorp &lt;&amp;&gt;</code>`) {
		t.Fatalf("page lacks the CLI releases block:\n%s", r.body)
	}
	var st Status
	h.get("/?format=json").json(t, &st)
	if st.CLIReleases != snippet("https://mirror.example.com/") {
		t.Errorf("cli_releases %q", st.CLIReleases)
	}
	h2 := statusHarness(t, Config{})
	if r := h2.get("/"); strings.Contains(string(r.body), "cli-releases-block") {
		t.Error("the block is shown without a releases door")
	}
	// A door that serves no publisher: the page says why, and gives no
	// settings that could only fail.
	h3 := statusHarness(t, Config{PublicURL: "https://mirror.example.com/", CLIReleases: snippet, CLIReleasesOff: "hosts <not> allowed"})
	body := string(h3.get("/").body)
	if strings.Contains(body, "cli-releases-block") || !strings.Contains(body, `id="cli-releases-off" class="muted">The CLIs are not served: hosts &lt;not&gt; allowed`) {
		t.Errorf("a door serving no publisher: the page gives its settings, or does not say why:\n%s", body)
	}
	st = Status{}
	h3.get("/?format=json").json(t, &st)
	if st.CLIReleases != "" || st.CLIReleasesOff != "hosts <not> allowed" {
		t.Errorf("a door serving no publisher: cli_releases %q, cli_releases_off %q", st.CLIReleases, st.CLIReleasesOff)
	}
}

// TestStatusCLIHeld: the CLI versions the policy holds back
// (Config.CLIHeld) are listed with the engine's, in the JSON and in the
// page's table with their kind, and counted in the summary.
func TestStatusCLIHeld(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	held := []unsigned.Version{{Provider: "releases.hashicorp.com/hashicorp/terraform", Version: "1.6.0", Platforms: []string{},
		Kind: "cli", Rule: policy.RuleMinReleaseAge, Reason: "too fresh", AvailableAt: at}}
	h := statusHarness(t, Config{CLIHeld: func() []unsigned.Version { return held }})
	var st Status
	h.get("/?format=json").json(t, &st)
	if len(st.Withheld) != 1 || st.Withheld[0].Kind != "cli" || !st.Withheld[0].AvailableAt.Equal(at) || st.HeldBack == nil || st.HeldBack.Versions != 1 {
		t.Fatalf("withheld %+v, held_back %+v", st.Withheld, st.HeldBack)
	}
	body := string(h.get("/").body)
	if !strings.Contains(body, "terraform</code> <small>(cli)</small>") || !strings.Contains(body, "2030-01-02 03:04 UTC") {
		t.Errorf("the page's held table lacks the CLI version:\n%s", body)
	}
}

// TestStatusOCIBehindAPathPrefix: with a public URL that has a path (a
// proxy sending /tf/ to the mirror), the OCI snippets name the host,
// where OCI clients ask /v2/, and the page says that the proxy must send
// that to the mirror too: the snippets dropped the path without a word.
func TestStatusOCIBehindAPathPrefix(t *testing.T) {
	t.Parallel()
	block := func(host string) string { return "repository_template = \"" + host + "/providers/...\"" }
	for _, tc := range []struct {
		public, rootOnly string
	}{
		{"https://mirror.example.com/tf/", "/tf/"},
		{"https://mirror.example.com/a/b", "/a/b/"},
		{"https://mirror.example.com/", ""},
	} {
		h := statusHarness(t, Config{PublicURL: tc.public, OCIBlock: block})
		var st Status
		h.get("/?format=json").json(t, &st)
		if st.OCIBlock != block("mirror.example.com") || st.OCIRootOnly != tc.rootOnly {
			t.Errorf("public URL %s: oci_block %q, oci_root_only %q, want %q", tc.public, st.OCIBlock, st.OCIRootOnly, tc.rootOnly)
		}
		body := string(h.get("/").body)
		if said := strings.Contains(body, `id="oci-root-only"`); said != (tc.rootOnly != "") {
			t.Errorf("public URL %s: the page says the OCI door needs the host's root: %v", tc.public, said)
		}
	}
}

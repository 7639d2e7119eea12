package discovery

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// flakyRegistry serves discovery and a versions list; the versions
// endpoint answers with the statuses in fail (one per request) before it
// succeeds, each with retryAfter as Retry-After when set.
func flakyRegistry(t *testing.T, retryAfter string, fail ...int) *testServer {
	t.Helper()
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc(wellKnown, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	})
	mux.HandleFunc("/v1/providers/hashicorp/random/versions", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		var status int
		if len(fail) > 0 {
			status, fail = fail[0], fail[1:]
		}
		mu.Unlock()
		if status != 0 {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			http.Error(w, "injected", status)
			return
		}
		writeJSON(w, `{"versions":[{"version":"1.0.0"}]}`)
	})
	return newTestServer(t, mux)
}

const versionsPath = "/v1/providers/hashicorp/random/versions"

// recordSleeps replaces the client's sleep between retries by one that
// records the waits and returns at once.
func recordSleeps(c *Client) func() []time.Duration {
	var mu sync.Mutex
	var waits []time.Duration
	c.tr.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), waits...)
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string
		fail       []int
		wantHits   int
		wantStatus int // 0 = success
		wantWaits  []time.Duration
	}{
		{name: "500 then 502 then success", fail: []int{500, 502}, wantHits: 3},
		{name: "three 503s exhaust the retries", fail: []int{503, 503, 503}, wantHits: 3, wantStatus: 503},
		{name: "429 obeys Retry-After", retryAfter: "3", fail: []int{429}, wantHits: 2, wantWaits: []time.Duration{3 * time.Second}},
		{name: "Retry-After beyond the cap is not retried", retryAfter: "60", fail: []int{429}, wantHits: 1, wantStatus: 429},
		{name: "501 is not retried", fail: []int{501}, wantHits: 1, wantStatus: 501},
		{name: "403 is not retried", fail: []int{403}, wantHits: 1, wantStatus: 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := flakyRegistry(t, tc.retryAfter, tc.fail...)
			c := newTestClient(t, s, func(cfg *Config) {
				cfg.RetryAfterMax = 10 * time.Second
				cfg.BreakerThreshold = -1
			})
			waits := recordSleeps(c)
			_, err := c.Versions(context.Background(), testProvider(s))
			if tc.wantStatus == 0 && err != nil {
				t.Fatalf("Versions: %v", err)
			}
			if tc.wantStatus != 0 {
				wantOriginError(t, err, OpVersions, tc.wantStatus)
			}
			if got := s.count(versionsPath); got != tc.wantHits {
				t.Fatalf("origin saw %d versions requests, want %d", got, tc.wantHits)
			}
			got := waits()
			if len(got) != tc.wantHits-1 {
				t.Fatalf("waited %v between %d attempts", got, tc.wantHits)
			}
			if tc.wantWaits != nil && !equalDurations(got, tc.wantWaits) {
				t.Fatalf("waits = %v, want %v", got, tc.wantWaits)
			}
			for _, w := range got {
				if tc.wantWaits == nil && (w <= 0 || w > 2*time.Millisecond) {
					t.Fatalf("backoff %s outside (0, RetryMaxDelay]", w)
				}
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBackoffGrowsWithJitterAndCap(t *testing.T) {
	c, err := New(Config{RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		for range 50 {
			if d := c.tr.backoff(n); d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", n, d, want/2, want)
			}
		}
	}
}

func TestRetryConnectionFailure(t *testing.T) {
	// The second attempt's dial fails; the third succeeds.
	s := flakyRegistry(t, "")
	var dials atomic.Int32
	inner := mapDialer()
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) == 2 {
				return nil, errors.New("injected connection refused")
			}
			return inner(ctx, network, addr)
		}
	})
	c.tr.base.cur.Load().DisableKeepAlives = true
	if _, err := c.Versions(context.Background(), testProvider(s)); err != nil {
		t.Fatalf("Versions: %v", err)
	}
	if got := s.count(versionsPath); got != 1 {
		t.Fatalf("origin saw %d versions requests, want 1", got)
	}
	if got := dials.Load(); got != 3 {
		t.Fatalf("%d dials, want 3 (discovery, failed attempt, retry)", got)
	}
}

// circuitLog records CircuitOpen calls next to a no-op Observer.
type circuitLog struct {
	noObserver
	mu     sync.Mutex
	events []bool
}

func (l *circuitLog) CircuitOpen(origin string, open bool) {
	l.mu.Lock()
	l.events = append(l.events, open)
	l.mu.Unlock()
}

func (l *circuitLog) get() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.events...)
}

// downableOrigin starts an origin whose versions answer fails with 500
// while down is set, as it is at first.
func downableOrigin(t *testing.T) (*atomic.Bool, *testServer) {
	down := new(atomic.Bool)
	down.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc(wellKnown, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	})
	mux.HandleFunc(versionsPath, func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		writeJSON(w, `{"versions":[{"version":"1.0.0"}]}`)
	})
	return down, newTestServer(t, mux)
}

func TestCircuitBreaker(t *testing.T) {
	down, s := downableOrigin(t)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	obs := &circuitLog{}
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.Retries = -1
		cfg.BreakerThreshold = 3
		cfg.BreakerCooldown = time.Minute
		cfg.Now = clock.Now
		cfg.Observer = obs
	})
	p := testProvider(s)
	ctx := context.Background()

	for i := range 3 {
		_, err := c.Versions(ctx, p)
		wantOriginError(t, err, OpVersions, 500)
		if i < 2 && len(obs.get()) != 0 {
			t.Fatalf("circuit opened after %d failures", i+1)
		}
	}
	if got := obs.get(); len(got) != 1 || !got[0] {
		t.Fatalf("circuit events %v, want [open]", got)
	}
	// Open: fail fast without contacting the origin, naming it.
	_, err := c.Versions(ctx, p)
	oe := wantOriginError(t, err, OpVersions, 0)
	if !errors.Is(err, ErrCircuitOpen) || oe.Host != string(s.host) {
		t.Fatalf("err = %v, want ErrCircuitOpen for %s", err, s.host)
	}
	var open *CircuitOpenError
	if !errors.As(err, &open) || open.Failures != 3 || open.RetryAfter != time.Minute {
		t.Fatalf("err = %#v, want 3 failures and a retry after the 1m cooldown", open)
	}
	clock.Advance(45 * time.Second)
	if _, err := c.Versions(ctx, p); !errors.As(err, &open) || open.RetryAfter != 15*time.Second {
		t.Fatalf("45s into the cooldown: %v, want a retry after 15s", err)
	}
	if got := s.count(versionsPath); got != 3 {
		t.Fatalf("origin saw %d requests while the circuit was open, want 3", got)
	}
	if _, err := c.FetchDocument(ctx, p, s.url("/SHA256SUMS"), 0); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("document fetch with open circuit: %v", err)
	}

	// After the cooldown one probe goes through; it fails: open again.
	clock.Advance(time.Minute)
	_, err = c.Versions(ctx, p)
	wantOriginError(t, err, OpVersions, 500)
	if _, err := c.Versions(ctx, p); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("after a failed probe: %v, want ErrCircuitOpen", err)
	}
	if got := s.count(versionsPath); got != 4 {
		t.Fatalf("origin saw %d requests, want 4", got)
	}

	// The next probe succeeds: closed, requests flow again.
	down.Store(false)
	clock.Advance(time.Minute)
	for range 2 {
		if _, err := c.Versions(ctx, p); err != nil {
			t.Fatalf("after recovery: %v", err)
		}
	}
	if got := obs.get(); len(got) != 2 || got[1] {
		t.Fatalf("circuit events %v, want [open closed]", got)
	}
}

func TestCircuitIgnoresNotFoundAndPolicy(t *testing.T) {
	s := newTestServer(t, http.NotFoundHandler())
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.BreakerThreshold = 1
		cfg.Retries = -1
		cfg.AllowPrivate = false
	})
	p := testProvider(s)
	for range 3 {
		if _, err := c.FetchDocument(context.Background(), p, s.url("/x"), 0); !errors.Is(err, ErrPrivateAddress) {
			t.Fatalf("loopback document: %v, want ErrPrivateAddress", err)
		}
	}
	if _, err := c.tr.breaker.allow(string(s.host)); err != nil {
		t.Fatalf("circuit opened on refusals by the address policy: %v", err)
	}
	open := newTestClient(t, s, func(cfg *Config) { cfg.BreakerThreshold = 1 })
	for range 3 {
		_, err := open.FetchDocument(context.Background(), p, s.url("/missing"), 0)
		wantOriginError(t, err, OpDocument, 404)
	}
	if got := s.count("/missing"); got != 3 {
		t.Fatalf("404s: origin saw %d requests, want 3 (no retries, no open circuit)", got)
	}
}

func TestArchiveRetriedBeforeBody(t *testing.T) {
	var n atomic.Int32
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("zipbytes"))
	}))
	c := newTestClient(t, s, nil)
	body, _, err := c.OpenArchive(context.Background(), testProvider(s), s.url("/a.zip"))
	if err != nil {
		t.Fatalf("OpenArchive: %v", err)
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil || string(data) != "zipbytes" {
		t.Fatalf("body %q, %v", data, err)
	}
	if got := s.count("/a.zip"); got != 2 {
		t.Fatalf("origin saw %d archive requests, want 2", got)
	}
}

func TestMaxRequestTime(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want time.Duration
	}{
		{"defaults", Config{}, 3*30*time.Second + 2*10*time.Second},
		{"no retries", Config{Retries: -1, RequestTimeout: 5 * time.Second}, 5 * time.Second},
		{"backoff cap above Retry-After cap", Config{Retries: 3, RequestTimeout: time.Minute, RetryMaxDelay: 20 * time.Second},
			4*time.Minute + 3*20*time.Second},
		{"Retry-After cap above backoff cap", Config{Retries: 1, RequestTimeout: time.Second, RetryAfterMax: time.Minute},
			2*time.Second + time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.MaxRequestTime(); got != tt.want {
				t.Fatalf("MaxRequestTime = %s, want %s", got, tt.want)
			}
		})
	}
}

// watchLog records what an OriginWatcher is told.
type watchLog struct {
	mu   sync.Mutex
	errs []error
}

func (w *watchLog) OriginDone(origin, op string, err error) {
	if op != OpVersions {
		return // service discovery's own, once
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

// TestCircuitSnapshotAndWatcher: Client.Circuit reads the breaker's state
// without changing it (closed, open with the time of the next probe,
// half-open once the cooldown has passed, closed again), and the watcher
// hears of every operation's end with its error.
func TestCircuitSnapshotAndWatcher(t *testing.T) {
	down, s := downableOrigin(t)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	watch := &watchLog{}
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.Retries = -1
		cfg.BreakerThreshold = 2
		cfg.BreakerCooldown = time.Minute
		cfg.Now = clock.Now
		cfg.Watcher = watch
	})
	p := testProvider(s)
	ctx := context.Background()
	origin := string(s.host)
	if got := c.Circuit(origin); got.State != "closed" || got.Failures != 0 {
		t.Fatalf("before any request: %+v", got)
	}
	c.Versions(ctx, p)
	if got := c.Circuit(origin); got.State != "closed" || got.Failures != 1 {
		t.Fatalf("after one failure: %+v, want closed with 1 failure", got)
	}
	c.Versions(ctx, p)
	opened := clock.Now()
	for range 3 { // reading it changes nothing
		if got := c.Circuit(origin); got.State != "open" || got.Failures != 2 || !got.RetryAt.Equal(opened.Add(time.Minute)) {
			t.Fatalf("after two failures: %+v, want open until %v", got, opened.Add(time.Minute))
		}
	}
	clock.Advance(time.Minute)
	if got := c.Circuit(origin); got.State != "half-open" {
		t.Fatalf("after the cooldown: %+v, want half-open", got)
	}
	down.Store(false)
	if _, err := c.Versions(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := c.Circuit(origin); got.State != "closed" || got.Failures != 0 {
		t.Fatalf("after a good probe: %+v, want closed", got)
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.errs) != 3 || watch.errs[0] == nil || watch.errs[1] == nil || watch.errs[2] != nil {
		t.Fatalf("watcher heard %v, want two failures and a success", watch.errs)
	}
}

// TestRetryAfterTooLongForADurationIsNotRetried: an origin asking for a
// wait longer than RetryAfterMax is not retried (docs/operations.md,
// "Retries"), however long the wait it asks for: a number of seconds
// that does not fit in a time.Duration is as long as any, not a wait of
// no time (or of a fraction of a second) after which the mirror asks
// again at once.
func TestRetryAfterTooLongForADurationIsNotRetried(t *testing.T) {
	for _, ra := range []string{
		"9223372037",           // (1<<63)/1e9 + 1 seconds: wraps to a negative duration
		"18446744074",          // wraps to 0.29 s
		"99999999999999999999", // longer than an int64: not a number to Atoi
		"86400",                // a day, for comparison: not retried today
	} {
		t.Run(ra, func(t *testing.T) {
			s := flakyRegistry(t, ra, 429, 429, 429)
			c := newTestClient(t, s, func(cfg *Config) {
				cfg.RetryAfterMax = 10 * time.Second
				cfg.BreakerThreshold = -1
			})
			waits := recordSleeps(c)
			_, err := c.Versions(context.Background(), testProvider(s))
			wantOriginError(t, err, OpVersions, http.StatusTooManyRequests)
			if got := s.count(versionsPath); got != 1 {
				t.Errorf("Retry-After: %s: origin saw %d versions requests (waits %v), want 1: a wait beyond RetryAfterMax is not retried",
					ra, got, waits())
			}
		})
	}
}

// An open breaker's error names the wait as whole seconds rounded up, as
// the Retry-After its answer carries does: less than half a second left
// is not "next attempt in 0s".
func TestCircuitOpenErrorWaitRoundsUp(t *testing.T) {
	for _, c := range []struct {
		wait time.Duration
		want string
	}{
		{300 * time.Millisecond, "next attempt in 1s"},
		{1500 * time.Millisecond, "next attempt in 2s"},
		{30 * time.Second, "next attempt in 30s"},
	} {
		err := &CircuitOpenError{Failures: 5, RetryAfter: c.wait}
		if got := err.Error(); !strings.HasSuffix(got, c.want) {
			t.Errorf("wait %v: %q, want it to end %q", c.wait, got, c.want)
		}
	}
}

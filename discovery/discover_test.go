package discovery

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

const wellKnown = "/.well-known/terraform.json"

func TestProvidersURL(t *testing.T) {
	tests := []struct {
		name       string
		handler    func(s *testServer) http.HandlerFunc
		want       string // path (or full URL when it starts with https) of providers.v1
		wantNoSvc  bool
		wantOp     string
		wantStatus int
	}{
		{
			name: "relative absolute-path URL",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, discoveryDoc("/v1/providers/")) }
			},
			want: "/v1/providers/",
		},
		{
			name: "relative URL resolves against the discovery document",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, discoveryDoc("providers/v1/")) }
			},
			want: "/.well-known/providers/v1/",
		},
		{
			name: "absolute URL",
			handler: func(s *testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					writeJSON(w, discoveryDoc("https://registry.example.com/api/providers/"))
				}
			},
			want: "https://registry.example.com/api/providers/",
		},
		{
			name: "content type with charset",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json; charset=utf-8")
					w.Write([]byte(discoveryDoc("/p/")))
				}
			},
			want: "/p/",
		},
		{
			name: "no providers.v1",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, `{"modules.v1": "/m/"}`) }
			},
			wantNoSvc: true,
		},
		{
			name: "only another providers version",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, `{"providers.v2": "/p2/"}`) }
			},
			wantNoSvc: true,
		},
		{
			name:      "no discovery document",
			handler:   func(*testServer) http.HandlerFunc { return http.NotFound },
			wantNoSvc: true,
		},
		{
			name: "plain http providers.v1",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					writeJSON(w, discoveryDoc("http://registry.example.com/p/"))
				}
			},
			wantOp: OpDiscovery,
		},
		{
			name: "wrong content type",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/html")
					w.Write([]byte(discoveryDoc("/p/")))
				}
			},
			wantOp: OpDiscovery,
		},
		{
			name: "not a JSON object",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, `["providers.v1"]`) }
			},
			wantOp: OpDiscovery,
		},
		{
			name: "more members than a discovery document has",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					writeJSON(w, `{"providers.v1": "/p/", "x": [`+strings.Repeat(`{},`, 100_000)+`{}]}`)
				}
			},
			wantOp: OpDiscovery,
		},
		{
			name: "nested deeper than a discovery document is",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					writeJSON(w, `{"providers.v1": "/p/", "x": `+strings.Repeat(`[`, 9)+strings.Repeat(`]`, 9)+`}`)
				}
			},
			wantOp: OpDiscovery,
		},
		{
			name: "forbidden",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusForbidden) }
			},
			wantOp:     OpDiscovery,
			wantStatus: http.StatusForbidden,
		},
		{
			name: "server error (retried)",
			handler: func(*testServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusInternalServerError) }
			},
			wantOp:     OpDiscovery,
			wantStatus: http.StatusInternalServerError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s *testServer
			s = newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != wellKnown {
					http.NotFound(w, r)
					return
				}
				tt.handler(s)(w, r)
			}))
			c := newTestClient(t, s, nil)
			u, err := c.ProvidersURL(context.Background(), s.host)
			switch {
			case tt.wantNoSvc:
				if !errors.Is(err, ErrNoProviderService) {
					t.Fatalf("err = %v, want ErrNoProviderService", err)
				}
			case tt.wantOp != "":
				wantOriginError(t, err, tt.wantOp, tt.wantStatus)
			default:
				if err != nil {
					t.Fatal(err)
				}
				want := tt.want
				if want[0] == '/' {
					want = s.url(want)
				}
				if u.String() != want {
					t.Fatalf("providers URL = %s, want %s", u, want)
				}
			}
			if got := s.count(wellKnown); got < 1 {
				t.Fatalf("discovery requests = %d", got)
			}
		})
	}
}

func TestDiscoveryTTLAndStale(t *testing.T) {
	var (
		mu   sync.Mutex
		base = "/v1/"
		fail = false
	)
	set := func(b string, f bool) {
		mu.Lock()
		base, fail = b, f
		mu.Unlock()
	}
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b, f := base, fail
		mu.Unlock()
		if f {
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("maintenance"))
			return
		}
		writeJSON(w, discoveryDoc(b))
	}))
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	stale := &staleCounter{}
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.DiscoveryTTL = time.Hour
		cfg.Now = clock.Now
		cfg.Observer = stale
	})
	ctx := context.Background()

	steps := []struct {
		name      string
		advance   time.Duration
		base      string
		fail      bool
		wantPath  string
		wantStale bool
		wantHits  int
	}{
		{name: "first lookup", base: "/v1/", wantPath: "/v1/", wantHits: 1},
		{name: "within TTL uses the cache", advance: 59 * time.Minute, base: "/v2/", wantPath: "/v1/", wantHits: 1},
		{name: "after TTL refreshes", advance: 2 * time.Minute, base: "/v2/", wantPath: "/v2/", wantHits: 2},
		{name: "failed refresh serves stale", advance: 61 * time.Minute, fail: true, wantPath: "/v2/", wantStale: true, wantHits: 3},
		{name: "stale result is not refreshed again at once", advance: 30 * time.Second, base: "/v3/", wantPath: "/v2/", wantStale: true, wantHits: 3},
		{name: "refresh retried after the retry interval", advance: time.Minute, base: "/v3/", wantPath: "/v3/", wantHits: 4},
	}
	for _, st := range steps {
		clock.Advance(st.advance)
		set(st.base, st.fail)
		d, err := c.Discover(ctx, s.host)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got, want := d.ProvidersURL.String(), s.url(st.wantPath); got != want {
			t.Errorf("%s: URL = %s, want %s", st.name, got, want)
		}
		if d.Stale != st.wantStale {
			t.Errorf("%s: Stale = %v, want %v", st.name, d.Stale, st.wantStale)
		}
		if st.wantStale {
			var oe *OriginError
			if !errors.As(d.RefreshErr, &oe) || oe.Op != OpDiscovery {
				t.Errorf("%s: RefreshErr = %v, want discovery OriginError", st.name, d.RefreshErr)
			}
		}
		if got := s.count(wellKnown); got != st.wantHits {
			t.Errorf("%s: discovery requests = %d, want %d", st.name, got, st.wantHits)
		}
		// Stale answers are counted once per failed refresh.
		wantStaleCalls := int32(0)
		if st.wantHits >= 3 { // from the failed refresh on
			wantStaleCalls = 1
		}
		if got := stale.n.Load(); got != wantStaleCalls {
			t.Errorf("%s: StaleServed(discovery) called %d times, want %d", st.name, got, wantStaleCalls)
		}
		// ProvidersURL agrees with Discover and does not fail on stale.
		u, err := c.ProvidersURL(ctx, s.host)
		if err != nil || u.String() != d.ProvidersURL.String() {
			t.Errorf("%s: ProvidersURL = %v, %v", st.name, u, err)
		}
	}
}

func TestDiscoveryFailureWithoutPreviousResult(t *testing.T) {
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("nope"))
	}))
	c := newTestClient(t, s, nil)
	for i := range 2 { // failures are not cached
		_, err := c.ProvidersURL(context.Background(), s.host)
		wantOriginError(t, err, OpDiscovery, 0)
		if got := s.count(wellKnown); got != i+1 {
			t.Fatalf("discovery requests = %d, want %d", got, i+1)
		}
	}
}

func TestDiscoveryCoalescesConcurrentCalls(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 100)
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		writeJSON(w, discoveryDoc("/v1/providers/"))
	}))
	c := newTestClient(t, s, nil)

	const n = 20
	var started, done sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			u, err := c.ProvidersURL(context.Background(), s.host)
			if err == nil && u.String() != s.url("/v1/providers/") {
				err = errors.New("wrong URL " + u.String())
			}
			errs <- err
		}()
	}
	started.Wait()
	<-arrived
	close(release)
	done.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := s.count(wellKnown); got != 1 {
		t.Fatalf("discovery requests = %d, want 1", got)
	}
}

func TestDiscoveryCallerCancelDoesNotCancelLeader(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	var once atomic.Bool
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if once.CompareAndSwap(false, true) {
			arrived <- struct{}{}
			<-release
		}
		writeJSON(w, discoveryDoc("/v1/"))
	}))
	c := newTestClient(t, s, nil)

	askAndLeave(t, c, s.host, arrived)
	close(release)
	u, err := c.ProvidersURL(context.Background(), s.host)
	if err != nil {
		t.Fatal(err)
	}
	if u.String() != s.url("/v1/") {
		t.Fatalf("URL = %s", u)
	}
	if got := s.count(wellKnown); got != 1 {
		t.Fatalf("discovery requests = %d, want 1 (the first discovery must finish for later callers)", got)
	}
}

// staleCounter counts StaleServed("discovery") calls.
type staleCounter struct {
	noObserver
	n atomic.Int32
}

func (s *staleCounter) StaleServed(kind string) {
	if kind == "discovery" {
		s.n.Add(1)
	}
}

// TestDiscoveryObeysRetriesAndBreaker counts discovery requests against an
// origin whose discovery document keeps failing: the attempts are the
// configured retries plus one, with the client's own backoff between them,
// and each attempt counts for the circuit breaker like any registry request.
func TestDiscoveryObeysRetriesAndBreaker(t *testing.T) {
	tests := []struct {
		name      string
		retries   int // Config.Retries
		threshold int // Config.BreakerThreshold
		wantHits  int
		wantOpen  bool
	}{
		{"no retries", -1, -1, 1, false},
		{"one retry", 1, -1, 2, false},
		{"five retries", 5, -1, 6, false},
		{"breaker opens after two failed attempts", 5, 2, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "down", http.StatusServiceUnavailable)
			}))
			c := newTestClient(t, s, func(cfg *Config) {
				cfg.Retries = tt.retries
				cfg.BreakerThreshold = tt.threshold
			})
			sleeps := recordSleeps(c)
			_, err := c.ProvidersURL(context.Background(), s.host)
			wantOriginError(t, err, OpDiscovery, http.StatusServiceUnavailable)
			if got := s.count(wellKnown); got != tt.wantHits {
				t.Fatalf("discovery requests = %d, want %d", got, tt.wantHits)
			}
			if got := len(sleeps()); got != tt.wantHits-1 {
				t.Fatalf("%d waits between %d attempts: %v", got, tt.wantHits, sleeps())
			}
			// The next call does not wait for the TTL (failures are not
			// cached): with the circuit open it fails without a request.
			_, err = c.ProvidersURL(context.Background(), s.host)
			if got := errors.Is(err, ErrCircuitOpen); got != tt.wantOpen {
				t.Fatalf("second call: %v; circuit open = %v, want %v", err, got, tt.wantOpen)
			}
			if tt.wantOpen && s.count(wellKnown) != tt.wantHits {
				t.Fatalf("discovery requests with the circuit open = %d, want %d", s.count(wellKnown), tt.wantHits)
			}
		})
	}
}

// TestDiscoveryObeysRequestTimeout: a discovery document that never comes
// is given up after Config.RequestTimeout per attempt, the configured
// retries included, and the failure is a timeout.
func TestDiscoveryObeysRequestTimeout(t *testing.T) {
	stop := make(chan struct{})
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop) }) // runs before the server closes
	// Long enough that each attempt reaches the origin (the handshake
	// and request fit in it on a loaded machine), so that it counts two.
	const timeout = time.Second
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.RequestTimeout = timeout
		cfg.Retries = 1
	})
	start := time.Now()
	_, err := c.ProvidersURL(context.Background(), s.host)
	elapsed := time.Since(start)
	oe := wantOriginError(t, err, OpDiscovery, 0)
	if !oe.Timeout() || Outcome(err) != "timeout" {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if got := s.count(wellKnown); got != 2 {
		t.Fatalf("discovery requests = %d, want 2 (one retry)", got)
	}
	if elapsed < 2*timeout || elapsed > 2*timeout+10*time.Second {
		t.Fatalf("discovery gave up after %s; want about 2 x %s", elapsed, timeout)
	}
}

// TestAnswerAsTheAttemptEndsIsATimeout: an answer net/http hands out only
// once the attempt's time has run out (the origin wrote it because the
// cancellation closed the connection) is the attempt's timeout, retried
// as one, not an answer whose body then fails to come.
func TestAnswerAsTheAttemptEndsIsATimeout(t *testing.T) {
	s := newTestServer(t, http.NotFoundHandler())
	const timeout = 50 * time.Millisecond
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.RequestTimeout = timeout
		cfg.Retries = 1
	})
	var attempts atomic.Int32
	c.tr.httpClient.Transport = roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		attempts.Add(1)
		<-r.Context().Done()
		return &http.Response{
			Status:     "200 OK",
			StatusCode: http.StatusOK,
			Header:     http.Header{"Content-Type": {"application/json"}},
			Body:       io.NopCloser(strings.NewReader(discoveryDoc("/v1/providers/"))),
			Request:    r,
		}, nil
	})
	_, err := c.ProvidersURL(context.Background(), s.host)
	oe := wantOriginError(t, err, OpDiscovery, 0)
	if !oe.Timeout() || Outcome(err) != "timeout" {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if got := attempts.Load(); got != 2 {
		t.Fatalf("attempts = %d, want 2 (one retry)", got)
	}
}

// TestDiscoveryRedirectResolvesAgainstFinalURL: a relative providers.v1
// URL in a redirected discovery document resolves against the document's
// final URL, as disco does.
func TestDiscoveryRedirectResolvesAgainstFinalURL(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc(wellKnown, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/moved/here/terraform.json", http.StatusFound)
	})
	mux.HandleFunc("/moved/here/terraform.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("providers/"))
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, nil)
	u, err := c.ProvidersURL(context.Background(), s.host)
	if err != nil {
		t.Fatal(err)
	}
	if want := s.url("/moved/here/providers/"); u.String() != want {
		t.Fatalf("providers URL = %s, want %s", u, want)
	}
}

// KnownModulesURL gives the modules.v1 URL of the last discovery, without
// ever contacting the host itself.
func TestKnownModulesURL(t *testing.T) {
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case wellKnown:
			writeJSON(w, discoveryDoc("/v1/providers/"))
		default:
			http.NotFound(w, r)
		}
	}))
	c := newTestClient(t, s, nil)
	if u := c.KnownModulesURL(s.host); u != nil {
		t.Fatalf("before any discovery: %s, want nil", u)
	}
	if n := s.count(wellKnown); n != 0 {
		t.Fatalf("KnownModulesURL made %d discovery requests", n)
	}
	if _, err := c.ProvidersURL(context.Background(), s.host); err != nil {
		t.Fatal(err)
	}
	if u := c.KnownModulesURL(s.host); u == nil || u.String() != s.url("/v1/modules/") {
		t.Fatalf("after discovery: %v, want %s", u, s.url("/v1/modules/"))
	}
}

// discoveryCounter counts the discoveries observed, by outcome, and,
// as a Watcher, those that ended, with their errors.
type discoveryCounter struct {
	noObserver
	mu       sync.Mutex
	outcomes []string
	ended    []error
}

func (o *discoveryCounter) OriginDone(_, op string, err error) {
	if op != OpDiscovery {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = append(o.ended, err)
}

func (o *discoveryCounter) ends() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ended)
}

func (o *discoveryCounter) OriginRequest(_, op, outcome string, _ time.Duration) {
	if op != OpDiscovery {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes = append(o.outcomes, outcome)
}

func (o *discoveryCounter) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.outcomes)
}

// askAndLeave asks c for host's providers URL and goes away once the
// origin received the discovery (arrived): the caller gets its own
// cancellation, whatever becomes of the discovery.
func askAndLeave(t *testing.T, c *Client, host svchost.Hostname, arrived <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.ProvidersURL(ctx, host)
		first <- err
	}()
	<-arrived
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled caller got %v, want context.Canceled", err)
	}
}

// stallingOrigin is an origin that holds every request until the
// request is cancelled or the test ends, and says on arrived when the
// first has arrived.
func stallingOrigin(t *testing.T) (*testServer, <-chan struct{}) {
	t.Helper()
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	return s, arrived
}

// A caller still waiting for a discovery that Close ends is told the
// client closed (ErrClosed), not given the cancellation of the request
// Close cut: one that joined the discovery as Close returned got
// "context canceled" before.
func TestCloseEndsWaitingCallersWithErrClosed(t *testing.T) {
	s, arrived := stallingOrigin(t)
	c := newTestClient(t, s, func(cfg *Config) { cfg.RequestTimeout = time.Minute })
	waiting := make(chan error, 1)
	go func() {
		_, err := c.ProvidersURL(context.Background(), s.host)
		waiting <- err
	}()
	<-arrived
	c.Close()
	select {
	case err := <-waiting:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("caller waiting when Close ended the discovery: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting caller had no answer 10s after Close returned")
	}
}

// A discovery that no caller waits for any more goes on for the next one
// (TestDiscoveryCallerCancelDoesNotCancelLeader), but not past Close:
// Close ends it, and returns once it has ended, rather than leave it to
// run its request timeout and retries after the mirror shut down; called
// off so, it is no failure of the origin's, and not counted. A discovery
// asked for after Close fails at once.
func TestCloseEndsDiscoveryUnderWay(t *testing.T) {
	s, arrived := stallingOrigin(t)
	obs := &discoveryCounter{}
	c := newTestClient(t, s, func(cfg *Config) { cfg.Observer = obs; cfg.Watcher = obs; cfg.RequestTimeout = time.Minute })
	askAndLeave(t, c, s.host, arrived)
	if got := obs.ends(); len(got) != 0 {
		t.Fatalf("discovery ended before Close: %v", got)
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s (the discovery under way has a minute)")
	}
	if got := obs.ends(); len(got) != 1 || !errors.Is(got[0], context.Canceled) {
		t.Errorf("discoveries ended when Close returned: %v, want the one under way, called off", got)
	}
	if got := obs.seen(); len(got) != 0 {
		t.Errorf("the discovery Close called off was counted: %v", got)
	}
	if _, err := c.ProvidersURL(context.Background(), s.host); !errors.Is(err, ErrClosed) {
		t.Errorf("discovery after Close: %v, want ErrClosed", err)
	}
}

// opCounter records every operation observed, with its outcome.
type opCounter struct {
	noObserver
	mu  sync.Mutex
	ops []string
}

func (o *opCounter) OriginRequest(_, op, outcome string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops = append(o.ops, op+":"+outcome)
}

// An operation that fails because service discovery failed sent no
// request of its own: the failure is counted once, as the discovery's,
// not again as a versions, package or module request.
func TestDiscoveryFailureObservedOnce(t *testing.T) {
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	obs := &opCounter{}
	c := newTestClient(t, s, func(cfg *Config) { cfg.Observer = obs; cfg.Retries = -1 })
	ctx := context.Background()
	p := testProvider(s)
	if _, err := c.Versions(ctx, p); err == nil {
		t.Fatal("versions with discovery failing: no error")
	}
	if _, err := c.ModuleVersions(ctx, addrs.Module{Hostname: s.host, Namespace: "acme", Name: "net", System: "aws"}); err == nil {
		t.Fatal("module versions with discovery failing: no error")
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, op := range obs.ops {
		if !strings.HasPrefix(op, OpDiscovery+":") {
			t.Errorf("observed %q: an operation that sent nothing, discovery having failed (all: %q)", op, obs.ops)
		}
	}
	if len(obs.ops) == 0 || obs.ops[0] != OpDiscovery+":error" {
		t.Errorf("observed %q, want the discovery's failure", obs.ops)
	}
}

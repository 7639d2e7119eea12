package discovery

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFetchDocument(t *testing.T) {
	sums := []byte(strings.Repeat("0123456789abcdef", 4) + "  terraform-provider-random_2.0.0_linux_amd64.zip\n")
	mux := http.NewServeMux()
	mux.HandleFunc("/r/SHA256SUMS", func(w http.ResponseWriter, r *http.Request) { w.Write(sums) })
	mux.HandleFunc("/r/SHA256SUMS.sig", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush() // streamed, no Content-Length
		w.Write(bytes.Repeat([]byte{0x89}, 600))
	})
	mux.HandleFunc("/r/gone", http.NotFound)
	mux.HandleFunc("/r/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/r/SHA256SUMS", http.StatusMovedPermanently)
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, nil)
	p := testProvider(s)

	tests := []struct {
		name       string
		url        string
		limit      int64
		want       []byte
		wantOp     string
		wantStatus int
		tooLarge   bool
	}{
		{name: "ok", url: s.url("/r/SHA256SUMS"), limit: 1024, want: sums},
		{name: "exactly at limit", url: s.url("/r/SHA256SUMS"), limit: int64(len(sums)), want: sums},
		{name: "redirect followed", url: s.url("/r/redirect"), limit: 1024, want: sums},
		{name: "over limit by Content-Length", url: s.url("/r/SHA256SUMS"), limit: int64(len(sums)) - 1, wantOp: OpShasums, tooLarge: true},
		{name: "over limit streamed", url: s.url("/r/SHA256SUMS.sig"), limit: 599, wantOp: OpSignature, tooLarge: true},
		{name: "not found is an origin error", url: s.url("/r/gone"), limit: 1024, wantOp: OpDocument, wantStatus: 404},
		{name: "relative URL refused", url: "/r/SHA256SUMS", limit: 1024, wantOp: OpShasums},
		{name: "http URL refused", url: "http://" + string(s.host) + "/r/SHA256SUMS", limit: 1024, wantOp: OpShasums},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.FetchDocument(context.Background(), p, tt.url, tt.limit)
			if tt.wantOp != "" {
				wantOriginError(t, err, tt.wantOp, tt.wantStatus)
				if tt.tooLarge != errors.Is(err, ErrTooLarge) {
					t.Fatalf("errors.Is(%v, ErrTooLarge) = %v", err, !tt.tooLarge)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFetchFileAbsentIsNotFound: a file FetchFile asks for that the
// origin answers 404 is the origin's answer (ErrNotFound, counted
// not_found), where FetchDocument's 404, for a URL a registry named, is
// its failure, as another status is FetchFile's; an OpenPGP signature
// named .gpgsig is a signature.
func TestFetchFileAbsentIsNotFound(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/r/", http.NotFound)
	mux.HandleFunc("/r/teapot/", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	s := newTestServer(t, mux)
	c := newTestClient(t, s, nil)
	p := testProvider(s)
	ctx := context.Background()

	_, err := c.FetchFile(ctx, p, s.url("/r/tofu_1.8.0_SHA256SUMS.sig"), 1024)
	if !errors.Is(err, ErrNotFound) || Outcome(err) != "not_found" {
		t.Errorf("FetchFile of a file the origin lacks: %v, outcome %q; want ErrNotFound, not_found", err, Outcome(err))
	}
	_, err = c.FetchDocument(ctx, p, s.url("/r/SHA256SUMS.sig"), 1024)
	wantOriginError(t, err, OpSignature, http.StatusNotFound)
	if errors.Is(err, ErrNotFound) || Outcome(err) != "error" {
		t.Errorf("FetchDocument of a URL the registry named that is missing: %v, outcome %q; want an origin failure, error", err, Outcome(err))
	}
	_, err = c.FetchFile(ctx, p, s.url("/r/teapot/tofu_1.8.0_SHA256SUMS.gpgsig"), 1024)
	wantOriginError(t, err, OpSignature, http.StatusTeapot)
}

// TestFetchSumsTwinCalledOffIsNotCounted: when one of FetchSums' two
// downloads fails, the other is called off by the mirror, which says
// nothing of the origin: only the failure is counted, not a second one
// for the download called off (as the status page's origin rows count
// no request the mirror cancelled).
func TestFetchSumsTwinCalledOffIsNotCounted(t *testing.T) {
	released := make(chan struct{})
	t.Cleanup(func() { close(released) })
	mux := http.NewServeMux()
	mux.HandleFunc("/r/gone.sig", http.NotFound)
	mux.HandleFunc("/r/stalled/SHA256SUMS", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-released:
		}
	})
	s := newTestServer(t, mux)
	obs := &opCounter{}
	c := newTestClient(t, s, func(cfg *Config) { cfg.Observer = obs })
	pkg := &Package{SHASumsURL: s.url("/r/stalled/SHA256SUMS"), SHASumsSignatureURL: s.url("/r/gone.sig")}
	_, _, err := c.FetchSums(context.Background(), testProvider(s), pkg, 1024, 1024)
	wantOriginError(t, err, OpSignature, http.StatusNotFound)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if want := []string{OpSignature + ":error"}; !slices.Equal(obs.ops, want) {
		t.Errorf("observed %v, want %v", obs.ops, want)
	}
}

// TestFetchSums fetches a package's SHA256SUMS and signature as one
// call: both come back, each under its own limit and named by its own Op;
// a failure of either fails the call with that failure, and ends the
// other download rather than wait for it.
func TestFetchSums(t *testing.T) {
	sums := []byte(strings.Repeat("0123456789abcdef", 4) + "  terraform-provider-random_2.0.0_linux_amd64.zip\n")
	sig := bytes.Repeat([]byte{0x89}, 600)
	released := make(chan struct{})
	t.Cleanup(func() { close(released) })
	mux := http.NewServeMux()
	mux.HandleFunc("/r/SHA256SUMS", func(w http.ResponseWriter, r *http.Request) { w.Write(sums) })
	mux.HandleFunc("/r/SHA256SUMS.sig", func(w http.ResponseWriter, r *http.Request) { w.Write(sig) })
	mux.HandleFunc("/r/gone.sig", http.NotFound)
	mux.HandleFunc("/r/stalled/SHA256SUMS", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		select { // until the client ends it, or the test does
		case <-r.Context().Done():
		case <-released:
		}
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, nil)
	p := testProvider(s)
	ctx := context.Background()

	pkg := &Package{SHASumsURL: s.url("/r/SHA256SUMS"), SHASumsSignatureURL: s.url("/r/SHA256SUMS.sig")}
	gotSums, gotSig, err := c.FetchSums(ctx, p, pkg, 1024, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotSums, sums) || !bytes.Equal(gotSig, sig) {
		t.Fatalf("got %d and %d bytes, want the SHA256SUMS (%d) and its signature (%d)", len(gotSums), len(gotSig), len(sums), len(sig))
	}

	if _, _, err := c.FetchSums(ctx, p, pkg, 1024, int64(len(sig))-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("signature over its limit: err = %v, want ErrTooLarge", err)
	} else {
		wantOriginError(t, err, OpSignature, 0)
	}
	if _, _, err := c.FetchSums(ctx, p, pkg, int64(len(sums))-1, 1024); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("SHA256SUMS over its limit: err = %v, want ErrTooLarge", err)
	} else {
		wantOriginError(t, err, OpShasums, 0)
	}

	stalling := &Package{SHASumsURL: s.url("/r/stalled/SHA256SUMS"), SHASumsSignatureURL: s.url("/r/gone.sig")}
	done := make(chan error, 1)
	go func() { _, _, err := c.FetchSums(ctx, p, stalling, 1024, 1024); done <- err }()
	select {
	case err := <-done:
		wantOriginError(t, err, OpSignature, http.StatusNotFound)
	case <-time.After(10 * time.Second):
		t.Fatal("FetchSums waited for the stalled SHA256SUMS after its signature failed")
	}
}

func TestFetchDocumentRequestTimeout(t *testing.T) {
	stop := make(chan struct{})
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stop) })
	c := newTestClient(t, s, func(cfg *Config) { cfg.RequestTimeout = 100 * time.Millisecond })
	_, err := c.FetchDocument(context.Background(), testProvider(s), s.url("/SHA256SUMS"), 1024)
	oe := wantOriginError(t, err, OpShasums, 0)
	if !oe.Timeout() {
		t.Fatalf("Timeout() = false for %v", err)
	}
}

func TestFetchDocumentCallerCancel(t *testing.T) {
	stop := make(chan struct{})
	arrived := make(chan struct{})
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stop) })
	c := newTestClient(t, s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	_, err := c.FetchDocument(ctx, testProvider(s), s.url("/SHA256SUMS"), 1024)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var oe *OriginError
	if errors.As(err, &oe) {
		t.Fatalf("caller cancellation must not be an OriginError: %v", err)
	}
}

func TestOpenArchive(t *testing.T) {
	zip := bytes.Repeat([]byte("PK\x03\x04zipdata!"), 100) // 1200 bytes
	stop := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/sized.zip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(zip)))
		w.Write(zip)
	})
	mux.HandleFunc("/streamed.zip", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		w.Write(zip)
	})
	mux.HandleFunc("/stalls.zip", func(w http.ResponseWriter, r *http.Request) {
		w.Write(zip[:100])
		w.(http.Flusher).Flush()
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/short.zip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(zip)))
		w.Write(zip[:500])
	})
	mux.HandleFunc("/missing.zip", http.NotFound)
	s := newTestServer(t, mux)
	t.Cleanup(func() { close(stop) })

	tests := []struct {
		name       string
		path       string
		max        int64
		wantSize   int64
		openStatus int  // OriginError status expected from OpenArchive
		openErr    bool // OpenArchive itself fails
		readErr    bool // reading the body fails
		tooLarge   bool
		timeout    bool
	}{
		{name: "known size", path: "/sized.zip", wantSize: 1200},
		{name: "unknown size", path: "/streamed.zip", wantSize: -1},
		{name: "exactly max", path: "/streamed.zip", max: 1200, wantSize: -1},
		{name: "over max by Content-Length", path: "/sized.zip", max: 1199, openErr: true, tooLarge: true},
		{name: "over max streamed", path: "/streamed.zip", max: 1199, wantSize: -1, readErr: true, tooLarge: true},
		{name: "stall", path: "/stalls.zip", wantSize: -1, readErr: true, timeout: true},
		{name: "shorter than Content-Length", path: "/short.zip", wantSize: 1200, readErr: true},
		{name: "not found", path: "/missing.zip", openErr: true, openStatus: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, s, func(cfg *Config) {
				// Short only where the stall is the point: elsewhere a
				// loaded machine's pause must not pass for a stall.
				cfg.IdleTimeout = time.Minute
				if tt.timeout {
					cfg.IdleTimeout = 100 * time.Millisecond
				}
				cfg.MaxArchiveBytes = tt.max
			})
			body, size, err := c.OpenArchive(context.Background(), testProvider(s), s.url(tt.path))
			if tt.openErr {
				wantOriginError(t, err, OpArchive, tt.openStatus)
				if tt.tooLarge != errors.Is(err, ErrTooLarge) {
					t.Fatalf("errors.Is(%v, ErrTooLarge) = %v", err, !tt.tooLarge)
				}
				// The operator reads which setting to raise.
				if tt.tooLarge && !strings.Contains(err.Error(), "(--max-archive-bytes)") {
					t.Errorf("%v does not name --max-archive-bytes", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer body.Close()
			if size != tt.wantSize {
				t.Errorf("size = %d, want %d", size, tt.wantSize)
			}
			got, err := io.ReadAll(body)
			if !tt.readErr {
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, zip) {
					t.Fatalf("body differs: %d bytes", len(got))
				}
				return
			}
			oe := wantOriginError(t, err, OpArchive, 0)
			if tt.tooLarge != errors.Is(err, ErrTooLarge) {
				t.Fatalf("errors.Is(%v, ErrTooLarge) = %v", err, !tt.tooLarge)
			}
			if tt.tooLarge && int64(len(got)) != tt.max {
				t.Errorf("read %d bytes before the size error, want %d", len(got), tt.max)
			}
			if tt.tooLarge && !strings.Contains(err.Error(), "(--max-archive-bytes)") {
				t.Errorf("%v does not name --max-archive-bytes", err)
			}
			if oe.Timeout() != tt.timeout {
				t.Fatalf("Timeout() = %v for %v", oe.Timeout(), err)
			}
			// The error is sticky.
			if _, err2 := body.Read(make([]byte, 10)); err2 == nil || err2 == io.EOF {
				t.Fatalf("read after failure returned %v", err2)
			}
		})
	}
}

func TestRedirects(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("plain"))
	}))
	t.Cleanup(plain.Close)
	var plainHits int
	plain.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainHits++ // only read after the server is closed below
		w.Write([]byte("plain"))
	})

	mux := http.NewServeMux()
	mux.HandleFunc("/to-http", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/file", http.StatusFound)
	})
	mux.HandleFunc("/loop/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/loop/"))
		http.Redirect(w, r, "/loop/"+strconv.Itoa(n+1), http.StatusFound)
	})
	mux.HandleFunc("/hop/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/"))
		if n < 5 {
			http.Redirect(w, r, "/hop/"+strconv.Itoa(n+1), http.StatusFound)
			return
		}
		w.Write([]byte("arrived"))
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, nil)
	p := testProvider(s)

	if _, err := c.FetchDocument(context.Background(), p, s.url("/to-http"), 1024); err == nil {
		t.Fatal("redirect to http was followed")
	} else {
		wantOriginError(t, err, OpDocument, 0)
	}
	if _, _, err := c.OpenArchive(context.Background(), p, s.url("/to-http")); err == nil {
		t.Fatal("redirect to http was followed")
	} else {
		wantOriginError(t, err, OpArchive, 0)
	}

	got, err := c.FetchDocument(context.Background(), p, s.url("/hop/0"), 1024)
	if err != nil || string(got) != "arrived" {
		t.Fatalf("5 redirects: %q, %v", got, err)
	}
	_, err = c.FetchDocument(context.Background(), p, s.url("/loop/0"), 1024)
	wantOriginError(t, err, OpDocument, 0)
	if n := s.count("/loop/5"); n != 1 || s.count("/loop/6") != 0 {
		t.Fatalf("redirect loop: /loop/5 hits %d, /loop/6 hits %d", n, s.count("/loop/6"))
	}

	plain.Close()
	if plainHits != 0 {
		t.Fatalf("plain http server got %d requests", plainHits)
	}
}

// outcomeLog records the outcomes of archive operations.
type outcomeLog struct {
	noObserver
	mu       sync.Mutex
	outcomes []string
}

func (l *outcomeLog) OriginRequest(_, op, outcome string, _ time.Duration) {
	if op != OpArchive {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outcomes = append(l.outcomes, outcome)
}

func (l *outcomeLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.outcomes...)
}

// TestOpenArchiveLowSpeed drips archive bytes far more often than the idle
// timeout but far slower than the low-speed limit: the download is aborted
// after about one window, as a timeout, and observed as one; a fast enough
// download, or one with the limit off, is not.
func TestOpenArchiveLowSpeed(t *testing.T) {
	// drip sends size bytes in pieces of chunk every interval, or until the
	// request ends.
	drip := func(size, chunk int, interval time.Duration) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for sent := 0; sent < size; sent += chunk {
				w.Write(bytes.Repeat([]byte{'z'}, min(chunk, size-sent)))
				w.(http.Flusher).Flush()
				select {
				case <-tick.C:
				case <-r.Context().Done():
					return
				}
			}
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/drip.zip", drip(2000, 1, 20*time.Millisecond))    // 50 bytes/s: 40 s for the whole body
	mux.Handle("/fast.zip", drip(25000, 100, 10*time.Millisecond)) // 10 KB/s: 2.5 s
	mux.Handle("/trickle.zip", drip(20, 1, 10*time.Millisecond))   // 100 bytes/s: 0.2 s
	s := newTestServer(t, mux)

	tests := []struct {
		name     string
		path     string
		minSpeed int64
		window   time.Duration
		size     int
		abort    bool
	}{
		{"dripping origin is aborted", "/drip.zip", 1000, 150 * time.Millisecond, 2000, true},
		// A hundred times the limit, over two windows and a half of a
		// second: only a pause of a whole second would starve one.
		{"fast enough", "/fast.zip", 100, time.Second, 25000, false},
		{"slow with the limit off", "/trickle.zip", -1, 50 * time.Millisecond, 20, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &outcomeLog{}
			c := newTestClient(t, s, func(cfg *Config) {
				cfg.IdleTimeout = time.Minute // never the reason here
				cfg.MinSpeed = tt.minSpeed
				cfg.MinSpeedWindow = tt.window
				cfg.Observer = obs
			})
			start := time.Now()
			body, _, err := c.OpenArchive(context.Background(), testProvider(s), s.url(tt.path))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(body)
			body.Close()
			elapsed := time.Since(start)
			if !tt.abort {
				if err != nil || len(got) != tt.size {
					t.Fatalf("read %d bytes, err %v; want the whole body", len(got), err)
				}
				if o := obs.get(); len(o) != 1 || o[0] != "success" {
					t.Fatalf("outcomes %v, want [success]", o)
				}
				return
			}
			oe := wantOriginError(t, err, OpArchive, 0)
			if !oe.Timeout() || !strings.Contains(err.Error(), "low-speed limit") {
				t.Fatalf("err = %v, want a low-speed timeout", err)
			}
			if len(got) == 0 || len(got) >= tt.size/10 {
				t.Fatalf("read %d bytes before the abort", len(got))
			}
			if elapsed < tt.window || elapsed > tt.window+5*time.Second {
				t.Fatalf("aborted after %s with a %s window", elapsed, tt.window)
			}
			if o := obs.get(); len(o) != 1 || o[0] != "timeout" {
				t.Fatalf("outcomes %v, want [timeout]", o)
			}
		})
	}
}

// A module source host's answer over the archive limit, to an archive
// download (OpenSource) or to Git's smart HTTP (SourceHTTPClient), with
// its Content-Length or without, is refused naming the setting that sets
// the limit: --module-max-bytes is not the only bound on a module.
func TestSourceOverArchiveLimitNamesSetting(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 2000)
	mux := http.NewServeMux()
	mux.HandleFunc("/sized/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	mux.HandleFunc("/streamed/", func(w http.ResponseWriter, r *http.Request) {
		w.Write(body[:1000])
		w.(http.Flusher).Flush()
		w.Write(body[1000:])
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, func(cfg *Config) { cfg.MaxArchiveBytes = 1500 })
	for _, kind := range []string{"sized", "streamed"} {
		u := s.url("/" + kind + "/m.tar.gz")
		errs := map[string]error{}
		if rc, _, err := c.OpenSource(context.Background(), s.host, u); err != nil {
			errs["OpenSource"] = err
		} else {
			_, errs["OpenSource"] = io.ReadAll(rc)
			rc.Close()
		}
		if resp, err := c.SourceHTTPClient(s.host).Do(mustRequest(t, context.Background(), u)); err != nil {
			errs["SourceHTTPClient"] = err
		} else {
			_, errs["SourceHTTPClient"] = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		for what, err := range errs {
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "(--max-archive-bytes)") {
				t.Errorf("%s %s: %v, want ErrTooLarge naming --max-archive-bytes", kind, what, err)
			}
		}
	}
}

// The low-speed limit counts only the time spent waiting for the origin's
// bytes: a caller that holds the body (its copy into the local cache
// blocked on a slow or full disk) for several windows, before its first
// read and between two, reads the whole archive, and the download is a
// success. Before, the windows ran on while the caller was away, and the
// download failed as an origin timeout while the origin was fine.
func TestOpenArchiveLowSpeedReaderHeld(t *testing.T) {
	data := bytes.Repeat([]byte{'z'}, 20000)
	mux := http.NewServeMux()
	mux.HandleFunc("/fast.zip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data)
	})
	s := newTestServer(t, mux)
	const window = 200 * time.Millisecond
	obs := &outcomeLog{}
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.IdleTimeout = time.Minute // never the reason here
		cfg.MinSpeed = 1000           // 200 bytes a window
		cfg.MinSpeedWindow = window
		cfg.Observer = obs
	})
	body, _, err := c.OpenArchive(context.Background(), testProvider(s), s.url("/fast.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	time.Sleep(3 * window) // the caller not reading yet
	first := make([]byte, 100)
	if _, err := io.ReadFull(body, first); err != nil {
		t.Fatalf("the first read, 3 windows after the open: %v", err)
	}
	time.Sleep(3 * window) // the caller's local write, blocked
	rest, err := io.ReadAll(body)
	if err != nil || len(first)+len(rest) != len(data) {
		t.Fatalf("read %d bytes, err %v; want the whole body of a caller held for 3 windows", len(first)+len(rest), err)
	}
	body.Close()
	if o := obs.get(); len(o) != 1 || o[0] != "success" {
		t.Fatalf("outcomes %v, want [success]", o)
	}
}

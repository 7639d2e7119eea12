package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// setHeartbeat sets the serve's heartbeat for the test; call it before
// the servers start, so that it is restored after they stop.
func setHeartbeat(t *testing.T, d time.Duration) {
	old := heartbeat
	heartbeat = d
	t.Cleanup(func() { heartbeat = old })
}

// reloadSocket serves the admin API over a socket, with reload as the
// serving process's reload and a heartbeat every beat, and returns a
// client of it.
func reloadSocket(t *testing.T, beat time.Duration, reload func(context.Context) (Reloaded, error)) *Client {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("unix sockets")
	}
	setHeartbeat(t, beat)
	h := newHarness(t, harnessOptions{})
	dir, _ := socket(t, h.newAPI(t, nil, nil, Options{Reload: reload}))
	c, err := Dial(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// reloadAfter is a reload that reads file once done is, or fails with
// ctx.
func reloadAfter[T any](ctx context.Context, done <-chan T, file string) (Reloaded, error) {
	select {
	case <-done:
		return Reloaded{File: file}, nil
	case <-ctx.Done():
		return Reloaded{}, ctx.Err()
	}
}

// A command's call through the socket that runs longer than its client's
// bound on silence (an export, a reload that waits) is kept alive by the
// serve's heartbeats, and answered: the real API, its server and its
// client, through a real socket.
func TestHeartbeatsKeepALongCallAlive(t *testing.T) {
	ran := make(chan struct{})
	c := reloadSocket(t, 100*time.Millisecond, func(ctx context.Context) (Reloaded, error) {
		defer close(ran)
		return reloadAfter(ctx, time.After(1500*time.Millisecond), "tfmirror.hcl") // the client's bound is 600 ms
	})
	if want := silenceBeats * heartbeat; c.silence != want {
		t.Fatalf("client's bound on silence %s, want %s (the heartbeat the ping said, %d times)", c.silence, want, silenceBeats)
	}
	res, err := c.Reload(t.Context())
	if err != nil {
		t.Fatalf("a reload of 1.5 s through a serve sending heartbeats: %v", err)
	}
	if res.File != "tfmirror.hcl" {
		t.Errorf("answer %+v, want the reload's", res)
	}
	<-ran
}

// The heartbeats are 102 Processing answers, sent while the operation
// runs to a call that asks for them, and to no other (a client of an
// earlier release gets the answers it knew).
func TestHeartbeatsOnlyWhenAsked(t *testing.T) {
	release := make(chan struct{})
	var beats atomic.Int32
	c := reloadSocket(t, 10*time.Millisecond, func(ctx context.Context) (Reloaded, error) {
		return reloadAfter(ctx, release, "f")
	})
	post := func(ask bool, got1xx func(int)) (int, string) {
		t.Helper()
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, _ textproto.MIMEHeader) error { got1xx(code); return nil },
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://tfmirror/v1/reload", strings.NewReader("{}"))
		if ask {
			req.Header.Set(HeartbeatHeader, "1")
		}
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	// Asked: the operation is let go after three beats (or a minute).
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	bound := time.AfterFunc(time.Minute, let)
	status, body := post(true, func(code int) {
		if code != http.StatusProcessing {
			t.Errorf("informational answer %d, want 102", code)
		}
		if beats.Add(1) == 3 {
			let()
		}
	})
	bound.Stop()
	if n := beats.Load(); n < 3 {
		t.Fatalf("%d heartbeats in a minute, at one every %s", n, heartbeat)
	}
	if status != http.StatusOK || !strings.Contains(body, `"f"`) {
		t.Fatalf("answer after the beats: %d %s", status, body)
	}

	// Not asked: none, in 30 of the serve's heartbeats.
	release = make(chan struct{})
	var unasked atomic.Int32
	time.AfterFunc(30*heartbeat, func() { close(release) })
	if status, _ := post(false, func(int) { unasked.Add(1) }); status != http.StatusOK {
		t.Fatalf("answer: %d", status)
	}
	if n := unasked.Load(); n != 0 {
		t.Errorf("%d informational answers to a call that did not ask for them", n)
	}
}

// A serve that stops answering in the middle of a call (stopped with
// SIGSTOP, frozen with its container, after its ping answered) is given
// up by the call once its heartbeats go missing, where the command
// waited for ever. A serve of an earlier release, which sends none,
// is waited for as before.
func TestCallGivesUpOnASilentServe(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix sockets")
	}
	serve := func(t *testing.T, pingBody string, verify http.HandlerFunc) string {
		t.Helper()
		dir := t.TempDir()
		ln, err := Listen(dir)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, pingBody) })
		mux.HandleFunc("POST /v1/verify", verify)
		srv := &http.Server{Handler: mux}
		done := make(chan struct{})
		go func() { defer close(done); srv.Serve(ln) }()
		t.Cleanup(func() { srv.Close(); <-done })
		return dir
	}
	call := func(t *testing.T, c *Client) error {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := c.Verify(t.Context(), VerifyRequest{})
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("the call did not return")
			return nil
		}
	}
	dialCall := func(t *testing.T, dir string) (time.Duration, error) {
		t.Helper()
		c, err := Dial(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		err = call(t, c)
		return time.Since(start), err
	}

	t.Run("silent after one beat", func(t *testing.T) {
		frozen := make(chan struct{})
		defer close(frozen)
		var asked atomic.Int32
		dir := serve(t, `{"heartbeat_ms":50}`, func(w http.ResponseWriter, r *http.Request) {
			asked.Add(1)
			w.WriteHeader(http.StatusProcessing)
			select { // frozen: no beat, no answer
			case <-frozen:
			case <-r.Context().Done():
			}
		})
		c, err := Dial(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err = call(t, c)
		if !errors.Is(err, ErrNotAnswering) {
			t.Fatalf("a call to a serve silent after one heartbeat: %v, want ErrNotAnswering", err)
		}
		if !strings.Contains(err.Error(), "no sign of it for 300ms") {
			t.Errorf("error %q does not say how long the serve was silent", err)
		}
		// The calls after it (a sync's next package) fail at once, not
		// in a silence each.
		if err := call(t, c); !errors.Is(err, ErrNotAnswering) {
			t.Errorf("the call after the silence: %v, want ErrNotAnswering", err)
		}
		if n := asked.Load(); n != 1 {
			t.Errorf("the silent serve was asked %d times, want once", n)
		}
	})

	t.Run("beats for longer than the bound", func(t *testing.T) {
		// Says 300 ms (a bound of 1.8 s), beats every 20 ms for 3 s.
		dir := serve(t, `{"heartbeat_ms":300}`, func(w http.ResponseWriter, r *http.Request) {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for end := time.After(3 * time.Second); ; {
				select {
				case <-tick.C:
					w.WriteHeader(http.StatusProcessing)
					continue
				case <-end:
				case <-r.Context().Done():
					return
				}
				break
			}
			io.WriteString(w, `{"checked":7}`)
		})
		took, err := dialCall(t, dir)
		if err != nil {
			t.Fatalf("a call of 3 s to a serve beating all along: %v", err)
		}
		if took < 3*time.Second {
			t.Fatalf("answered after %s, before the serve's 3 s", took)
		}
	})

	t.Run("an earlier release sends none", func(t *testing.T) {
		for _, ping := range []string{`{}`, `404 page not found`} {
			dir := serve(t, ping, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-time.After(time.Second):
				case <-r.Context().Done():
					return
				}
				io.WriteString(w, `{"checked":1}`)
			})
			if _, err := dialCall(t, dir); err != nil {
				t.Errorf("ping %q: a call of 1 s to a serve that sends no heartbeats: %v", ping, err)
			}
		}
	})
}

package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"sync/atomic"
	"time"
)

// A command's call through the socket may run for hours (an export of a
// large cache), so its client cannot bound the call's time; it bounds the
// serving process's silence instead. While an operation runs, the serve
// sends the call informational answers (102 Processing) every heartbeat,
// from a goroutine of the request's own, not from the operation: they say
// the process runs, not that the operation makes progress (an origin's
// slow download is not silence). A serve stopped with SIGSTOP, or frozen
// with its container, sends none, and the client gives up after
// silenceBeats of them go missing (Client.call) where it waited for ever.
//
// The beats are sent only to a call that asks (HeartbeatHeader): a client
// of an earlier release gets the answers it knew. A client learns that
// the serve sends them from its answer to Dial's ping (Ping): a serve of
// an earlier release sends none, and its calls stay unbounded, as they
// were.

// HeartbeatHeader, on a request, asks for 102 Processing while it runs.
const HeartbeatHeader = "Tfmirror-Heartbeat"

// heartbeat is the time between two 102 answers. A var, for tests.
var heartbeat = 5 * time.Second

// silenceBeats is how many heartbeats a client lets go missing before it
// gives up on the serve: 30 seconds at the serve's 5.
const silenceBeats = 6

// Ping is the answer to GET /v1/ping.
type Ping struct {
	// HeartbeatMillis is the time between two 102 answers to a call
	// that asks for them; 0 (a serve of an earlier release answers {},
	// or 404) sends none.
	HeartbeatMillis int64 `json:"heartbeat_ms,omitempty"`
}

// ping answers Dial's question: the serving process answers on its
// socket, and sends heartbeats.
func ping(w http.ResponseWriter, _ *http.Request) {
	body, _ := json.Marshal(Ping{HeartbeatMillis: heartbeat.Milliseconds()})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(body, '\n'))
}

// beat sends w's request 102 Processing every heartbeat until stop is
// called, when the request asked for it (HeartbeatHeader); stop returns
// once the last is written, so the final answer is written alone. A
// write that fails (the caller gone) is the server's to notice: it
// cancels the request's context, and the operation returns.
func beat(w http.ResponseWriter, r *http.Request) (stop func()) {
	if r.Header.Get(HeartbeatHeader) == "" || heartbeat <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-r.Context().Done():
				return
			case <-t.C:
				w.WriteHeader(http.StatusProcessing)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// watchdog gives up a call on a serve silent for its client's silence:
// each sign of the serve (a heartbeat, a read of its answer) puts the
// time off. A zero watchdog (a serve that sends no heartbeats) never
// fires.
type watchdog struct {
	t       *time.Timer
	silence time.Duration
	silent  *atomic.Bool // the client's, set when the watchdog fires
}

// errSilent is the cause of a call given up by its watchdog.
type errSilent struct{ silence time.Duration }

func (e errSilent) Error() string {
	return fmt.Sprintf("no sign of it for %s", e.silence)
}

// watch returns ctx for a call, watched for the serve's silence.
func (c *Client) watch(ctx context.Context) (context.Context, *watchdog) {
	if c.silence <= 0 {
		return ctx, &watchdog{}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{silence: c.silence, silent: &c.silent}
	w.t = time.AfterFunc(c.silence, func() {
		c.silent.Store(true)
		cancel(errSilent{c.silence})
	})
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		Got1xxResponse: func(int, textproto.MIMEHeader) error {
			w.sign()
			return nil
		},
	})
	return ctx, w
}

// sign puts the watchdog off: the serve gave a sign.
func (w *watchdog) sign() {
	if w.t != nil {
		w.t.Reset(w.silence)
	}
}

func (w *watchdog) stop() {
	if w.t != nil {
		w.t.Stop()
	}
}

// why is err, the error of a call, said as the serve's silence when the
// watchdog gave the call up.
func (w *watchdog) why(err error) error {
	if w.t != nil && !w.t.Stop() && w.silent.Load() {
		// Fired: the call's context was cancelled for the silence, or
		// the call failed just as it fired; either way, silence it was.
		return fmt.Errorf("%w: %s", ErrNotAnswering, errSilent{w.silence})
	}
	return err
}

// signReader reads an answer, each read a sign of the serve.
type signReader struct {
	r io.Reader
	w *watchdog
}

func (s *signReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.w.sign()
	}
	return n, err
}

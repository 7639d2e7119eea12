package admin

import (
	"context"
	"net/http"
	"sync"

	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
)

// Server is the admin API served on its unix socket (NewServer).
type Server struct {
	*http.Server
	drain *drain
}

// Drain has the server take no new request from now on, a ping too:
// each is answered 503 with ErrShuttingDown, so that a command started
// while the serve shuts down is told so, not that none runs; the socket
// stays open until the caller closes the server, once the serve has
// stopped. It waits for the requests under way to end, or for ctx,
// whose error it returns then.
func (s *Server) Drain(ctx context.Context) error { return s.drain.wait(ctx) }

// drain is the admin API's state across a shutdown (Server.Drain).
type drain struct {
	mu       sync.Mutex
	stopping bool
	running  int
	idle     chan struct{} // closed once stopping and running is 0
}

// layer is the layer of d every request passes through (inside guard:
// a caller not let in learns nothing of the serve's state).
func (d *drain) layer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		if d.stopping {
			d.mu.Unlock()
			writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: ErrShuttingDown.Error()})
			return
		}
		d.running++
		d.mu.Unlock()
		defer func() {
			d.mu.Lock()
			d.running--
			if d.stopping && d.running == 0 {
				close(d.idle)
			}
			d.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

// wait is Server.Drain.
func (d *drain) wait(ctx context.Context) error {
	d.mu.Lock()
	if !d.stopping {
		d.stopping = true
		d.idle = make(chan struct{})
		if d.running == 0 {
			close(d.idle)
		}
	}
	idle := d.idle
	d.mu.Unlock()
	return workgroup.Wait(ctx, idle) // done first when nothing runs, whatever ctx
}

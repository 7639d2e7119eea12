package proxy

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/httpserve"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// TestClientGoneAfterSendingABody: a client that sends a request with a
// body (which no door reads) and goes away while the mirror waits for the
// origin is seen gone as one without a body is, over a real connection:
// its handler returns at once with 499. net/http watches a connection
// for its client going away only once the request's body has been read to
// its end, so that such a request held its handler, and the slot of its
// connection under --max-connections, for as long as the origin took,
// and kept its origin fetch counted as waited for.
func TestClientGoneAfterSendingABody(t *testing.T) {
	t.Parallel()
	logs := &observed.Logs{}
	h := newHarness(t, harnessOptions{cfg: Config{Logger: slog.New(logs)}})
	types := []string{"none", "sized", "chunked"}
	for _, typ := range types {
		h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	}
	h.origin.SetLatency(5 * time.Second)
	t.Cleanup(h.origin.Close)

	type end struct {
		status int
		at     time.Time
	}
	ended := make(chan end, 2)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		h.server.ServeHTTP(rec, r)
		ended <- end{rec.status, time.Now()}
	})
	srv := httpserve.New(handler, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	for i, body := range []string{"", "Content-Length: 2\r\n\r\n{}", "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		// Each of a provider of its own, which the origin is slow to list.
		req := fmt.Sprintf("GET /%s/%s/%s/index.json HTTP/1.1\r\nHost: mirror\r\n", originHost, ns, types[i])
		if body == "" {
			req += "\r\n"
		}
		fmt.Fprint(c, req+body)
		time.Sleep(300 * time.Millisecond) // the mirror waits for the origin
		gone := time.Now()
		c.Close()
		select {
		case e := <-ended:
			if e.status != httperr.StatusClientClosedRequest {
				t.Errorf("body %q: the client gone was answered %d, want %d", body, e.status, httperr.StatusClientClosedRequest)
			}
			if d := e.at.Sub(gone); d > 2*time.Second {
				t.Errorf("body %q: the handler returned %v after its client went away", body, d.Round(time.Millisecond))
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("body %q: the handler did not return", body)
		}
	}

	// A body longer than any door could have read is refused whole.
	req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", strings.NewReader(strings.Repeat("x", MaxRequestBody+1)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body of %d bytes: %s, want 413", MaxRequestBody+1, resp.Status)
	}
	<-ended
}

package discovery

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
)

// TestArchiveSize checks the size lookup of an archive (Range: bytes=0-0)
// against honest and hostile origins: the size comes from a 206's
// Content-Range total or a 200's Content-Length, a 200's body is not read
// (beyond a bounded drain), and an answer without a believable size, or
// one over the archive limit, is an origin error.
func TestArchiveSize(t *testing.T) {
	const limit = 1 << 20
	var sent atomic.Int64 // bytes the "endless" handler wrote
	mux := http.NewServeMux()
	partial := func(contentRange string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Range") != "bytes=0-0" {
				http.Error(w, "want Range: bytes=0-0, got "+r.Header.Get("Range"), http.StatusBadRequest)
				return
			}
			if contentRange != "" {
				w.Header().Set("Content-Range", contentRange)
			}
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte{'P'})
		}
	}
	mux.HandleFunc("/ok", partial("bytes 0-0/12345"))
	mux.HandleFunc("/at-limit", partial("bytes 0-0/"+strconv.Itoa(limit)))
	mux.HandleFunc("/unknown-total", partial("bytes 0-0/*"))
	mux.HandleFunc("/no-content-range", partial(""))
	mux.HandleFunc("/garbage", partial("lots of bytes"))
	mux.HandleFunc("/negative", partial("bytes 0-0/-5"))
	mux.HandleFunc("/zero", partial("bytes 0-0/0"))
	mux.HandleFunc("/overflow", partial("bytes 0-0/99999999999999999999999"))
	mux.HandleFunc("/huge", partial("bytes 0-0/9223372036854775807"))
	mux.HandleFunc("/over-limit", partial("bytes 0-0/"+strconv.Itoa(limit+1)))
	mux.HandleFunc("/items", partial("items 0-0/12345"))
	mux.HandleFunc("/full-body", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5000")
		w.Write(make([]byte, 5000))
	})
	mux.HandleFunc("/empty-body", func(w http.ResponseWriter, r *http.Request) {
		// The range ignored, and an archive of no bytes: no zip is.
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/full-body-huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(4*limit))
		w.Write(make([]byte, 64<<10)) // then hangs up
	})
	mux.HandleFunc("/full-body-streamed", func(w http.ResponseWriter, r *http.Request) {
		// No Content-Length, and a body that would not end: the lookup
		// must not read it.
		buf := make([]byte, 32<<10)
		for range 1 << 12 {
			n, err := w.Write(buf)
			sent.Add(int64(n))
			if err != nil {
				return
			}
			w.(http.Flusher).Flush()
			if r.Context().Err() != nil {
				return
			}
		}
	})
	mux.HandleFunc("/refused", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes */12345")
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
	})
	mux.HandleFunc("/forbidden", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "signed for HEAD only", http.StatusForbidden)
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, func(cfg *Config) { cfg.MaxArchiveBytes = limit })
	p := testProvider(s)

	tests := []struct {
		name       string
		path       string
		want       int64
		wantStatus int  // the OriginError's status, when an error is wanted
		tooLarge   bool // the error is ErrTooLarge
	}{
		{name: "206 with total", path: "/ok", want: 12345},
		{name: "206 exactly at the limit", path: "/at-limit", want: limit},
		{name: "200 full body: its Content-Length", path: "/full-body", want: 5000},
		{name: "206 without Content-Range", path: "/no-content-range", wantStatus: -1},
		{name: "206 with unknown total", path: "/unknown-total", wantStatus: -1},
		{name: "206 with garbage Content-Range", path: "/garbage", wantStatus: -1},
		{name: "206 with another unit", path: "/items", wantStatus: -1},
		{name: "206 with negative total", path: "/negative", wantStatus: -1},
		{name: "206 with zero total", path: "/zero", wantStatus: -1},
		{name: "206 with total overflowing int64", path: "/overflow", wantStatus: -1},
		{name: "206 with huge total", path: "/huge", wantStatus: -1, tooLarge: true},
		{name: "206 one byte over the limit", path: "/over-limit", wantStatus: -1, tooLarge: true},
		{name: "200 with an empty body", path: "/empty-body", wantStatus: -1},
		{name: "200 claiming a huge body", path: "/full-body-huge", wantStatus: -1, tooLarge: true},
		{name: "200 streamed without a size", path: "/full-body-streamed", wantStatus: -1},
		{name: "origin refusing the range", path: "/refused", wantStatus: http.StatusRequestedRangeNotSatisfiable},
		{name: "origin refusing the request", path: "/forbidden", wantStatus: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := c.ArchiveSize(context.Background(), p, s.url(tt.path))
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if n != tt.want {
					t.Fatalf("size %d, want %d", n, tt.want)
				}
				return
			}
			status := tt.wantStatus
			if status < 0 {
				status = 0
			}
			wantOriginError(t, err, OpArchiveSize, status)
			if n != 0 {
				t.Fatalf("size %d with error %v", n, err)
			}
			if tt.tooLarge != errors.Is(err, ErrTooLarge) {
				t.Fatalf("errors.Is(%v, ErrTooLarge) = %v", err, !tt.tooLarge)
			}
		})
	}
	// The streamed body was not read to its end: the lookup hung up after
	// a bounded drain (the handler stops when the client goes).
	if got := sent.Load(); got >= (1<<12)*(32<<10) {
		t.Fatalf("the endless body was sent in full (%d bytes): the lookup read it", got)
	}
}

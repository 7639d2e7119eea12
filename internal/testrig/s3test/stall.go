package s3test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"
)

// StallingURL returns the --shared-store URL of bucket with prefix through
// a proxy on loopback whose answers to a GET of an archive (an object
// under .../archives/) go silent after half their body, as a store (or
// the network to it) that stops answering midway: until the request
// ends. Everything else passes through. The proxy stops when t ends.
func (s *Server) StallingURL(t *testing.T, bucket, prefix string) string {
	t.Helper()
	return s.slowURL(t, bucket, prefix, 0)
}

// DrippingURL is StallingURL's but for the answers' second half, which
// comes one byte every interval (shorter than the call timeout, so that
// no read waits that long) until the request ends: a store whose
// transfer has all but stopped.
func (s *Server) DrippingURL(t *testing.T, bucket, prefix string, every time.Duration) string {
	t.Helper()
	return s.slowURL(t, bucket, prefix, every)
}

// SlowAnswersURL returns the --shared-store URL of bucket with prefix
// through a proxy on loopback that holds each request for a record (an
// object under .../meta/) for delay before passing it on: a store that
// answers, slowly. Everything else passes through at once. The proxy
// stops when t ends.
func (s *Server) SlowAnswersURL(t *testing.T, bucket, prefix string, delay time.Duration) string {
	t.Helper()
	proxy := s.reverseProxy(t)
	return s.proxyURL(t, bucket, prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/meta/") {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
}

// slowURL is StallingURL's (every 0) or DrippingURL's.
func (s *Server) slowURL(t *testing.T, bucket, prefix string, every time.Duration) string {
	t.Helper()
	proxy := s.reverseProxy(t)
	proxy.FlushInterval = -1
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodGet && strings.Contains(resp.Request.URL.Path, "/archives/") && resp.ContentLength > 1 {
			resp.Body = &stallingBody{ReadCloser: resp.Body, n: resp.ContentLength / 2, every: every, done: resp.Request.Context().Done()}
		}
		return nil
	}
	return s.proxyURL(t, bucket, prefix, proxy)
}

// reverseProxy is a proxy to the server. The host the client signed for
// is kept: versitygw checks the signature against it.
func (s *Server) reverseProxy(t *testing.T) *httputil.ReverseProxy {
	t.Helper()
	target, err := url.Parse(s.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	return &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = r.In.Host }}
}

// proxyURL serves h on loopback until t ends and returns the
// --shared-store URL of bucket with prefix through it.
func (s *Server) proxyURL(t *testing.T, bucket, prefix string, h http.Handler) string {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s&path_style=true", bucket, prefix, hs.URL, Region)
}

// stallingBody hands out its first n bytes, then waits until done, or
// (every set) hands out a byte each every until done.
type stallingBody struct {
	io.ReadCloser
	n     int64
	every time.Duration
	done  <-chan struct{}
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if b.n <= 0 && b.every > 0 && len(p) > 0 {
		select {
		case <-b.done:
			return 0, io.EOF
		case <-time.After(b.every):
			return b.ReadCloser.Read(p[:1])
		}
	}
	if b.n <= 0 {
		<-b.done
		return 0, io.EOF // as net/http may end a body whose request was canceled
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.ReadCloser.Read(p)
	b.n -= int64(n)
	return n, err
}

// AheadURL returns the --shared-store URL of bucket with prefix through
// a proxy on loopback whose answers are dated ahead of the server's clock
// (their Date header, when they have one): a store whose clock is ahead
// by that much, as when that much time has passed for it. Everything
// else passes through. The proxy stops when t ends.
func (s *Server) AheadURL(t *testing.T, bucket, prefix string, ahead time.Duration) string {
	t.Helper()
	proxy := s.reverseProxy(t)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if date, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
			resp.Header.Set("Date", date.Add(ahead).UTC().Format(http.TimeFormat))
		}
		return nil
	}
	return s.proxyURL(t, bucket, prefix, proxy)
}

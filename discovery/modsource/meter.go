package modsource

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// meter counts the bytes that one fetch receives, every response body of
// it, against Limits.MaxDownloadBytes: a Git repository's ref
// advertisement, upload-pack's negotiation lines (shallow-info, ACK, NAK)
// and pack, error pages and redirects, an archive, and all of these again
// for each submodule. It sits below go-git and the archive readers: they
// are handed no byte it has not counted, and no more than the limit in
// all; the first byte past it fails the read that would return it, and
// every read of the fetch after it, with the same *LimitError. A package
// read back (Unpack, CheckPackageLinks) is counted by one of its own,
// against MaxPackageBytes.
type meter struct {
	max  int64 // 0 or less: no limit
	n    atomic.Int64
	over atomic.Bool
	// what is counted, for the error: "" for a fetch's download.
	what string
	// setting is what sets max, for the error (LimitError.Setting).
	setting string
}

// err is the fetch's *LimitError once a byte past the limit arrived, nil
// until then.
func (m *meter) err() error {
	if !m.over.Load() {
		return nil
	}
	if m.what != "" {
		return &LimitError{Detail: fmt.Sprintf("%s is larger than %d bytes", m.what, m.max), Setting: m.setting}
	}
	return &LimitError{Detail: fmt.Sprintf("more than %d bytes to download", m.max), Setting: m.setting}
}

// fetcher returns f with its two ways to the network (HTTP, Open)
// counted by m.
func (m *meter) fetcher(f *Fetcher) *Fetcher {
	out := *f
	out.HTTP = withTransport(f.HTTP, func(next http.RoundTripper) http.RoundTripper {
		return &meteredTransport{next: next, m: m}
	})
	if open := f.Open; open != nil {
		out.Open = func(ctx context.Context, rawURL string) (io.ReadCloser, int64, error) {
			if err := m.err(); err != nil {
				return nil, 0, err
			}
			body, size, err := open(ctx, rawURL)
			if err != nil {
				return nil, 0, err
			}
			return &meteredBody{meteredReader{r: body, m: m}, body}, size, nil
		}
	}
	return &out
}

// withTransport returns a copy of c (nil: http.DefaultClient) whose
// transport is wrap of c's.
func withTransport(c *http.Client, wrap func(http.RoundTripper) http.RoundTripper) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	out := *c
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	out.Transport = wrap(next)
	return &out
}

// meteredTransport counts the body of every response it returns.
type meteredTransport struct {
	next http.RoundTripper
	m    *meter
}

func (t *meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.m.err(); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	var r io.Reader = resp.Body
	if resp.StatusCode/100 != 2 {
		// Read only for an error's text (go-git reads it whole into
		// the error), or skipped (a redirect's).
		r = io.LimitReader(r, maxErrorBodyBytes)
	}
	resp.Body = &meteredBody{meteredReader{r: r, m: t.m}, resp.Body}
	return resp, nil
}

// maxErrorBodyBytes is the most read of a response that is not a success.
const maxErrorBodyBytes = 1 << 10

// meteredReader hands out the bytes of r that m lets through.
type meteredReader struct {
	r io.Reader
	m *meter
}

func (mr *meteredReader) Read(p []byte) (int, error) {
	m := mr.m
	if err := m.err(); err != nil {
		return 0, err
	}
	if m.max > 0 && len(p) > 0 {
		left := m.max - m.n.Load()
		if left <= 0 {
			// At the limit: one more byte, if there is one, is too many.
			var probe [1]byte
			n, err := mr.r.Read(probe[:])
			if n > 0 {
				m.over.Store(true)
				return 0, m.err()
			}
			return 0, err
		}
		p = p[:min(int64(len(p)), left)]
	}
	n, err := mr.r.Read(p)
	m.n.Add(int64(n))
	return n, err
}

// meteredBody is a response body counted by its meter, and closed as soon
// as it brings a byte past the limit.
type meteredBody struct {
	meteredReader
	io.Closer
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.meteredReader.Read(p)
	if b.m.over.Load() {
		b.Close()
	}
	return n, err
}

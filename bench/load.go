package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// newClient returns an HTTP/1.1 keep-alive client that speaks TLS 1.3
// only and trusts pool, with room for conns idle connections per host.
// Both tfmirror and nginx are measured with it.
func newClient(pool *x509.CertPool, conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{
			RootCAs:    pool,
			MinVersion: tls.VersionTLS13,
			NextProtos: []string{"http/1.1"},
		},
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}
}

func closeIdle(c *http.Client) { c.Transport.(*http.Transport).CloseIdleConnections() }

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// get fetches url and returns its body.
func get(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	return body, err
}

// download fetches url, discarding the body, and returns its length and,
// when hash is set, its sha256. It also reports the negotiated TLS cipher.
func download(ctx context.Context, c *http.Client, url string, hash bool) (n int64, sum string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	bufp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bufp)
	var w io.Writer = io.Discard
	h := sha256.New()
	if hash {
		w = h
	}
	n, err = io.CopyBuffer(onlyWriter{w}, resp.Body, *bufp)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("GET %s: %d bytes of %d", url, n, resp.ContentLength)
	}
	if hash {
		sum = hex.EncodeToString(h.Sum(nil))
	}
	return n, sum, err
}

// onlyWriter hides io.Discard's ReaderFrom so that CopyBuffer uses our
// buffer.
type onlyWriter struct{ io.Writer }

// cipherOf returns the TLS version and cipher suite a server negotiates
// with c's settings.
func cipherOf(ctx context.Context, c *http.Client, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
	if err != nil {
		return "?"
	}
	resp, err := c.Do(req)
	if err != nil {
		return "?"
	}
	resp.Body.Close()
	if resp.TLS == nil {
		return "plain"
	}
	return fmt.Sprintf("%s %s %s", tls.VersionName(resp.TLS.Version), tls.CipherSuiteName(resp.TLS.CipherSuite), resp.Proto)
}

// throughput runs clients goroutines that download url in a loop for d and
// returns the bytes per second received in total.
func throughput(ctx context.Context, c *http.Client, url string, clients int, d time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	counts := make([]int64, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bufp := copyBufs.Get().(*[]byte)
			defer copyBufs.Put(bufp)
			buf := *bufp
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := c.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs[i] = err
					}
					return
				}
				if resp.StatusCode != http.StatusOK {
					errs[i] = fmt.Errorf("GET %s: %s", url, resp.Status)
					resp.Body.Close()
					return
				}
				for {
					n, err := resp.Body.Read(buf)
					counts[i] += int64(n)
					if err != nil {
						if err != io.EOF && ctx.Err() == nil {
							errs[i] = err
						}
						break
					}
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if err := parentErr(ctx); err != nil {
		return 0, err
	}
	var total int64
	for _, n := range counts {
		total += n
	}
	return float64(total) / elapsed.Seconds(), nil
}

// parentErr reports whether the run was interrupted (as opposed to the
// measurement's own deadline passing).
func parentErr(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return context.Canceled
	}
	return nil
}

// rpsResult is a requests-per-second measurement.
type rpsResult struct {
	rps      float64
	p50, p99 time.Duration
	n        int
}

// requestRate runs conns goroutines, each on its own keep-alive
// connection, that GET url back to back for d.
func requestRate(ctx context.Context, c *http.Client, url string, conns int, d time.Duration) (rpsResult, error) {
	// Open the connections first, so handshakes are not measured.
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = get(ctx, c, url) }()
	}
	wg.Wait()

	mctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	lat := make([][]time.Duration, conns)
	errs := make([]error, conns)
	start := time.Now()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := make([]time.Duration, 0, 4096)
			for mctx.Err() == nil {
				t0 := time.Now()
				_, err := get(mctx, c, url)
				if err != nil {
					if mctx.Err() == nil {
						errs[i] = err
					}
					break
				}
				l = append(l, time.Since(t0))
			}
			lat[i] = l
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return rpsResult{}, err
	}
	if ctx.Err() != nil {
		return rpsResult{}, ctx.Err()
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	return rpsResult{
		rps: float64(len(all)) / elapsed.Seconds(),
		p50: percentile(all, 50),
		p99: percentile(all, 99),
		n:   len(all),
	}, nil
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p+99)/100 - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/lowspeed"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
)

// downloads fetches what a package response or a module's download
// location names: SHA256SUMS, signatures, provider archives and module
// packages, under the size limits, the stall timeout and the low-speed
// limit.
type downloads struct {
	tr              *transport
	idle            time.Duration // Config.IdleTimeout
	minSpeed        int64         // Config.MinSpeed, bytes per second; 0: no low-speed limit
	minSpeedWindow  time.Duration // Config.MinSpeedWindow
	maxArchiveBytes int64         // Config.MaxArchiveBytes (maxArchiveSetting)
}

// FetchDocument downloads a small document of p's package, such as its
// SHA256SUMS or their signature, reading at most limit bytes (limit <= 0
// means Config.MaxDocumentBytes). The Op of its errors is "signature" when
// the URL's file name ends in .sig or .gpgsig, "shasums" when it contains
// SHA256SUMS, "document" otherwise. Any status other than 200, 404 included, is an
// *OriginError: the registry named this URL, so its absence is an origin
// fault, not a missing provider. ErrHostNotAllowed (wrapped) when p's
// host is not allowed; rawURL itself may name any host.
func (c *Client) FetchDocument(ctx context.Context, p addrs.Provider, rawURL string, limit int64) ([]byte, error) {
	return c.downloads.fetchDocument(ctx, p, rawURL, limit, false)
}

// FetchFile is FetchDocument for a file that its origin may not have, a
// file of a CLI release (package releases): its 404 is the origin's
// answer, not its failure, ErrNotFound (wrapped) as a registry's 404 for
// what it lacks is, and counted as not_found, not as an error.
func (c *Client) FetchFile(ctx context.Context, p addrs.Provider, rawURL string, limit int64) ([]byte, error) {
	return c.downloads.fetchDocument(ctx, p, rawURL, limit, true)
}

// fetchDocument is FetchDocument, or FetchFile when absentNotFound.
func (dl *downloads) fetchDocument(ctx context.Context, p addrs.Provider, rawURL string, limit int64, absentNotFound bool) (_ []byte, err error) {
	if err := dl.tr.checkHost(p.Hostname); err != nil {
		return nil, err
	}
	defer dl.tr.observe(p.Hostname, documentOp(rawURL), time.Now(), &err)
	if limit <= 0 {
		limit = dl.tr.maxDocumentBytes
	}
	r, err := downloadRequest(p, documentOp(rawURL), rawURL)
	if err != nil {
		return nil, err
	}
	resp, reqCtx, end, err := dl.tr.send(ctx, r, dl.tr.requestContext(ctx))
	if err != nil {
		return nil, err
	}
	defer end()
	defer resp.Body.Close()
	r.u = resp.Request.URL
	switch {
	case resp.StatusCode == http.StatusNotFound && absentNotFound:
		drain(resp.Body)
		return nil, fmt.Errorf("%w: %s", ErrNotFound, redact.URL(r.u))
	case resp.StatusCode != http.StatusOK:
		drain(resp.Body)
		return nil, originError(r, resp.StatusCode, statusError(resp.StatusCode))
	}
	if resp.ContentLength > limit {
		return nil, originError(r, 0, fmt.Errorf("%w: Content-Length %d exceeds %d bytes",
			ErrTooLarge, resp.ContentLength, limit))
	}
	return dl.tr.readBody(ctx, reqCtx, r, resp.Body, limit)
}

// FetchSums downloads the SHA256SUMS document of p's package, reading
// at most sumsLimit bytes, and its detached signature, at most
// signatureLimit bytes, from the URLs the package answer names
// (Package.SHASumsURL, Package.SHASumsSignatureURL): the checksums step
// of a package's metadata, as one call, the two downloads made at once.
// Each is made, limited and observed as FetchDocument's (its Op
// "shasums" or "signature" by its URL); the first to fail ends the other,
// and its error is returned.
func (c *Client) FetchSums(ctx context.Context, p addrs.Provider, pkg *Package, sumsLimit, signatureLimit int64) (sums, signature []byte, err error) {
	g, gctx := workgroup.WithContext(ctx, c.tr.log, "provider", p.String(), "step", "checksums")
	g.Go(func() (err error) {
		sums, err = c.downloads.fetchDocument(gctx, p, pkg.SHASumsURL, sumsLimit, false)
		return err
	})
	g.Go(func() (err error) {
		signature, err = c.downloads.fetchDocument(gctx, p, pkg.SHASumsSignatureURL, signatureLimit, false)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return sums, signature, nil
}

func documentOp(rawURL string) string {
	name := rawURL
	if u, err := url.Parse(rawURL); err == nil {
		name = path.Base(u.Path)
	}
	switch {
	case strings.HasSuffix(name, ".sig"), strings.HasSuffix(name, ".gpgsig"):
		return OpSignature
	case strings.Contains(name, "SHA256SUMS"):
		return OpShasums
	}
	return OpDocument
}

// OpenArchive starts downloading a provider archive of p. It returns the
// body and its size (-1 when the origin sends no Content-Length). The body
// fails (with an *OriginError, Op "archive") when a read waits longer than
// Config.IdleTimeout for data, when it arrives slower than the low-speed
// limit (Config.MinSpeed over Config.MinSpeedWindow; both of these are
// timeouts), when it grows past Config.MaxArchiveBytes, or when it ends
// before its Content-Length; it never truncates silently. The download has
// no overall deadline beyond ctx. The caller must Close body.
// Any status other than 200 is an *OriginError. ErrHostNotAllowed (wrapped)
// when p's host is not allowed; rawURL itself may name any host.
func (c *Client) OpenArchive(ctx context.Context, p addrs.Provider, rawURL string) (io.ReadCloser, int64, error) {
	return c.downloads.open(ctx, p, OpArchive, rawURL, false)
}

// open is OpenArchive for a download of operation op, sent without
// credentials when anonymous.
func (dl *downloads) open(ctx context.Context, p addrs.Provider, op, rawURL string, anonymous bool) (_ io.ReadCloser, _ int64, err error) {
	if err := dl.tr.checkHost(p.Hostname); err != nil {
		return nil, 0, err
	}
	if op == OpModuleSource {
		if u, perr := url.Parse(rawURL); perr == nil {
			if err := dl.tr.refuseMirrorHost(u); err != nil {
				return nil, 0, err
			}
		}
	}
	start := time.Now()
	defer func() {
		if err != nil {
			dl.tr.observe(p.Hostname, op, start, &err)
		}
	}()
	r, err := downloadRequest(p, op, rawURL)
	if err != nil {
		return nil, 0, err
	}
	r.anonymous = anonymous
	// Each attempt has its own request context; the idle timer also covers
	// the wait for response headers. Retries happen only before the body
	// is handed out.
	var (
		cancel context.CancelCauseFunc
		timer  *time.Timer
	)
	idle := &timeoutError{msg: fmt.Sprintf("no data received for %s", dl.idle)}
	resp, reqCtx, _, err := dl.tr.send(ctx, r, func() (context.Context, func()) {
		reqCtx, cancelAttempt := context.WithCancelCause(ctx)
		t := time.AfterFunc(dl.idle, func() { cancelAttempt(idle) })
		cancel, timer = cancelAttempt, t
		return reqCtx, func() { t.Stop(); cancelAttempt(nil) }
	})
	if err != nil {
		return nil, 0, err
	}
	timer.Stop()
	r.u = resp.Request.URL
	fail := func(status int, err error) (io.ReadCloser, int64, error) {
		drain(resp.Body)
		cancel(nil)
		return nil, 0, originError(r, status, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fail(resp.StatusCode, statusError(resp.StatusCode))
	}
	if resp.ContentLength > dl.maxArchiveBytes {
		return fail(0, fmt.Errorf("%w: Content-Length %d exceeds %d bytes (%s)",
			ErrTooLarge, resp.ContentLength, dl.maxArchiveBytes, maxArchiveSetting))
	}
	b := &archiveBody{
		speed:     dl.startSpeedCheck(cancel),
		body:      resp.Body,
		timer:     timer,
		idle:      dl.idle,
		max:       dl.maxArchiveBytes,
		cancel:    cancel,
		callerErr: ctx.Err,
		cause:     func() error { return context.Cause(reqCtx) },
		wrap: func(err error) error {
			return originError(r, 0, err)
		},
		// The download is observed when it ends: its outcome, its whole
		// duration and the bytes received.
		done: func(n int64, err error) {
			dl.tr.observer.OriginBytes(string(p.Hostname), n)
			dl.tr.observe(p.Hostname, op, start, &err)
		},
	}
	return b, resp.ContentLength, nil
}

// downloadRequest checks that rawURL is an absolute https URL.
func downloadRequest(p addrs.Provider, op, rawURL string) (request, error) {
	u, err := url.Parse(rawURL)
	r := request{p: p, op: op, u: u, accept: "*/*"}
	if err != nil {
		return r, &OriginError{Host: string(p.Hostname), Op: op, Err: errors.New("download URL does not parse")}
	}
	if u.Scheme != "https" || u.Host == "" {
		return r, originError(r, 0, fmt.Errorf("download URL %q is not an absolute https URL", redact.URL(u)))
	}
	return r, nil
}

// errAbandoned is a body closed by its reader before its end, where no
// read failed.
var errAbandoned = errors.New("download abandoned before its end")

// archiveBody enforces the idle timeout, the low-speed limit and the size
// limit on an archive. Read and Close may be called from different
// goroutines; Read calls must not overlap each other.
type archiveBody struct {
	speed     *lowspeed.Check // nil when the low-speed limit is off
	body      io.ReadCloser
	timer     *time.Timer
	idle      time.Duration
	max, n    int64
	err       error
	cancel    context.CancelCauseFunc
	callerErr func() error // the caller's context error
	cause     func() error // the request context's cancellation cause
	wrap      func(error) error
	done      func(n int64, err error) // called once, at Close
	sawEOF    bool
	closeOnce sync.Once
}

func (b *archiveBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	// Read one byte past the limit at most, to tell "exactly max" from "more".
	if room := b.max - b.n + 1; int64(len(p)) > room {
		p = p[:room]
	}
	// The low-speed limit counts only the time spent waiting for the
	// origin's bytes, not the caller's between reads (a slow local disk).
	b.speed.Resume()
	b.timer.Reset(b.idle)
	n, err := b.body.Read(p)
	b.timer.Stop()
	b.speed.Pause()
	if b.n+int64(n) > b.max {
		n = int(b.max - b.n)
		b.n = b.max
		b.err = b.wrap(fmt.Errorf("%w: body exceeds %d bytes (%s)", ErrTooLarge, b.max, maxArchiveSetting))
		return n, b.err
	}
	b.n += int64(n)
	b.speed.Add(n)
	if err != nil {
		b.speed.Stop() // the body is over either way
	}
	if err == io.EOF && b.cause() != nil {
		// net/http can end a body cleanly when its request is canceled
		// mid-read: after a stall or a cancellation, EOF is not the end.
		err = b.cause()
	}
	switch {
	case err == nil || err == io.EOF:
		b.sawEOF = b.sawEOF || err == io.EOF
		return n, err
	case b.callerErr() != nil:
		b.err = b.callerErr()
	default:
		var te *timeoutError
		if cause := b.cause(); errors.As(cause, &te) {
			err = cause
		}
		b.err = b.wrap(stripURL(err))
	}
	return n, b.err
}

func (b *archiveBody) Close() error {
	b.closeOnce.Do(func() {
		b.timer.Stop()
		b.speed.Stop()
		b.cancel(nil)
		err := b.err
		if err == nil && !b.sawEOF {
			err = errAbandoned
		}
		b.done(b.n, err)
	})
	return b.body.Close()
}

// startSpeedCheck starts the low-speed limit of a download whose request
// cancel ends, a timeout as the cause, paused until the first read; nil
// when the limit is off.
func (dl *downloads) startSpeedCheck(cancel context.CancelCauseFunc) *lowspeed.Check {
	cause := &timeoutError{msg: fmt.Sprintf("fewer than %d bytes received in %s (low-speed limit %d bytes/s)",
		lowspeed.MinBytes(dl.minSpeed, dl.minSpeedWindow), dl.minSpeedWindow, dl.minSpeed)}
	c := lowspeed.Start(dl.minSpeed, dl.minSpeedWindow, func() { cancel(cause) })
	c.Pause()
	return c
}

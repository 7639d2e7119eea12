package discovery

// The road every request to an origin or a source host takes: the allowed
// origins, credentials, the network policy (https only, the dial guard of
// guard.go, bounded redirects), per-attempt timeouts, retries and the
// circuit breaker (resilience.go), and the observation of each operation.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
)

// transport sends the requests of every part of the Client. It holds no
// per-origin state but the circuit breaker's.
type transport struct {
	guard       *dialGuard // the *http.Transport's Proxy and DialContext
	log         *slog.Logger
	observer    Observer
	watcher     OriginWatcher             // nil: none
	allowed     map[svchost.Hostname]bool // from Config.AllowedOrigins
	credentials func(host svchost.Hostname) string
	mirrorHost  func() string     // Config.MirrorHost; nil: none
	base        *rootsTransport   // the guarded *http.Transport, made again when the roots change
	rt          http.RoundTripper // policy (https only, User-Agent) over base
	httpClient  *http.Client      // registry API and downloads: redirect policy on top of rt
	breaker     *breaker
	sleep       func(ctx context.Context, d time.Duration) error // between retries; tests replace it

	requestTimeout   time.Duration // each metadata attempt, body included
	maxDocumentBytes int64         // registry JSON answers
	retries          int
	retryBaseDelay   time.Duration
	retryMaxDelay    time.Duration
	retryAfterMax    time.Duration
}

// policyTransport refuses anything but https, sets the User-Agent,
// gives each request the proxyChoice the dial guard reads, and fails a
// redirect whose Location does not parse (errBadLocation).
type policyTransport struct {
	next      http.RoundTripper
	userAgent string
}

// errNotHTTPS is a policy refusal, never retried.
var errNotHTTPS = errors.New("unsupported protocol scheme: only https is allowed")

func (p *policyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w (got %q)", errNotHTTPS, req.URL.Scheme)
	}
	r := req.Clone(withProxyChoice(req.Context()))
	r.Header.Set("User-Agent", p.userAgent)
	resp, err := p.next.RoundTrip(r)
	if err == nil && unparsableRedirect(req.URL, resp) {
		drain(resp.Body)
		return nil, errBadLocation
	}
	return resp, err
}

// errBadLocation is a redirect whose Location does not parse as a URL.
// It names no Location: net/http's own error for it ("failed to parse
// Location header ...") spells the Location out whole, query included (a
// pre-signed URL's signature), into the error the client's answer, the
// status page and the log show.
var errBadLocation = errors.New("the redirect's Location header does not parse as a URL")

// unparsableRedirect reports whether resp, the answer to a request for
// u, is a redirect that net/http would follow to a Location it cannot
// parse.
func unparsableRedirect(u *url.URL, resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return false
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		return false
	}
	_, err := u.Parse(loc)
	return err != nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// checkRedirect follows at most maxRedirects redirects, only to https,
// drops the Authorization header when a redirect leaves the first request's
// host (net/http would keep it for subdomains), and sends no Referer:
// net/http's names the URL redirected from, query included (a pre-signed
// URL's signature), to the host redirected to.
func checkRedirect(req *http.Request, via []*http.Request) error {
	req.Header.Del("Referer")
	if len(via) > maxRedirects {
		return &redirectRefused{msg: fmt.Sprintf("stopped after %d redirects", maxRedirects)}
	}
	if req.URL.Scheme != "https" {
		return &redirectRefused{msg: fmt.Sprintf("refusing redirect to a non-https URL (%s://%s)", req.URL.Scheme, req.URL.Host)}
	}
	if hostKey(req.URL) != hostKey(via[0].URL) {
		req.Header.Del("Authorization")
	}
	return nil
}

// sourceHopKey marks the context of a module source request, each of
// whose redirects transport.checkRedirect checks as its first hop.
type sourceHopKey struct{}

// checkRedirect is the package's checkRedirect for the transport's
// requests, and for a module source's (marked by sourceHopKey) the
// refusal of a hop to the mirror's own public host that its first
// request had.
func (t *transport) checkRedirect(req *http.Request, via []*http.Request) error {
	if err := checkRedirect(req, via); err != nil {
		return err
	}
	if req.Context().Value(sourceHopKey{}) != nil {
		if err := t.refuseMirrorHost(req.URL); err != nil {
			return &redirectRefused{msg: err.Error(), err: err}
		}
	}
	return nil
}

// refuseMirrorHost is a *modsource.UnsupportedError when u, a module
// source URL, is on the mirror's own public host (Config.MirrorHost),
// which the mirror would ask itself; nil otherwise.
func (t *transport) refuseMirrorHost(u *url.URL) error {
	if t.mirrorHost == nil || u == nil {
		return nil
	}
	own := normalHost(t.mirrorHost())
	if own == "" || normalHost(u.Hostname()) != own {
		return nil
	}
	return &modsource.UnsupportedError{Detail: fmt.Sprintf("location %s points at this mirror (%s, the host of its public URL): the mirror would fetch from itself; refused", redact.URL(u), own)}
}

// normalHost spells a host name for comparison: lowercase, without a
// trailing dot or IPv6 brackets.
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// hostKey spells a URL's host the way svchost.Hostname does for comparison:
// lowercase, without the default port 443.
func hostKey(u *url.URL) string {
	h := strings.ToLower(u.Hostname())
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if p := u.Port(); p != "" && p != "443" {
		h += ":" + p
	}
	return h
}

// checkHost refuses a host that is not one of Config.AllowedOrigins. It is
// the first thing every method does, before any lookup or connection.
func (t *transport) checkHost(host svchost.Hostname) error {
	if !t.allowed[host] {
		return fmt.Errorf("%w: %q", ErrHostNotAllowed, host.ForDisplay())
	}
	return nil
}

// token returns the bearer token to send with a request to u on behalf of
// the origin host, "" when none may be sent.
func (t *transport) token(host svchost.Hostname, u *url.URL) string {
	if t.credentials == nil || hostKey(u) != string(host) {
		return ""
	}
	return t.credentials(host)
}

// request describes one GET to an origin.
type request struct {
	p      addrs.Provider
	op     string
	u      *url.URL
	accept string
	// anonymous sends no credentials, even to the origin host itself
	// (module sources: see OpenSource).
	anonymous bool
	// firstByte asks for the first byte only (Range: bytes=0-0; see
	// ArchiveSize).
	firstByte bool
}

func originError(r request, status int, err error) *OriginError {
	e := &OriginError{Host: string(r.p.Hostname), Op: r.op, StatusCode: status, Err: err}
	if h := hostKey(r.u); h != string(r.p.Hostname) {
		e.DownloadHost = h
	}
	return e
}

// do sends r on ctx. Failures are *OriginError, except that the caller's own
// cancellation or deadline is returned as such.
func (t *transport) do(ctx, reqCtx context.Context, r request) (*http.Response, error) {
	hopCtx := reqCtx
	if r.op == OpModuleSource {
		hopCtx = context.WithValue(reqCtx, sourceHopKey{}, true)
	}
	req, err := http.NewRequestWithContext(hopCtx, http.MethodGet, r.u.String(), nil)
	if err != nil {
		return nil, originError(r, 0, err)
	}
	req.Header.Set("Accept", r.accept)
	if r.firstByte {
		req.Header.Set("Range", "bytes=0-0")
	}
	if tok := t.token(r.p.Hostname, r.u); tok != "" && !r.anonymous {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if r.op == OpModuleSource {
		// Only a credential the caller tied to this fetch, only to its
		// host (checkRedirect drops it when a redirect leaves that host):
		// the origin's token where its download answer asked for it,
		// else the operator's source credential.
		a := t.registryAuthorization(reqCtx, r.p.Hostname, r.u)
		if a == "" {
			a = sourceAuthorization(reqCtx, r.u, false)
		}
		if a != "" {
			req.Header.Set("Authorization", a)
		}
	}
	// What quotes the answer (modsource.Fetch) leaves out what was sent.
	redact.Sent(reqCtx, req.Header.Get("Authorization"))
	start := time.Now()
	resp, err := t.httpClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s for %s: %w", r.op, redact.URL(r.u), r.p, ctx.Err())
		}
		// Not err itself: its *url.Error spells out the URL of the last
		// hop, query string (a pre-signed URL's signature) included.
		err = stripURL(err)
		t.log.LogAttrs(ctx, slog.LevelDebug, "origin request failed",
			slog.String("op", r.op), slog.String("url", redact.URL(r.u)), slog.Any("error", err))
		return nil, originError(r, 0, causeOf(reqCtx, err))
	}
	t.log.LogAttrs(ctx, slog.LevelDebug, "origin request",
		slog.String("op", r.op), slog.String("url", redact.URL(r.u)),
		slog.Int("status", resp.StatusCode), slog.Duration("duration", time.Since(start)))
	return resp, nil
}

// causeOf replaces err by the cancellation cause of reqCtx when that is one
// of ours (a request deadline or a stalled body).
func causeOf(reqCtx context.Context, err error) error {
	var te *timeoutError
	if cause := context.Cause(reqCtx); errors.As(cause, &te) {
		return cause
	}
	return err
}

// stripURL removes the URL that *url.Error puts into its message: a download
// URL may carry pre-signed credentials, and OriginError names the host.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// readBody reads a whole response body of at most limit bytes. Failures are
// *OriginError, except the caller's own cancellation.
func (t *transport) readBody(ctx, reqCtx context.Context, r request, body io.Reader, limit int64) ([]byte, error) {
	data, err := readLimited(body, limit)
	if err == nil && reqCtx.Err() != nil {
		// net/http can end a body cleanly when its request is canceled
		// mid-read, so a body that "ended" after the deadline is suspect.
		err = reqCtx.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s for %s: %w", r.op, r.p, ctx.Err())
		}
		return nil, originError(r, 0, causeOf(reqCtx, err))
	}
	return data, nil
}

// getJSON GETs r.u and returns the body of its application/json answer,
// and r with u set to the response's final URL (after redirects), for
// resolving relative URLs and naming the host in errors. A 404 is
// ErrNotFound for what.
func (t *transport) getJSON(ctx context.Context, r request, what string) ([]byte, request, error) {
	resp, reqCtx, end, err := t.send(ctx, r, t.requestContext(ctx))
	if err != nil {
		return nil, r, err
	}
	defer end()
	defer resp.Body.Close()
	r.u = resp.Request.URL
	switch {
	case resp.StatusCode == http.StatusNotFound:
		drain(resp.Body)
		return nil, r, fmt.Errorf("%w: %s", ErrNotFound, what)
	case resp.StatusCode != http.StatusOK:
		drain(resp.Body)
		return nil, r, originError(r, resp.StatusCode, statusError(resp.StatusCode))
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		drain(resp.Body)
		return nil, r, originError(r, 0, fmt.Errorf("response Content-Type is %s, not application/json", shownMediaType(ct, mt, err)))
	}
	if resp.ContentLength > t.maxDocumentBytes {
		drain(resp.Body)
		return nil, r, originError(r, 0, fmt.Errorf("%w: Content-Length %d exceeds %d bytes",
			ErrTooLarge, resp.ContentLength, t.maxDocumentBytes))
	}
	data, err := t.readBody(ctx, reqCtx, r, resp.Body, t.maxDocumentBytes)
	if err != nil {
		return nil, r, err
	}
	return data, r, nil
}

// shownMediaType is what an error says of an answer's Content-Type, ct,
// which parsed as the media type mt, or failed to (err): the media type
// alone (no parameters), quoted, when it is a type/subtype of a
// registered top-level type (text/html) and short, else only that it is
// none. The header is the host's text, which may echo the request and
// the credential it carried: mime.ParseMediaType reads a lone token (a
// credential without its scheme) as a media type too.
func shownMediaType(ct, mt string, err error) string {
	top, _, slash := strings.Cut(mt, "/")
	switch {
	case ct == "":
		return "missing"
	case err != nil || len(mt) > 64 || !slash || !topLevelTypes[top]:
		return "not a media type"
	}
	return strconv.Quote(mt)
}

// topLevelTypes are the registered top-level media types (RFC 6838,
// RFC 8081, RFC 9695), which a Content-Type an error quotes begins with.
var topLevelTypes = map[string]bool{"application": true, "audio": true, "example": true, "font": true, "haptics": true,
	"image": true, "message": true, "model": true, "multipart": true, "text": true, "video": true}

// readLimited reads all of body, failing with ErrTooLarge past limit bytes.
func readLimited(body io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: body exceeds %d bytes", ErrTooLarge, limit)
	}
	return data, nil
}

// drain discards a little of an unwanted body so the connection can be
// reused, then closes it.
func drain(body io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	body.Close()
}

// observe reports the outcome of an operation that started at start; it
// is deferred with a pointer to the operation's named error result. An
// operation that failed because service discovery did (its failure was
// reported as OpDiscovery, or is remembered from one that was) sent no
// request of its own, and is not reported again. One the mirror called
// off (context.Canceled: the other download of FetchSums failed, the
// mirror shuts down) says nothing of the origin, and is not counted.
//
// It is where every operation's error passes: the origin's token (the
// one credential an operation sends to host, transport.token) is
// replaced in it (redact.Credentials), as the origin's answer that an
// error quotes (a location, a platform) may echo it. Its text is then
// cut to MaxErrorText bytes (logbound.CutError): the answer may be a
// document's worth.
func (t *transport) observe(host svchost.Hostname, op string, start time.Time, err *error) {
	if t.credentials != nil {
		*err = redact.Credentials(*err, t.credentials(host))
	}
	if *err != nil {
		*err = logbound.CutError(*err, MaxErrorText)
	}
	var oe *OriginError
	if op != OpDiscovery && errors.As(*err, &oe) && oe.Op == OpDiscovery {
		return
	}
	if !errors.Is(*err, context.Canceled) {
		t.observer.OriginRequest(string(host), op, Outcome(*err), time.Since(start))
	}
	if t.watcher != nil {
		t.watcher.OriginDone(string(host), op, *err)
	}
}

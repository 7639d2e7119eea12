package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/logbound"
)

// The client lives beside the server: the routes, the request and answer
// types and the error body are one wire format, and tests in this package
// drive both ends through a real socket.

// SocketName is the admin API's unix socket in the data directory. A
// running `tfmirror serve` listens on it; subcommands that need the data
// directory while it runs (Badger lets one process open it) go through it.
const SocketName = "tfmirror.sock"

// SocketPath is the admin socket of dataDir.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, SocketName) }

// Listen listens on the admin socket of dataDir, mode 0600. The caller
// holds the data directory's cache open, so no live tfmirror owns a socket
// file found there: it is left by a process that was killed, and replaced.
// Closing the listener removes the socket file.
func Listen(dataDir string) (net.Listener, error) {
	path := SocketPath(dataDir)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale admin socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Client calls the admin API of the tfmirror serving a data directory.
type Client struct {
	http *http.Client
	// silence is how long a call waits for a sign of the serve (a
	// heartbeat, its answer) before it gives up on it: silenceBeats of
	// the heartbeats its ping said it sends; 0 for a serve that sends
	// none, whose calls are not bounded.
	silence time.Duration
	// silent is set once a call gave the serve up for its silence: the
	// calls after it fail at once, so that a command of many calls (a
	// sync of many packages) fails in one silence, not in one each.
	silent atomic.Bool
}

// Dial connects to the admin socket of dataDir, and asks the process
// there whether it answers (GET /v1/ping). It returns ErrNoServer when no
// process listens there: no socket file, one left by a process that is
// gone, or a path too long to be a unix socket's (EINVAL), where Listen
// fails as well (a serve there runs without its admin socket). A process
// that holds the socket but answers nothing within pingTimeout (stopped,
// or hung) is an error, ErrNotAnswering, where a command's call would
// have waited for ever. A serve shutting down answers ErrShuttingDown
// until it has stopped (API.Drain).
func Dial(ctx context.Context, dataDir string) (*Client, error) {
	path := SocketPath(dataDir)
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := d.DialContext(dctx, "unix", path)
	cancel()
	if err != nil {
		return nil, dialError(path, err)
	}
	conn.Close()
	c := &Client{http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 16,
	}}}
	if err := c.ping(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	return c, nil
}

// dialError is Dial's error for err, met connecting to the socket at
// path.
func dialError(path string, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED):
		return ErrNoServer
	case errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("%w: %s is too long a path for a unix socket (%d bytes)", ErrNoServer, path, len(path))
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		// The socket (mode 0600) or its directory is another user's:
		// the mirror's, whose serve lets in only its own user and root.
		return fmt.Errorf("admin socket %s: permission denied: the data directory and its admin socket are the mirror's user's, and only that user or root may use them; run the command as that user (sudo -u USER tfmirror ...)", path)
	}
	return fmt.Errorf("admin socket %s: %w", path, err)
}

// pingTimeout bounds Dial's question. A var, for tests.
var pingTimeout = 15 * time.Second

// ErrNotAnswering: a process holds the admin socket but does not answer
// on it (stopped, or hung).
var ErrNotAnswering = errors.New("the tfmirror serving this data directory does not answer on its admin socket (stopped, or hung): see its log, or its process's state")

// ping asks the serving process whether it answers, and whether it sends
// heartbeats (Ping). Any HTTP answer will do: a serve of an earlier
// release, which has no /v1/ping, answers 404, and sends none; but one
// that says it is shutting down is ErrShuttingDown.
func (c *Client) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, "http://tfmirror/v1/ping", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() == nil && pctx.Err() != nil {
			return fmt.Errorf("%w: no answer within %s", ErrNotAnswering, pingTimeout)
		}
		return err
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	var refused ErrorBody
	if resp.StatusCode == http.StatusServiceUnavailable && json.Unmarshal(data, &refused) == nil && refused.Error == ErrShuttingDown.Error() {
		return ErrShuttingDown
	}
	var p Ping
	if resp.StatusCode == http.StatusOK && json.Unmarshal(data, &p) == nil && p.HeartbeatMillis > 0 {
		c.silence = silenceBeats * time.Duration(p.HeartbeatMillis) * time.Millisecond
	}
	return nil
}

// maxAnswer bounds the answer of one call that the client reads. It is
// the serving process's, which may be large: a prune lists every version
// it removed (or, dry run, would remove), an export or an import every
// version it wrote, and a large cache has tens of thousands. A var, for
// tests.
var maxAnswer int64 = 256 << 20

// ErrNoServer: no process listens on the admin socket.
var ErrNoServer = errors.New("no tfmirror serves this data directory")

// ErrShuttingDown: the tfmirror serving the data directory is shutting
// down, and takes no new command.
var ErrShuttingDown = errors.New("the tfmirror serving this data directory is shutting down and takes no new command; run it again once that serve has stopped (or against the one that replaces it)")

// Close closes the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

func (c *Client) call(ctx context.Context, path string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if c.silent.Load() {
		return fmt.Errorf("running tfmirror: %w: it gave no sign of itself for %s on an earlier call", ErrNotAnswering, c.silence)
	}
	ctx, watch := c.watch(ctx)
	defer watch.stop()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://tfmirror"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set(HeartbeatHeader, "1")
	resp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("running tfmirror: %w", watch.why(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(&signReader{resp.Body, watch}, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("running tfmirror: %w", watch.why(err))
	}
	if int64(len(data)) > maxAnswer {
		// Not read whole: said so, rather than as JSON cut short. The
		// serving process did the work, and its log says what it did.
		return fmt.Errorf("running tfmirror: its answer to %s is larger than %d MiB, more than is read; its log says what it did", path, maxAnswer>>20)
	}
	if resp.StatusCode != http.StatusOK {
		return DecodeError(resp.StatusCode, data)
	}
	return json.Unmarshal(data, out)
}

// Versions is API.Versions through the socket.
func (c *Client) Versions(ctx context.Context, p addrs.Provider) ([]Version, error) {
	var out []Version
	return out, c.call(ctx, "/v1/versions", Request{Provider: p.String()}, &out)
}

// Package is API.Package through the socket.
func (c *Client) Package(ctx context.Context, p addrs.Provider, version string, platforms []string) ([]Archive, error) {
	var out []Archive
	return out, c.call(ctx, "/v1/package", Request{Provider: p.String(), Version: version, Platforms: platforms}, &out)
}

// Ensure is API.Ensure through the socket.
func (c *Client) Ensure(ctx context.Context, p addrs.Provider, version, platform string) (Ensured, error) {
	var out Ensured
	return out, c.call(ctx, "/v1/ensure", Request{Provider: p.String(), Version: version, Platform: platform}, &out)
}

// Export is API.Export through the socket.
func (c *Client) Export(ctx context.Context, req ExportRequest) (Exported, error) {
	var out Exported
	return out, c.call(ctx, "/v1/export", req, &out)
}

// Import is API.Import through the socket.
func (c *Client) Import(ctx context.Context, req ImportRequest) (Imported, error) {
	var out Imported
	return out, c.call(ctx, "/v1/import", req, &out)
}

// ModuleVersions is API.ModuleVersions through the socket.
func (c *Client) ModuleVersions(ctx context.Context, m addrs.Module) ([]string, error) {
	var out []string
	return out, c.call(ctx, "/v1/module/versions", ModuleRequest{Module: m.String()}, &out)
}

// UnpackModule is API.UnpackModule through the socket.
func (c *Client) UnpackModule(ctx context.Context, m addrs.Module, version, dir string) (Module, error) {
	var out Module
	return out, c.call(ctx, "/v1/module/unpack", ModuleRequest{Module: m.String(), Version: version, Dir: dir}, &out)
}

// CallError is a failed admin API call as a client sees it.
type CallError struct {
	Status int
	Msg    string
	// Raw says the answer was not an ErrorBody (not the admin API's own
	// refusal: a route the server does not have, for one).
	Raw bool
}

func (e *CallError) Error() string { return e.Msg }

// earlier says so when err is the answer of a tfmirror that has no route
// for the call: a serve of an earlier release, which answers 404 without
// an ErrorBody. does says what the call asked it to do ("sync CLI
// releases").
func earlier(err error, does string) error {
	var ce *CallError
	if errors.As(err, &ce) && ce.Status == http.StatusNotFound && ce.Raw {
		return fmt.Errorf("the running tfmirror serve does not %s (is it of an earlier release? restart it): %w", does, err)
	}
	return err
}

// DecodeError turns a failed admin answer into an error. Its message,
// which may quote what the serve read of a stranger (a record, an
// origin's answer), has its control and format characters escaped, its
// line breaks kept (logbound.EscapedLines): the commands print it as it
// is, to a terminal that would obey them.
func DecodeError(status int, body []byte) error {
	var ae ErrorBody
	if json.Unmarshal(body, &ae) != nil || ae.Error == "" {
		return &CallError{Status: status, Msg: fmt.Sprintf("admin API status %d: %q", status, body), Raw: true}
	}
	return &CallError{Status: status, Msg: logbound.EscapedLines(ae.Error)}
}

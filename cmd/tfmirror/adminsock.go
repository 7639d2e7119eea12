package main

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
	"syscall"
	"time"

	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/proxy"
)

// adminSocketName is the admin API's unix socket in the data directory. A
// running `tfmirror serve` listens on it; subcommands that need the data
// directory while it runs (Badger lets one process open it) go through it.
const adminSocketName = "tfmirror.sock"

func adminSocketPath(dataDir string) string { return filepath.Join(dataDir, adminSocketName) }

// listenAdmin listens on the admin socket of dataDir, mode 0600. The caller
// holds the data directory's cache open, so no live tfmirror owns a socket
// file found there: it is left by a process that was killed, and replaced.
// Closing the listener removes the socket file.
func listenAdmin(dataDir string) (net.Listener, error) {
	path := adminSocketPath(dataDir)
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

// adminClient calls the admin API of the tfmirror serving dataDir.
type adminClient struct {
	http *http.Client
}

// dialAdmin connects to the admin socket of dataDir. It returns
// errNoServer when no process listens there: no socket file, or one left
// by a process that is gone.
func dialAdmin(ctx context.Context, dataDir string) (*adminClient, error) {
	path := adminSocketPath(dataDir)
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := d.DialContext(dctx, "unix", path)
	cancel()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, errNoServer
		}
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	conn.Close()
	return &adminClient{http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 16,
	}}}, nil
}

var errNoServer = errors.New("no tfmirror serves this data directory")

func (c *adminClient) close() { c.http.CloseIdleConnections() }

func (c *adminClient) call(ctx context.Context, path string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://tfmirror"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("running tfmirror: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("running tfmirror: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return proxy.DecodeAdminError(resp.StatusCode, data)
	}
	return json.Unmarshal(data, out)
}

func (c *adminClient) Versions(ctx context.Context, p discovery.Provider) ([]proxy.AdminVersion, error) {
	var out []proxy.AdminVersion
	return out, c.call(ctx, "/v1/versions", proxy.AdminRequest{Provider: p.String()}, &out)
}

func (c *adminClient) Package(ctx context.Context, p discovery.Provider, version string, platforms []string) ([]proxy.AdminArchive, error) {
	var out []proxy.AdminArchive
	return out, c.call(ctx, "/v1/package", proxy.AdminRequest{Provider: p.String(), Version: version, Platforms: platforms}, &out)
}

func (c *adminClient) Ensure(ctx context.Context, p discovery.Provider, version, platform string) (proxy.AdminEnsured, error) {
	var out proxy.AdminEnsured
	return out, c.call(ctx, "/v1/ensure", proxy.AdminRequest{Provider: p.String(), Version: version, Platform: platform}, &out)
}

func (c *adminClient) Export(ctx context.Context, req proxy.AdminExportRequest) (proxy.AdminExported, error) {
	var out proxy.AdminExported
	return out, c.call(ctx, "/v1/export", req, &out)
}

func (c *adminClient) Import(ctx context.Context, req proxy.AdminImportRequest) (proxy.AdminImported, error) {
	var out proxy.AdminImported
	return out, c.call(ctx, "/v1/import", req, &out)
}

package mirror

import (
	"context"
	"fmt"
	"io"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/mirror/records"
)

// offlineOrigin stands in for the origins of a sealed mirror (Config.Offline):
// every call fails with records.ErrOffline, so only cached data is served.
type offlineOrigin struct{}

func (offlineOrigin) Versions(_ context.Context, p addrs.Provider) ([]discovery.VersionInfo, error) {
	return nil, fmt.Errorf("%w: no cached version list of %s", records.ErrOffline, p)
}

func (offlineOrigin) Package(_ context.Context, p addrs.Provider, version string, pl addrs.Platform) (*discovery.Package, error) {
	return nil, fmt.Errorf("%w: %s %s for %s is not cached", records.ErrOffline, p, version, pl)
}

func (offlineOrigin) FetchDocument(_ context.Context, p addrs.Provider, _ string, _ int64) ([]byte, error) {
	return nil, fmt.Errorf("%w: checksums of %s are not cached", records.ErrOffline, p)
}

func (offlineOrigin) OpenArchive(_ context.Context, p addrs.Provider, _ string) (io.ReadCloser, int64, error) {
	return nil, 0, fmt.Errorf("%w: archive of %s is not cached", records.ErrOffline, p)
}

// localGuard stands between the engine and its origins: a local-only host
// (see Engine.local) is never contacted, whatever asks.
type localGuard struct {
	s    *Engine
	next ProviderOrigin
}

func (g localGuard) check(p addrs.Provider) error {
	if g.s.local(p.Hostname) {
		return fmt.Errorf("%w: %s is a local-only host of imported providers and is never contacted; %s was not imported",
			discovery.ErrNotFound, p.Hostname, p)
	}
	return nil
}

func (g localGuard) Versions(ctx context.Context, p addrs.Provider) ([]discovery.VersionInfo, error) {
	if err := g.check(p); err != nil {
		return nil, err
	}
	return g.next.Versions(ctx, p)
}

func (g localGuard) Package(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (*discovery.Package, error) {
	if err := g.check(p); err != nil {
		return nil, err
	}
	return g.next.Package(ctx, p, version, pl)
}

func (g localGuard) FetchDocument(ctx context.Context, p addrs.Provider, rawURL string, limit int64) ([]byte, error) {
	if err := g.check(p); err != nil {
		return nil, err
	}
	return g.next.FetchDocument(ctx, p, rawURL, limit)
}

func (g localGuard) OpenArchive(ctx context.Context, p addrs.Provider, rawURL string) (io.ReadCloser, int64, error) {
	if err := g.check(p); err != nil {
		return nil, 0, err
	}
	return g.next.OpenArchive(ctx, p, rawURL)
}

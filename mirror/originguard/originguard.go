// Package originguard stands between the engine and its origin
// registries: for a sealed mirror (mirror.Config.Offline), an origin
// that fails every call with records.ErrOffline, so that only cached data
// is served; and for every engine, a guard that never lets a local-only
// host (one whose providers were imported, and which is not an allowed
// origin) be contacted, whatever asks.
//
// It decides nothing else: the engine says which hosts are local-only.
package originguard

import (
	"context"
	"fmt"
	"io"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// Origin is the provider side of the engine's origins
// (mirror.ProviderOrigin). *discovery.Client implements it.
type Origin interface {
	Versions(ctx context.Context, p addrs.Provider) (discovery.VersionList, error)
	Package(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (*discovery.Package, error)
	FetchSums(ctx context.Context, p addrs.Provider, pkg *discovery.Package, sumsLimit, signatureLimit int64) (sums, signature []byte, err error)
	OpenArchive(ctx context.Context, p addrs.Provider, rawURL string) (io.ReadCloser, int64, error)
	ArchiveSize(ctx context.Context, p addrs.Provider, rawURL string) (int64, error)
}

// Offline returns the origin of a sealed mirror: every call fails with
// records.ErrOffline.
func Offline() Origin { return offlineOrigin{} }

type offlineOrigin struct{}

func (offlineOrigin) Versions(_ context.Context, p addrs.Provider) (discovery.VersionList, error) {
	return discovery.VersionList{}, fmt.Errorf("%w: no cached version list of %s", records.ErrOffline, p)
}

func (offlineOrigin) Package(_ context.Context, p addrs.Provider, version string, pl addrs.Platform) (*discovery.Package, error) {
	return nil, fmt.Errorf("%w: %s %s for %s is not cached", records.ErrOffline, p, version, pl)
}

func (offlineOrigin) FetchSums(_ context.Context, p addrs.Provider, _ *discovery.Package, _, _ int64) ([]byte, []byte, error) {
	return nil, nil, fmt.Errorf("%w: checksums of %s are not cached", records.ErrOffline, p)
}

func (offlineOrigin) OpenArchive(_ context.Context, p addrs.Provider, _ string) (io.ReadCloser, int64, error) {
	return nil, 0, fmt.Errorf("%w: archive of %s is not cached", records.ErrOffline, p)
}

func (offlineOrigin) ArchiveSize(_ context.Context, p addrs.Provider, _ string) (int64, error) {
	return 0, fmt.Errorf("%w: the size of an archive of %s is not known", records.ErrOffline, p)
}

// Local reports whether host is local-only: not an allowed origin, but a
// host Import has loaded providers of. It is the rule the guard Local
// returns keeps, asked once by each origin request it lets through, and
// by the engine wherever it serves such a host from the cache alone.
func (h *Hosts) Local(host svchost.Hostname) bool {
	if h.allowed[host] {
		return false
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.imported[host]
}

// Local returns next behind a guard: a provider of a host that hosts
// say is local-only (Hosts.Local) is never asked for, and is not found
// (discovery.ErrNotFound).
func Local(next Origin, hosts *Hosts) Origin {
	return localGuard{hosts: hosts, next: next}
}

type localGuard struct {
	hosts *Hosts
	next  Origin
}

func (g localGuard) check(p addrs.Provider) error {
	if g.hosts.Local(p.Hostname) {
		return fmt.Errorf("%w: %s is a local-only host of imported providers and is never contacted; %s was not imported",
			discovery.ErrNotFound, p.Hostname, p)
	}
	return nil
}

func (g localGuard) Versions(ctx context.Context, p addrs.Provider) (discovery.VersionList, error) {
	if err := g.check(p); err != nil {
		return discovery.VersionList{}, err
	}
	return g.next.Versions(ctx, p)
}

func (g localGuard) Package(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (*discovery.Package, error) {
	if err := g.check(p); err != nil {
		return nil, err
	}
	return g.next.Package(ctx, p, version, pl)
}

func (g localGuard) FetchSums(ctx context.Context, p addrs.Provider, pkg *discovery.Package, sumsLimit, signatureLimit int64) ([]byte, []byte, error) {
	if err := g.check(p); err != nil {
		return nil, nil, err
	}
	return g.next.FetchSums(ctx, p, pkg, sumsLimit, signatureLimit)
}

func (g localGuard) OpenArchive(ctx context.Context, p addrs.Provider, rawURL string) (io.ReadCloser, int64, error) {
	if err := g.check(p); err != nil {
		return nil, 0, err
	}
	return g.next.OpenArchive(ctx, p, rawURL)
}

func (g localGuard) ArchiveSize(ctx context.Context, p addrs.Provider, rawURL string) (int64, error) {
	if err := g.check(p); err != nil {
		return 0, err
	}
	return g.next.ArchiveSize(ctx, p, rawURL)
}

package mirror

import (
	"context"
	"fmt"
	"io"

	"github.com/tfmirror/tfmirror/discovery"
)

// offlineOrigin stands in for the origins of a sealed mirror (Config.Offline):
// every call fails with ErrOffline, so only cached data is served.
type offlineOrigin struct{}

func (offlineOrigin) Versions(_ context.Context, p discovery.Provider) ([]discovery.VersionInfo, error) {
	return nil, fmt.Errorf("%w: no cached version list of %s", ErrOffline, p)
}

func (offlineOrigin) Package(_ context.Context, p discovery.Provider, version string, pl discovery.Platform) (*discovery.Package, error) {
	return nil, fmt.Errorf("%w: %s %s for %s is not cached", ErrOffline, p, version, pl)
}

func (offlineOrigin) FetchDocument(_ context.Context, p discovery.Provider, _ string, _ int64) ([]byte, error) {
	return nil, fmt.Errorf("%w: checksums of %s are not cached", ErrOffline, p)
}

func (offlineOrigin) OpenArchive(_ context.Context, p discovery.Provider, _ string) (io.ReadCloser, int64, error) {
	return nil, 0, fmt.Errorf("%w: archive of %s is not cached", ErrOffline, p)
}

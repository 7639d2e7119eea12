package mirror

import (
	"context"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/discovery"
)

// The package's own tests call verifyCached by its former, exported name.
func (s *Engine) Verify(ctx context.Context, p discovery.Provider, v versions.Version, pl discovery.Platform) error {
	return s.verifyCached(ctx, p, v, pl)
}

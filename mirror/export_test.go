package mirror

import (
	"context"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// The package's own tests call verifyCached by its former, exported name.
func (s *Engine) Verify(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) error {
	return s.records.verifyCached(ctx, p, v, pl)
}

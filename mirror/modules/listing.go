package modules

import (
	"context"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// previousListing returns the versions of m's listing taken before the
// one being stored (those it lacked of the one before it too:
// records.ModuleVersionList.Named), and when it was taken: the newest of
// the stored lists (the cached one, or the shared tier's when it is
// newer); nil when m was never listed. It dates the versions the new
// listing adds (Engine.NoteListing).
func (s *Modules) previousListing(ctx context.Context, m addrs.Module) ([]string, time.Time) {
	v, at, have := s.recs.Newest(ctx, records.ModuleVersionsKey(m), new(records.ModuleVersionList))
	if !have {
		return nil, time.Time{}
	}
	return v.(*records.ModuleVersionList).Named(), at
}

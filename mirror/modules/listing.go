package modules

import (
	"context"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// previousListing returns the versions of m's listing taken before the
// one being stored (those it lacked of the one before it too:
// records.ModuleVersionList.Named), the dates it carries of them, and
// when it was taken: the newest of the stored lists (the cached one, or
// the shared tier's when it is newer); nil when m was never listed. It
// dates the versions the new listing adds (gate.Gate.NoteListing).
func (s *Modules) previousListing(ctx context.Context, m addrs.Module) ([]string, map[string]time.Time, time.Time) {
	v, at, have := s.recs.Newest(ctx, records.ModuleVersionsKey(m), new(records.ModuleVersionList))
	if !have {
		return nil, nil, time.Time{}
	}
	l := v.(*records.ModuleVersionList)
	return l.Named(), l.Dates, at
}

package modules

import (
	"context"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// previousListing returns the versions of m's listing taken before the
// one being stored, and when it was taken: the cached list, or the shared
// tier's when it is newer; nil when m was never listed. It dates the
// versions the new listing adds (Engine.NoteListing).
func (s *Modules) previousListing(ctx context.Context, m addrs.Module) ([]string, time.Time) {
	key := records.ModuleVersionsKey(m)
	var cached, shared records.ModuleVersionList
	at, err := s.store.GetMeta(key, &cached)
	have := err == nil && records.KnownSchema(cached.Schema)
	if have && !cached.ListedAt.IsZero() {
		at = cached.ListedAt
	}
	if s.shared.On() {
		if sat, ok := s.shared.Get(ctx, key, &shared); ok && records.KnownSchema(shared.Schema) {
			if !shared.ListedAt.IsZero() {
				sat = shared.ListedAt
			}
			if !have || sat.After(at) {
				cached, at, have = shared, sat, true
			}
		}
	}
	if !have {
		return nil, time.Time{}
	}
	if cached.Versions == nil {
		return []string{}, at
	}
	return cached.Versions, at
}

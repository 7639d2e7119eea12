package mirror

import (
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror/providerlists"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/sharedtier"
)

// Stamp tells whether an answer of Versions or Package is still the one
// the same call would give, so that a front door can keep what it made
// from the answer (a rendered document) and reuse it, asking only
// Engine.Reuse, which reads two counters and the clock. An answer holds
// while nothing the engine answers from has been written (metadata
// records, archives cached or evicted: any of them, for any provider) and
// its version list is fresh. Answers that needed the origin, or that were
// served stale because it failed, are never reused: the next call must
// ask again. The zero Stamp is never reusable.
type Stamp struct {
	gen   uint64    // the engine's generation when the call began
	until time.Time // by Config.Now, when the answer expires; zero: never (offline, without a shared tier)
	made  time.Time // Config.Now's wall clock reading when the answer was made (see Reuse)
	kind  stampKind
}

// IsZero reports whether st is the zero Stamp: the answer is never
// reusable, and there is no point keeping it for reuse.
func (st Stamp) IsZero() bool { return st.kind == stampNone }

type stampKind uint8

const (
	stampNone     stampKind = iota // not reusable
	stampVersions                  // a version list from the cache
	stampPackage                   // package metadata from the cache
)

// generation changes whenever something the engine answers from may have
// changed: every metadata write forgets its memo entry, which advances the
// memo's generation, and the store's StatGeneration follows archives
// committed and deleted (their h1: hashes). Both only grow, so their sum
// is unchanged only while both are. The policy's generation (advanced by
// every SetPolicy) is added, so that a new policy ends every answer kept.
func (s *providerRecords) generation() uint64 {
	return s.memo.Generation() + s.store.StatGeneration() + s.gate.Generation()
}

// stamp returns the stamp of an answer made from a version list in state
// st, the engine's generation having been gen when the call began.
func (s *providerRecords) stamp(gen uint64, st providerlists.State, kind stampKind) Stamp {
	if st.Stale || st.Fetched {
		return Stamp{}
	}
	// Without its monotonic reading, so that Reuse compares wall clocks.
	made := s.cfg.Now().Round(0)
	if s.cfg.Offline {
		if s.cfg.Shared != nil {
			// What the shared tier said (the later listing of the version
			// list, the archives it holds) is taken for SeenTTL: then it
			// is asked again, and the answer made anew.
			return Stamp{gen: gen, until: made.Add(sharedtier.SeenTTL), made: made, kind: kind}
		}
		return Stamp{gen: gen, made: made, kind: kind} // cached lists are served however old
	}
	return Stamp{gen: gen, until: st.StoredAt.Add(s.cfg.VersionsTTL), made: made, kind: kind}
}

// missingUntil returns until, or earlier when a platform of need that rec
// has no package for stops being believed missing before (see
// believedMissing), so that the origin is asked again then.
func (s *providerRecords) missingUntil(rec *records.PackageRecord, need []string, until time.Time) time.Time {
	if s.cfg.Offline {
		return until
	}
	for _, pl := range need {
		if _, ok := rec.Archives[pl]; ok {
			continue
		}
		if c, ok := rec.MissingChecked[pl]; ok {
			if end := c.At.Add(s.cfg.VersionsTTL); until.IsZero() || end.Before(until) {
				until = end
			}
		}
	}
	return until
}

// Reuse reports whether an answer stamped st is still the one the call
// that made it would give now. When it is, the cache lookups that call
// would have made are counted, as if it had been made again. An answer
// made while the clock read more than records.MaxClockSkew later than it
// does now (it was set forward, then back) is not: the call judges the
// records it answered from by the clock as it is (records.Fresh), where
// the answer's expiry would hold until the clock caught up with it.
func (s *Engine) Reuse(st Stamp) bool {
	if st.kind == stampNone || st.gen != s.records.generation() {
		return false
	}
	now := s.cfg.Now()
	if !st.until.IsZero() && !now.Before(st.until) || now.Round(0).Sub(st.made) <= -records.MaxClockSkew {
		return false
	}
	s.metrics.CacheLookup("versions", true)
	if st.kind == stampPackage {
		s.metrics.CacheLookup("package", true)
	}
	return true
}

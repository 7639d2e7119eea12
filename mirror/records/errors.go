package records

import (
	"fmt"

	"github.com/tfmirror/tfmirror/v2/mirror/failure"
)

// The engine's errors, kept in package mirror/failure (the engine keeps
// its errors; records keeps schemas and keys): these names are the same
// values, for the parts of the engine that read them here.
var (
	ErrVersionNotFound  = failure.ErrVersionNotFound
	ErrPlatformNotFound = failure.ErrPlatformNotFound
	ErrOffline          = failure.ErrOffline
	ErrShutDown         = failure.ErrShutDown
	ErrNotCached        = failure.ErrNotCached
	ErrNoEvidence       = failure.ErrNoEvidence
	ErrDigestUnknown    = failure.ErrDigestUnknown
)

// BadArchiveError is mirror/failure.BadArchiveError.
type BadArchiveError = failure.BadArchiveError

// Source says where the bytes of an opened archive come from.
type Source int

const (
	// Hit: the cache.
	Hit Source = iota
	// Miss: an origin download that this call started.
	Miss
	// Coalesced: an origin download already under way for another caller.
	Coalesced
	// Shared: a copy from the shared tier (Config.Shared) that this call
	// started.
	Shared
)

func (src Source) String() string {
	switch src {
	case Hit:
		return "hit"
	case Miss:
		return "miss"
	case Coalesced:
		return "coalesced"
	case Shared:
		return "shared"
	}
	return fmt.Sprintf("Source(%d)", int(src))
}

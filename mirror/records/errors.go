package records

import (
	"errors"
	"fmt"
)

// Errors of the engine itself. Origin errors come from package discovery
// (ErrNotFound, ErrNoProviderService, *OriginError, ErrCircuitOpen, and
// ErrHostNotAllowed, which the engine also returns for a host it does not
// serve), integrity errors from package verify (ErrIntegrity); callers map
// all of them to what they tell their own clients.
var (
	// ErrVersionNotFound: the origin does not list the requested version.
	ErrVersionNotFound = errors.New("version not found")
	// ErrPlatformNotFound: the version has no package for the requested
	// platform, or the platform is not served (Config.Platforms).
	ErrPlatformNotFound = errors.New("platform not available")
	// ErrOffline: the mirror runs sealed and does not hold what was asked for.
	ErrOffline = errors.New("mirror is offline (never contacts origins) and does not have this in its cache")
	// ErrShutDown: the engine is shutting down and starts no more origin work.
	ErrShutDown = errors.New("mirror is shutting down")
	// ErrNotCached: verifyCached was asked for a version, platform or archive the
	// cache does not hold.
	ErrNotCached = errors.New("not in the cache")
	// ErrNoEvidence: the version's package metadata was cached by an
	// earlier release, which kept none of the origin's signed evidence,
	// and it could not be fetched again (offline, for instance).
	ErrNoEvidence = errors.New("cached without the origin's signed evidence")
	// ErrDigestUnknown: a digest that names no manifest or blob of the OCI
	// repository asked (of a provider or a module): never handed out for
	// it, or its version no longer kept.
	ErrDigestUnknown = errors.New("digest unknown in this repository")
)

// BadArchiveError is a fault the engine found itself in an archive an
// origin sent: larger than Config.MaxArchiveBytes, or a body of another
// length than announced. Like a *discovery.OriginError it is the origin's
// fault, not the mirror's. (An archive whose sha256 differs from the
// signed checksum is a *verify.Error instead.)
type BadArchiveError struct {
	Filename string // the origin's file name
	Detail   string
}

func (e *BadArchiveError) Error() string {
	return fmt.Sprintf("origin sent a bad archive %s: %s", e.Filename, e.Detail)
}

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

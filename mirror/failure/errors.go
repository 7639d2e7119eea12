package failure

import (
	"errors"
	"fmt"
)

// Errors of the engine itself. The failures of origins and module source
// hosts are an *OriginError (FromOrigin), integrity errors come from
// package verify (ErrIntegrity), the package policy's refusals from
// mirror/gate (PolicyError); callers map all of them to what they tell
// their own clients.
var (
	// ErrVersionNotFound: the origin does not list the requested version.
	ErrVersionNotFound = errors.New("version not found")
	// ErrPlatformNotFound: the version has no package for the requested
	// platform, or the platform is not served (mirror.Config.Platforms).
	ErrPlatformNotFound = errors.New("platform not available")
	// ErrOffline: the mirror runs sealed and does not hold what was asked for.
	ErrOffline = errors.New("mirror is offline (never contacts origins) and does not have this in its cache")
	// ErrShutDown: the engine is shutting down and starts no more origin work.
	ErrShutDown = errors.New("mirror is shutting down")
	// ErrNotCached: the check of a cached version was asked for a version,
	// platform or archive the cache does not hold.
	ErrNotCached = errors.New("not in the cache")
	// ErrNoEvidence: the version's package metadata was cached by an
	// earlier release, which kept none of the origin's signed evidence,
	// and it could not be fetched again (offline, for instance).
	ErrNoEvidence = errors.New("cached without the origin's signed evidence")
	// ErrDigestUnknown: a digest that names no manifest or blob of the OCI
	// repository asked (of a provider or a module): never handed out for
	// it, or its version no longer kept.
	ErrDigestUnknown = errors.New("digest unknown in this repository")
	// ErrDigestGone: a digest of an OCI document handed out that names
	// nothing served any more, and never will: a platform's manifest made
	// with the size its origin stated for an archive that, verified, has
	// another (mirror/ocistore.WrongSizeError). Its version's documents
	// are made again; the tag names them.
	ErrDigestGone = errors.New("digest no longer served in this repository")
)

// BadArchiveError is a fault the engine found itself in an archive an
// origin sent: larger than its limit, or a body of another length than
// announced. Like an OriginError it is the origin's fault, not the
// mirror's. (An archive whose sha256 differs from the signed checksum is
// a *verify.Error instead.)
type BadArchiveError struct {
	Filename string // the origin's file name
	Detail   string
}

func (e *BadArchiveError) Error() string {
	return fmt.Sprintf("origin sent a bad archive %s: %s", e.Filename, e.Detail)
}

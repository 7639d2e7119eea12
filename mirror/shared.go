package mirror

// Archives and the tier shared with other replicas (Config.Shared): where
// a download reads from, and where a committed archive goes. The tier
// itself, and everything the engine reads from it, is package
// mirror/sharedtier.

import (
	"context"
	"io"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/sharedtier"
)

// SharedTier is the store replicas share behind their own caches
// (Config.Shared): sharedtier.Tier.
type SharedTier = sharedtier.Tier

// SharedLease is a lease on an archive's origin download: sharedtier.Lease.
type SharedLease = sharedtier.Lease

// openSource opens the archive's bytes for the fetch f: from the shared
// tier when it has the archive, else from the origin (under the tier's
// lease when there is a tier, so that of all replicas one downloads it
// while the others wait for it to appear in the tier; see
// sharedtier.Shared.Archive).
func (fr *fetcher) openSource(ctx context.Context, f *fetch, p addrs.Provider, a records.ArchiveRecord) (io.ReadCloser, int64, error) {
	s := fr
	body, size, release, err := s.shared.Archive(ctx, a.SHA256, a.Filename, fr.onWait)
	if err != nil {
		return nil, 0, err
	}
	if body != nil {
		f.fromShared = true
		return body, size, nil
	}
	f.lease = release
	f.originDone = s.metrics.ArchiveFetchStarted()
	return s.origin.OpenArchive(ctx, p, a.URL)
}

// share puts the archive of f, once committed to the cache, in the shared
// tier (unless it came from there), then gives up f's lease.
func (fr *fetcher) share(ctx context.Context, f *fetch, a records.ArchiveRecord) {
	if f.lease != nil {
		// After the upload: a waiting replica that sees the lease gone
		// must find the archive.
		defer f.lease(context.WithoutCancel(ctx))
	}
	if f.fromShared {
		return
	}
	fr.shared.ShareArchive(ctx, a.SHA256, a.Filename)
}

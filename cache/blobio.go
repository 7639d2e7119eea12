package cache

import "io"

// OpenBlob and NewBlobWriter return these interfaces, not their concrete
// types, so that a consumer's store interface (mirror.Store) names them in
// its method results and another implementation fits it too: the engine's
// tests wrap a Store in ones that return readers of their own. They are
// declared here, with the contract every implementation keeps (reads
// while writing, what Commit guarantees), because a declaration on the
// consumer's side could not be named in the results of Blobs' methods.

// BlobReader reads a committed archive; OpenBlob returns one. ReadAt is
// safe for concurrent use; Read and Seek share one position and are not.
// After the store is closed its reads fail with ErrClosed, those that
// would fall in a chunk it holds in memory too; a read under way as the
// store closes may return the rest of the chunk it is copying (bytes
// checked as they were read), and never reads the database after. Its
// reads fail after its own Close.
type BlobReader interface {
	io.ReaderAt
	io.ReadSeekCloser // Close releases the archive's protection from eviction
	// Size is the archive's length in bytes.
	Size() int64
	// Info describes the archive.
	Info() BlobInfo
}

// BlobWriter stages an archive as it arrives and then commits it;
// NewBlobWriter returns one. One goroutine calls Write, Sum and Commit;
// any number may call Follow, Written and Err, and read the bytes already
// written through their Followers, until Close. Close must always be
// called: it releases the writer's memory, aborts it if it was not
// committed, and ends it for Shutdown.
type BlobWriter interface {
	// Write appends p. A failure to store it does not fail Write (readers
	// still get every byte); Err reports it and Commit then fails.
	io.Writer
	// Follow returns a reader of the bytes written, for one client.
	Follow() Follower
	// Written is how many bytes have been written.
	Written() int64
	// Sum is the hex sha256 of everything written so far.
	Sum() string
	// Err reports the first failure to store what was written, if any.
	Err() error
	// Commit makes the archive visible under its sha256, recording h1.
	// It fails with ErrDigestMismatch (and aborts the writer) when the
	// bytes do not have the expected sha256, and with another error when
	// they could not be stored (readers still get every byte until
	// Close). Any number of writers may commit one sha256 concurrently:
	// one record is kept, and every Commit succeeds with its BlobInfo.
	Commit(h1 string) (BlobInfo, error)
	// Abort discards what was staged; readers get errors from then on.
	Abort() error
	io.Closer
}

// Follower reads an archive as its BlobWriter writes it, for one client
// (BlobWriter.Follow): ReadAt reads bytes already written, for
// off+len(p) <= Written(), and keeps the stored chunk it read last, so
// that small sequential reads read and check each chunk once, as a
// BlobReader's do. ReadAt is safe for concurrent use. Close releases that
// chunk; reads fail once the writer is aborted or closed, or the
// follower is.
type Follower interface {
	io.ReaderAt
	io.Closer
}

var (
	_ BlobReader = (*blob)(nil)
	_ BlobWriter = (*blobWriter)(nil)
	_ Follower   = (*follower)(nil)
)

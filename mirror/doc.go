// Package mirror is tfmirror's pull-through engine: it answers for
// provider versions and archives from the cache and fills the cache from
// origin registries on demand, without knowing how its callers talk to
// their clients. Its API takes a context and returns data or typed
// errors; front doors (package proxy's HTTP routes, subcommands) decide
// what to tell their clients.
//
// It owns the stored records and their keys (VersionList, PackageRecord,
// ArchiveRecord, each with a schema version), the in-memory memo of
// decoded records, the archive fetcher and its fan-out to many readers,
// offline mode, and the errors of the mirror itself (ErrVersionNotFound,
// ErrPlatformNotFound, ErrOffline, ErrShutDown,
// ErrNotCached, ErrNoEvidence):
//
//   - version lists are cached for Config.VersionsTTL and served stale when
//     a refresh fails; only an origin's explicit 404 is believed;
//   - a version's package metadata is verified against the origin's signed
//     SHA256SUMS before it is stored, with that evidence (the documents,
//     signatures and signing keys byte for byte, see Evidence), and never
//     changes afterwards; VerifyCache checks every cached package against
//     it (or its sha256) again;
//   - a signature vouches for the names it signed (signednames.go): an
//     archive's name is derived from the provider type, version and
//     platform and looked up in a SHA256SUMS that must be that release's,
//     never read from an origin's answer or an import's evidence, on every
//     way in and every re-check of a stored record;
//   - an archive is fetched from its origin once however many callers ask,
//     on the engine's context (no single caller can cancel it), read by
//     every waiting caller while it is staged in the cache, and committed
//     only when its sha256 matched; the final bytes are withheld from
//     readers until then;
//   - answers of Versions and Package made from the cache carry a Stamp,
//     with which front doors reuse what they made of an answer while
//     Engine.Reuse says it holds (nothing written since, list fresh);
//   - with Config.Offline the mirror is sealed: no origin is ever
//     contacted, cached version lists are served however old (listing only
//     versions with a cached archive of a served platform), and anything
//     not cached fails with ErrOffline;
//   - with Config.Shared (a SharedTier, the bucket that replicas share) a
//     cache miss looks there before the origin: archives stream from it
//     through the same staging and sha256 check as origin downloads,
//     package records are copied from it into the cache, version lists are
//     taken with their age there; what the engine verified is put there
//     after its local commit; of all replicas one downloads an archive
//     from the origin under the tier's lease while the others wait for it
//     to appear (taking over when the lease expires). A failing tier is
//     gone around, never a reason to fail a call;
//   - Import loads a version from outside (an export, in-house builds),
//     verified by the same checks and committed by the same archive
//     fetcher as an origin download; Stored and OpenStored read the cache
//     for an export. A host of imported providers that is not an allowed
//     origin is local-only: served from the cache, never contacted;
//   - registry modules (modules.go) go through the same cache, blob store,
//     detached work and shared tier: a module version's record (the
//     origin's download location, the resolved Git commit, the sha256 of
//     its normalized package) is written once and kept, its package is
//     fetched from the source host once however many callers ask (package
//     discovery/modsource fetches and normalizes it) and a refetch after
//     eviction that gives other bytes is refused (ErrModuleChanged).
//
// Work done for many callers runs on a context the engine creates in New;
// Shutdown lets it finish (or cancels it at a deadline) and waits for it,
// so that the cache can be closed after it.
//
// It does not speak HTTP to clients (package proxy does), speak to origins
// itself (package discovery does), store anything itself (package cache
// does), or implement the cryptographic checks (package verify does).
package mirror

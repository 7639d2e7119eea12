// Package mirror is tfmirror's pull-through engine: it answers for
// provider versions, their archives and registry modules from the cache,
// and fills the cache on demand from origin registries, the shared store
// or an import. Each immutable thing is fetched once however many callers
// ask, on the engine's own context, and committed only when every check
// passed; what it verified never changes afterwards. It owns the stored
// records and their keys, and the mirror's own errors (records.ErrVersionNotFound,
// records.ErrOffline, ...).
//
// Its API takes a context and returns data or typed errors. It does not
// speak HTTP (package proxy does), speak to origins (package discovery
// does), store bytes (package cache does), implement the cryptographic
// checks (package verify does), or decide what the cache keeps (package
// retention does, through Inventory's listings, removals and a Notifier).
//
// Engine composes its parts, each a package below it, and hands them out
// for its callers. The parts take what they share as fields, in layers
// below the engine (internal/layercheck/layers.txt): the core, the
// engine's lifetime (mirror/lifetime), the stored records read through
// its memo (mirror/stored), the hosts (mirror/originguard); the
// decorators, the tier shared with other replicas (mirror/sharedtier),
// which the engine composes over its stored records when one is
// configured, so that the parts read and write records through one
// mirror/stored.Source and never name the tier, and the package
// policy's gate (mirror/gate), handed the version list that dates a
// version; the use cases, among them the providers' version
// lists (mirror/providerlists), which the engine's provider records and
// the OCI documents both take. Between the decorators and the use cases,
// the fetcher (mirror/fetch: each archive fetched once, staged, verified
// before its last bytes, committed), which the engine and an import take
// as a field; Archive and Blob are its types. No part asks the engine
// above it for anything: the OCI documents (mirror/ocistore) are handed
// a version's verified archives by the engine's OCI side, which asks the
// package API first. The parts it hands out: the module side (Modules, mirror/modules, whose Zips
// are its versions as OCI artifacts), exports and imports (AirGap,
// verified by mirror/imports), the check of the whole
// cache (CacheChecker, mirror/cachecheck) and what retention reads and
// removes (Inventory, on mirror/inventory); it asks the package policy's gate
// (mirror/gate: SetPolicy, the release times) and the withholding of
// unsigned imports (mirror/unsigned) on every answer, and reaches its
// origins through mirror/originguard, beneath which the origins'
// not-found answers are remembered for a while (mirror/notfound,
// Config.NotFoundTTL). NewOCI gives its provider versions
// as OCI artifacts (OCI, on mirror/ocistore, over Package's answers).
// How it works: docs/how-it-works.md.
package mirror

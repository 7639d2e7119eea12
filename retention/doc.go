// Package retention decides which cached packages tfmirror keeps. It sits
// above the pull-through engine (package mirror), as a use case of it:
//
//   - what the cache's size limit may evict (Retainer.Evictable, which it
//     gives the cache): never an archive that cannot be fetched again
//     (of a version imported, of a local-only host, anything on a sealed
//     mirror, and a package an import added to a version fetched from
//     its origin, which has no download URL: decided per archive,
//     mirrorheld.Record.Refetchable) and never one of a pinned version;
//   - what the rules remove (keep the newest N versions, remove what was
//     not downloaded for D), from the cache and, under a lease, from the
//     shared store's bucket: only archives that can be fetched again, of
//     versions that are not pinned; an archive goes only when no kept
//     version needs it;
//   - Prune naming versions, which alone removes what cannot be fetched
//     again (the version then leaves its version list, whole);
//   - the archives no record names (a prune stopped half way, a failed
//     import), removed in the background once found so for an hour, but
//     for those an import under way protects;
//   - the last use of versions, written in batches (never on every
//     download) to the cache and to the shared store.
//
// Providers, modules and CLI release versions (Config.CLI: a version is
// its verified SHA256SUMS, its packages the archives it lists, counted
// per publisher and product) are kept by the same rules and pins.
//
// It reads the engine's records through the engine's listings
// (mirror.Inventory.ScanVersions, and releases.Inventory.ScanVersions for
// CLI versions), is told what the engine and the releases side serve and
// import (mirrorheld.Notifier), and removes versions through them. It does not
// fetch, verify or serve anything, nor choose what the size limit evicts
// first (package cache does).
package retention

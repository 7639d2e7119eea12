// Package proxy serves the provider network mirror protocol and fills it
// from origin registries on demand.
//
// It owns the HTTP routes (HOST/NAMESPACE/TYPE/index.json, VERSION.json and
// the archives those documents link to), the validation of every request
// path part, the translation from the provider registry protocol to the
// mirror protocol, the one function (statusOf) that turns errors into HTTP
// status codes, and the pull-through orchestration:
//
//   - version lists are cached for Config.VersionsTTL and served stale when
//     a refresh fails; only an origin's explicit 404 becomes a 404;
//   - a version's package metadata is verified against the origin's signed
//     SHA256SUMS before it is stored, and never changes afterwards;
//   - an archive is fetched from its origin once however many clients ask,
//     on a context no single client can cancel, streamed to every waiting
//     client while it is staged in the cache, and committed only when its
//     sha256 matched; the final bytes are withheld from clients until then.
//   - with Config.Offline the mirror is sealed: no origin is ever contacted,
//     cached version lists are served however old, and anything not cached
//     fails with ErrOffline (503).
//
// It does not speak to origins itself (package discovery does), store
// anything itself (package cache does), or implement the cryptographic
// checks (package verify does).
package proxy

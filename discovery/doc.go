// Package discovery is tfmirror's client of origin provider registries.
//
// It owns everything tfmirror does when it talks to an origin:
//
//   - remote service discovery (GET https://HOST/.well-known/terraform.json,
//     service "providers.v1"), fetched like every registry request (same
//     timeout, retries and circuit breaker) and parsed by
//     github.com/hashicorp/terraform-svchost/disco, with a TTL, coalescing of
//     concurrent lookups of one host, and a stale result when a refresh fails;
//   - the provider registry protocol (the versions list of a provider and the
//     package metadata of one version and platform), whose JSON documents are
//     declared once, in the subpackage registryjson, for every party that
//     speaks the protocol;
//   - downloading SHA256SUMS, signatures and provider archives, with size
//     limits, a stall timeout and a low-speed limit;
//   - the HTTP transport all of this goes through, which enforces tfmirror's
//     network policy: https only (redirects too, at most 5), no connections to
//     loopback, private, link-local and other non-public addresses (checked on
//     the resolved address at dial time), bounded dial, TLS and header waits,
//     and bearer tokens sent only to the origin host they belong to;
//   - resilience: bounded retries with exponential backoff, jitter and a
//     capped Retry-After for idempotent requests (archives only before their
//     body), and a per-origin circuit breaker that fails fast with
//     ErrCircuitOpen while an origin keeps failing;
//   - reading origin credentials the way Terraform does (LoadCredentials:
//     CLI-config credentials blocks and TF_TOKEN_<host> variables);
//   - the module registry protocol (modules.v1: a module's versions and a
//     version's download location, modules.go), and the transport to the
//     source hosts that locations name (OpenSource, SourceHTTPClient), under
//     the same network policy and limits as archive downloads but always
//     anonymous. Subpackage modsource fetches and normalizes the packages.
//
// It also owns the provider address (Provider) and its one parser
// (ParseProvider, NewProvider), with the clients' rules, for every package
// that reads an address: request paths, sync's inputs, export and import.
//
// It enforces which origin hosts may be used (Config.AllowedOrigins, refused
// with ErrHostNotAllowed before any lookup or connection) but does not choose
// them (the operator does, through cmd/tfmirror). It does not verify hashes
// or signatures (package verify does), and caches nothing
// except service discovery results for their TTL. Its errors know nothing of
// the HTTP status codes tfmirror answers with: ErrNotFound, ErrNoProviderService
// and *OriginError are mapped to statuses by package proxy.
package discovery

// Package discovery is tfmirror's client of origin provider registries.
//
// It owns everything tfmirror does when it talks to an origin:
//
//   - remote service discovery (GET https://HOST/.well-known/terraform.json,
//     service "providers.v1") through github.com/hashicorp/terraform-svchost/disco,
//     with a TTL, coalescing of concurrent lookups of one host, and a stale
//     result when a refresh fails;
//   - the provider registry protocol (the versions list of a provider and the
//     package metadata of one version and platform);
//   - downloading SHA256SUMS, signatures and provider archives, with size
//     limits and a stall timeout;
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
//     CLI-config credentials blocks and TF_TOKEN_<host> variables).
//
// It does not decide which origin hosts may be used (package mirror does), does
// not verify hashes or signatures (package verify does), and caches nothing
// except service discovery results for their TTL. Its errors know nothing of
// the HTTP status codes tfmirror answers with: ErrNotFound, ErrNoProviderService
// and *OriginError are mapped to statuses by package proxy.
package discovery

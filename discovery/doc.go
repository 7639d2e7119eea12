// Package discovery is tfmirror's client of origin registries: every
// request tfmirror makes to an origin, and to the source hosts that module
// download locations name, goes through a Client.
//
// It owns remote service discovery (providers.v1 and modules.v1), the
// provider and module registry protocols (their documents are declared in
// the subpackage registryjson), the downloads of SHA256SUMS, signatures,
// archives and module sources with their size limits, stall timeout and
// low-speed limit, reading origin credentials as Terraform does
// (LoadCredentials), and the transport all of it goes through: the network
// policy (https only, no non-public addresses, bounded waits, tokens sent
// only to their own host), TLS checked against Config.RootCAs, with a
// certificate it does not trust reported as a CertificateError (never
// retried, not an outage for the breaker, logged once per host), bounded
// retries and a circuit breaker per origin. The addresses it is given are package addrs' (Provider, Module,
// Platform): it parses none.
//
// It enforces which origin hosts may be used (Config.AllowedOrigins,
// refused with ErrHostNotAllowed before any lookup or connection) but does
// not choose them (the operator does). It does not verify hashes or
// signatures (package verify does), nor fetch module packages (the
// subpackage modsource does, through this client's transport), and it
// caches nothing but service discovery results for their TTL. Its errors know nothing of HTTP status codes: they are
// mapped to statuses in proxy/httperr.
package discovery

// Package proxy is tfmirror's HTTP front door: it serves the provider
// network mirror protocol, and the provider and module registry
// protocols, from the pull-through engine (package mirror).
//
// It owns the routes and the validation of every request path part, the
// rendering of the engine's records as the protocols' JSON (and the
// rendered answers kept for warm requests, hot.go), client authentication
// and signed URLs (auth.go), the limit of failed authentication attempts
// per client address (authlimit.go), the client address itself (the peer,
// or the client a trusted proxy names: clientaddr.go), caching headers,
// the status page and request instrumentation.
//
// It is not the engine: it reaches it through the Engine interface and
// never fetches, verifies or stores anything itself; what is cached,
// refreshed or served stale is the engine's business. Nor does it choose
// status codes: errors, the engine's included, become statuses in
// proxy/httperr, the one mapping it shares with the admin API.
package proxy

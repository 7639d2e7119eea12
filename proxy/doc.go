// Package proxy is tfmirror's HTTP front door: it serves the provider
// network mirror protocol from the pull-through engine (package mirror).
//
// It owns the HTTP routes (HOST/NAMESPACE/TYPE/index.json, VERSION.json and
// the archives those documents link to), the validation of every request
// path part, the rendering of the engine's records as the mirror
// protocol's JSON (remembered per provider and version, and sent again by
// request path, before any routing, while the engine's Stamp of the
// answer holds: see hot.go), client
// authentication and signed archive URLs, caching headers, the status
// page and request instrumentation. Errors, the engine's included, become
// HTTP status codes in proxy/httperr, the one mapping this front door
// shares with the admin API (package admin).
//
// It calls the engine through the small Engine interface and never fetches,
// verifies or stores anything itself: what is cached, when a version list
// is refreshed or served stale, how an archive download is shared and
// verified, and offline mode are the engine's business.
package proxy

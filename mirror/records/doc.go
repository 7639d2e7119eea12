// Package records holds what the engine's parts share beneath them: the
// records the engine stores and their keys (the cache's format on disk,
// and the shared store's), and the checks of a record's signed evidence
// that need nothing but the record (signednames.go, pkghashes.go). The
// engine's errors are package mirror/failure's; the names records gives
// them are aliases, kept for the parts that still use them.
//
// It reads and writes nothing: package mirror and its parts
// (mirror/modules, ...) store and fetch, this package says what the
// stored bytes mean. A change of a record's JSON is a change of the
// cache's format (see Schema).
package records

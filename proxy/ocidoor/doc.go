// Package ocidoor is the OCI distribution front door: the read-only pull
// side of the OCI distribution API under /v2/, serving every provider the
// mirror can fetch as OpenTofu's oci_mirror installation method reads it
// (a tag per version, an image index per version, an image manifest and
// the origin's zip per platform), over the same engine, cache and policy
// as the other front doors.
//
// It owns the wire: routes, the OCI error envelope (NAME_UNKNOWN,
// MANIFEST_UNKNOWN, BLOB_UNKNOWN, UNSUPPORTED, UNAUTHORIZED, ...), tag
// paging, the Bearer challenge and the token endpoint. It does not build
// documents (package oci does), fetch, verify or store anything (the
// engine's OCI side, mirror.OCI, does), and accepts no push or delete.
package ocidoor

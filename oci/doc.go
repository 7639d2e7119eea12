// Package oci holds what tfmirror's providers and modules look like as OCI
// artifacts, as OpenTofu's oci_mirror installation method and oci://
// module sources read them: the media and artifact types, the mapping
// between provider and module addresses and OCI repository names
// (Names), between versions and tags (Tag, ParseTag), and the builders of
// the canonical JSON documents (ProviderIndex, ProviderTargetManifest,
// ModuleManifest), whose bytes, and so whose digests, are a pure function
// of their inputs: every replica and every restart answers the same
// digest for the same content.
//
// It is pure: no I/O, no state. It does not fetch, store or serve
// anything (the engine and the OCI front door do), and it does not decide
// which providers or modules exist or are allowed.
package oci

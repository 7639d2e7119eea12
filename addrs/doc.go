// Package addrs holds tfmirror's nouns: provider and module addresses
// (Provider, Module), target platforms (Platform), versions and the file
// names of provider packages, each with its one parser (ParseProvider,
// NewProvider, ParseModule, NewModule, CheckModulePart, ParsePlatform, ParseSemver,
// ParseModuleVersion, ParseConstraint, ParseArchiveName, and ArchiveName
// its inverse), which applies the clients' rules (Terraform's and
// OpenTofu's), so that every layer reads a name as they do and one thing
// has one normal form.
//
// It is pure: no I/O, no state, and it imports nothing of tfmirror, so
// that every package may import it. It does not ask whether a provider,
// module or version exists (the origin client, package discovery, does),
// does not decide which hosts may be used (the operator does, enforced by
// discovery and the engine), and does not read request paths: the front
// doors take each path part only in the form the clients send and then
// parse it here.
package addrs

// Package releases is the pull-through side of the Terraform and OpenTofu
// command-line releases: HashiCorp's releases layout (a product's version
// list, a version's SHA256SUMS, its signature and archives) and OpenTofu's
// GitHub release files with the version list its installers read.
//
// It owns what is learnt from the two publishers and how it is trusted:
// a version's SHA256SUMS is kept, and served, only once its signature
// verified with the publisher's key (the keys shipped in keys/, or the
// operator's); an archive is served only through the engine's fetcher
// (mirror.Engine.OpenBlob), which fetches it once, stages it, and releases
// its last bytes only once its sha256 matched that signed SHA256SUMS and
// it is a zip holding the program. Version lists are refreshed after a
// time to live and served stale when the origin fails; offline, only what
// the cache holds is listed. A version a list the origin answered does not
// have is not asked of the origin (lists.go: checkListed), and an optional
// file of a listed version that the origin answered 404 (OpenTofu's cosign
// files) is not asked again for the list's time to live (files.go). It
// keeps what the package policy judges by
// (listing.go: the address of a product, the listing rule's times; the
// signature times in Sums).
//
// It does not apply the package policy (mirror/served.Releases, the layer
// every way in reaches it through, does), speak HTTP to clients (package
// proxy/releasesdoor does) nor decide how long archives are kept
// (retention).
package releases

// Package sharedstore is the optional shared tier of tfmirror replicas: an
// S3-compatible bucket (AWS S3, MinIO, Ceph RGW, versitygw, ...) that
// replicas share, behind each replica's own local cache.
//
// It owns the object layout under the configured prefix:
//
//	PREFIX/archive-auth/<sha256>  the archive's header: its name, sha256
//	                          and size, and their MAC (see below); written
//	                          before the archive
//	PREFIX/archives/<sha256>  a verified provider archive, content-addressed;
//	                          written once, by a single conditional PUT
//	                          (If-None-Match: *) of the committed local copy
//	                          with its x-amz-checksum-sha256, so that the
//	                          store itself refuses bytes that do not match
//	                          and nothing partial is ever visible
//	PREFIX/meta/<key>         a verified record (version list, package
//	                          record with the origin's evidence), JSON with
//	                          the time it was stored and their MAC
//	PREFIX/leases/<sha256>    who is downloading that archive from the
//	                          origin: JSON {holder, expires, ttl_ms},
//	                          created with If-None-Match: *, renewed with
//	                          If-Match on its ETag, released or taken over
//	                          once expired with a DELETE If-Match on the
//	                          ETag read
//	PREFIX/probes/<random>    a short-lived object of ProbeConditional's
//
// A lease expires ttl_ms after its LastModified, judged at the Date of the
// store's answer: by the store's clock alone, so that replicas whose
// clocks disagree (by minutes, even) still download an archive once. Only
// a store that dates neither its objects nor its answers has the holder's
// expires judged by the reader's clock.
//
// Leases rely on the store honouring conditional writes. ProbeConditional
// checks that it does (at start-up, or at the first lease); a store that
// does not is reported (Health, the Observer) and not trusted: TryLease
// then hands every replica a lease of its own without asking the store,
// so replicas download for themselves, as without a shared store, and
// still share what they downloaded.
//
// The bucket is a trust boundary (auth.go). Every object the store
// writes is bound by HMAC-SHA256, under the operator's key (Keys, the same
// on every replica), to the store's ID (Config.StoreID, by default
// s3://BUCKET/PREFIX), its kind, its name below the prefix and its content
// (a record with its time of storing; an archive through its header, its
// sha256 and size), and carries the format of its MAC; every object it
// reads is checked against that before anything of it is handed out, and
// an archive's bytes against its header as they stream. An object that
// fails (written without the key, changed, moved from another name or
// another store, or written by a release that did not authenticate or
// whose MAC did not bind the store) is as good as absent: counted
// (Observer), logged once, and the callers take it from the origin and
// write it back. Whoever can write the bucket without the key can delete,
// hide, or replay under the same name of the same store what the replicas
// wrote (a record within minutes of its writing only: the store's
// Last-Modified gives an older one away, unless the bucket keeps older
// versions and the writer may delete the newer ones); never make them take
// other bytes, records or times.
//
// Every call is bounded by Config.CallTimeout (archive bodies by the
// caller's context, and each of their reads by the call timeout: a body
// gone silent fails as the store's failure, not the bytes'), and a
// circuit breaker stops calling a store that keeps failing, silent
// bodies counted: calls then fail at once with ErrUnavailable until the
// cooldown has passed, and the callers go on without the shared tier.
//
// It is not a cache of its own and checks no signatures, only that what
// it reads is what a holder of the key wrote under that name: what is
// written here was verified by the engine (package mirror), which decides
// what to share and when. Credentials come from aws-sdk-go-v2's standard
// sources (environment, shared files, SSO, web identity, instance roles).
package sharedstore

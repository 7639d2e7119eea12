package ocistore

// Digests another replica handed out: their entries are in the tier
// shared with other replicas (see ociDigestEntry), and a replica that
// lacks one looks it up there, once per request for a digest it does not
// know, and builds the document again, from the version's verified
// archives its caller hands down (Adopt), before it serves it.

import (
	"context"
	"fmt"
	"slices"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// maxEntryPlatforms bounds the platforms a shared entry may name.
const maxEntryPlatforms = 256

// Unadopted is a digest of p's repository this replica does not know
// and the tier shared with other replicas has an entry for: its caller
// hands Adopt the verified archives of Version (as the engine's package
// API answers them: from its cache, the shared tier with its evidence
// checked, or the origin), then asks again. It is ErrDigestUnknown to
// whoever does not adopt it.
type Unadopted struct {
	Provider addrs.Provider
	Version  versions.Version
	Digest   digest.Digest
	entry    ociDigestEntry
	unknown  error
}

func (u *Unadopted) Error() string {
	return u.unknown.Error() + " (its entry in the shared store is not adopted)"
}

func (u *Unadopted) Unwrap() error { return u.unknown }

// sharedEntry is the entry of digest d of p's repository found in the
// shared tier only: unknown when it is not readable, else an *Unadopted.
func (o *OCI) sharedEntry(p addrs.Provider, d digest.Digest, entry ociDigestEntry, unknown error) (versions.Version, ociDigestEntry, error) {
	key := ociDigestKey(p, d)
	v, err := addrs.ParseSemver(entry.Version)
	if err != nil || len(entry.Platforms) > maxEntryPlatforms || (entry.Platform == "") == (len(entry.Platforms) == 0) {
		o.cfg.Logger.Warn("an OCI digest entry in the shared store is not readable; ignored", "key", key)
		return versions.Version{}, entry, unknown
	}
	return versions.Version{}, entry, &Unadopted{Provider: p, Version: v, Digest: d, entry: entry, unknown: unknown}
}

// Adopt builds the document u's entry names again from ans, the verified
// archives of its version: an entry whose document does not have the
// digest, or whose version has no such archive, is unknown. What
// resolves is kept as if this replica had handed it out, so that the
// caller's next ask finds it.
func (o *OCI) Adopt(ctx context.Context, u *Unadopted, ans Answer) error {
	p, v, d, entry, unknown := u.Provider, u.Version, u.Digest, u.entry, u.unknown
	archives := ans.Archives
	byPlatform := make(map[string]Archive, len(archives))
	for _, a := range archives {
		byPlatform[a.Platform] = a
	}
	if entry.Platform != "" {
		// An archive: the version's record must name it for the platform.
		a, ok := byPlatform[entry.Platform]
		if !ok || a.SHA256 != d.Encoded() {
			return o.mismatch(p, v, d, unknown)
		}
		b := built{blobs: map[digest.Digest]string{d: entry.Platform}}
		keys := keysOf(p, v)
		if err := o.keep(keys, p, v, o.recordAt(keys.record), b, nil, d); err != nil {
			return err
		}
		return nil
	}
	subset := make([]Archive, 0, len(entry.Platforms))
	for i, pl := range entry.Platforms {
		a, ok := byPlatform[pl]
		if !ok || (i > 0 && !(entry.Platforms[i-1] < pl)) {
			return o.mismatch(p, v, d, unknown)
		}
		subset = append(subset, a)
	}
	keys := keysOf(p, v)
	rec := o.recordAt(keys.record)
	if o.borneOut(p, v, rec, subset) {
		rec = o.recordAt(keys.record)
	}
	b, err := o.build(ctx, p, v, rec, subset)
	if err != nil {
		return err
	}
	var docs []oci.Document
	switch i := slices.IndexFunc(b.docs, func(doc oci.Document) bool { return doc.Digest == d }); {
	case i < 0:
		return o.mismatch(p, v, d, unknown)
	case b.index.Digest == d:
		docs = b.docs // the index, and every manifest it names
	default:
		docs = b.docs[i : i+1]
		for bd, pl := range b.blobs {
			if pl != b.platforms[d][0] {
				delete(b.blobs, bd)
			}
		}
	}
	if err := o.keep(keys, p, v, rec, b, docs, d); err != nil {
		return err
	}
	return nil
}

// mismatch logs a shared entry that the version's package record does
// not bear out, and returns unknown.
func (o *OCI) mismatch(p addrs.Provider, v versions.Version, d digest.Digest, unknown error) error {
	o.cfg.Logger.Warn("an OCI digest entry in the shared store names nothing this replica builds from the version's record; ignored",
		"provider", p.String(), "version", v.String(), "digest", d.String())
	return fmt.Errorf("%w (the shared store's entry is not borne out)", unknown)
}

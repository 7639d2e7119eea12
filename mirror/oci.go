package mirror

// Provider versions as OCI artifacts: package mirror/ocistore keeps the
// documents, built over a version's verified archives that OCI asks of
// the engine's package API and hands down (ocistore.Answer); OCI keeps
// the index last built of each version hot while that answer holds,
// holds a platform's manifest until its archive is verified (bearOut),
// and adds the opening of its blobs as the engine's archives.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/memo"
	"github.com/tfmirror/tfmirror/v2/mirror/notfound"
	"github.com/tfmirror/tfmirror/v2/mirror/ocistore"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// OCI is the engine's OCI side: the documents of package mirror/ocistore,
// built over the verified archives of the engine's package API, and
// their blobs opened as the engine's archives (Blob). It speaks no HTTP:
// the OCI front door does.
type OCI struct {
	docs *ocistore.OCI
	api  packageAPI
	hot  *memo.Memo[versionKey, hotIndex] // the index last built of a version, while its package answer holds
	wait time.Duration                    // how long a platform's manifest waits for its archive (Config.OCIArchiveWait)
}

// versionKey names a version in memory (no string to build per request).
type versionKey struct {
	p addrs.Provider
	v versions.Version
}

// hotIndex is an index built, with what says whether the package answer
// it was built from still holds (ocistore.Answer's Holds): not once the
// version's package record is written or removed, or the policy changed.
type hotIndex struct {
	doc   oci.Document
	holds func() bool
}

// hotIndexes bounds the indexes kept hot.
const hotIndexes = 4096

// packageAPI is what the OCI side uses of the engine's package API, on
// which its documents are built: a version's verified package and whether
// the answer still holds, an archive opened as OpenArchive opens it, or
// fetched and verified without a client to stream it to (EnsureArchive),
// and the size of an archive cached. *Engine implements it.
type packageAPI interface {
	Package(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*Package, error)
	Reuse(st Stamp) bool
	OpenArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (*Archive, error)
	EnsureArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (records.Source, error)
	CachedSize(sha string) (int64, bool)
}

// NewOCI returns an OCI side of the engine. It learns the archive sizes
// the origin does not state from the engine's origin, behind the same
// guards as every other origin request (a sealed mirror asks nothing, a
// local-only host is never contacted).
func (s *Engine) NewOCI() (*OCI, error) {
	o, err := ocistore.New(ocistore.Config{OriginTimeout: s.cfg.OriginTimeout, Logger: s.log}, ocistore.Parts{Life: s.life, Source: s.source, Hosts: s.hosts, Records: s.memo, Lists: s.records.lists}, s.store, ociSizer{s.origin, s.notFound, s.log}, s.metrics)
	if err != nil {
		return nil, err
	}
	s.oci.Add(o)
	return &OCI{docs: o, api: s, hot: memo.New[versionKey, hotIndex](hotIndexes), wait: s.cfg.OCIArchiveWait}, nil
}

// Blob opens the archive of p's repository whose sha256 digest is d (an
// archive of a version whose index was handed out), as OpenArchive does:
// cached, or downloaded once however many callers, verified before its
// last bytes; a.Size, when known, is the length its bytes have. A cached
// archive whose size is not the index's has its version's documents
// dropped, to be made again
// (ocistore.OCI.Verified); for one being downloaded, the next answer
// after its commit bears the sizes out (ocistore.OCI.Generation). Errors: ocistore.ErrDigestUnknown, and those of
// OpenArchive.
func (o *OCI) Blob(ctx context.Context, p addrs.Provider, d digest.Digest) (a *Archive, err error) {
	b, err := o.Resolve(ctx, p, d)
	if err != nil {
		return nil, err
	}
	a, err = o.api.OpenArchive(ctx, p, b.Version, b.Platform)
	if err != nil {
		return nil, err
	}
	if a.SHA256 != b.SHA256 {
		// The version's record names another archive for the platform
		// now: the digest is not this repository's any more.
		a.Close()
		return nil, fmt.Errorf("%w: %s in %s", ocistore.ErrDigestUnknown, d, p)
	}
	if a.Content() != nil && a.Size > 0 && a.Size != b.Size {
		o.docs.Verified(p, b.SHA256, a.Size)
	}
	return a, nil
}

// answer returns the verified archives of version v of p, as the
// engine's package API answers them (Engine.Package: fetched and
// verified if the cache lacks them), for the OCI documents.
func (o *OCI) answer(ctx context.Context, p addrs.Provider, v versions.Version) (ocistore.Answer, error) {
	pkg, err := o.api.Package(ctx, p, v, nil)
	if err == nil {
		err = pkg.Unasked // an index names every platform
	}
	if err != nil {
		return ocistore.Answer{}, err
	}
	out := make([]ocistore.Archive, 0, len(pkg.Archives))
	for _, pa := range pkg.Archives {
		a := ocistore.Archive{Platform: pa.Platform, SHA256: pa.SHA256, URL: pa.URL}
		if ev := pa.Evidence; ev != nil {
			if ph, ok := ev.Packages[pa.Platform]; ok && ph.PackageSize > 0 {
				a.Size = ph.PackageSize
			}
		}
		out = append(out, a)
	}
	var holds func() bool
	if st := pkg.Stamp; !st.IsZero() {
		// Until the engine writes or removes anything the answer was
		// made of, an archive is committed or removed (its size is then
		// borne out again: ocistore.OCI.Generation), or the documents of
		// a version are dropped.
		gen := o.docs.Generation()
		holds = func() bool { return o.api.Reuse(st) && o.docs.Generation() == gen }
	}
	return ocistore.Answer{Archives: out, Holds: holds}, nil
}

// adopted runs ask; when it finds a digest only the shared tier knows
// (*ocistore.Unadopted), it hands the OCI documents the verified
// archives of its version to build it again from, then runs ask once
// more.
func (o *OCI) adopted(ctx context.Context, ask func() error) error {
	err := ask()
	var u *ocistore.Unadopted
	if !errors.As(err, &u) {
		return err
	}
	ans, err := o.answer(ctx, u.Provider, u.Version)
	if err != nil {
		return err
	}
	if err := o.docs.Adopt(ctx, u, ans); err != nil {
		return err
	}
	return ask()
}

// Index returns the image index of version v of p, over every platform
// the engine serves that the version has a package for, fetching and
// verifying what the cache lacks as Package does, and learning archive
// sizes not known. Errors: those of Package; ErrPlatformNotFound when no
// platform has a package; ErrOffline for a size not known offline.
func (o *OCI) Index(ctx context.Context, p addrs.Provider, v versions.Version) (oci.Document, error) {
	doc, _, err := o.IndexAnswer(ctx, p, v)
	return doc, err
}

// IndexAnswer is Index, with what says whether the index is still the
// one Index would answer (nil: it may not be reused): while the engine's
// package answer it was built from holds, so that a new policy, a
// version list refreshed or anything the engine writes ends it. A front
// door may keep what it made of the index while holds says so.
//
// On a miss it asks the engine's package API for the version's verified
// archives, then hands them down to the OCI documents once, which size
// the archives and keep the documents by digest.
func (o *OCI) IndexAnswer(ctx context.Context, p addrs.Provider, v versions.Version) (oci.Document, func() bool, error) {
	key := versionKey{p, v}
	h, gen, ok := o.hot.Get(key)
	if ok && h.holds() {
		return h.doc, h.holds, nil
	}
	ans, err := o.answer(ctx, p, v)
	if err != nil {
		return oci.Document{}, nil, err
	}
	doc, err := o.docs.IndexOf(ctx, p, v, ans)
	if err != nil {
		return oci.Document{}, nil, err
	}
	if ans.Holds != nil {
		o.hot.Put(key, gen, hotIndex{doc: doc, holds: ans.Holds})
	}
	return doc, ans.Holds, nil
}

// Manifest returns the document (index or manifest) of p's repository
// whose digest is d, if it was ever handed out (by this replica, or by
// another through the shared tier), its version's package record is
// still kept and the package policy lets the version through. A
// platform's manifest is answered once its archive is verified (see
// bearOut). Errors: ocistore.ErrDigestUnknown (an
// *ocistore.WrongSizeError for a manifest made with a size its archive
// does not have), discovery.ErrHostNotAllowed, the policy's.
func (o *OCI) Manifest(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, error) {
	doc, _, err := o.manifest(ctx, p, d)
	return doc, err
}

// manifest is Manifest, with the document's version.
func (o *OCI) manifest(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, versions.Version, error) {
	var (
		doc oci.Document
		v   versions.Version
	)
	err := o.adopted(ctx, func() (err error) {
		doc, v, err = o.docs.Manifest(ctx, p, d)
		return err
	})
	if err == nil {
		err = o.bearOut(ctx, p, v, doc)
	}
	if err != nil {
		return oci.Document{}, versions.Version{}, err
	}
	return doc, v, nil
}

// bearOut holds doc, a document of version v of p about to be answered,
// until the archive it states is verified, when doc is a platform's
// manifest: the archive cached, or fetched and verified now through the
// engine's archives (EnsureArchive: one download however many callers,
// on the engine's context), waited for no longer than Config.OCIArchiveWait.
// The index of a version names its manifests by digest, and a manifest
// states its archive's size, as the origin stated it when the archive
// was not cached: the first pull of a version whose origin stated a size
// wrongly cannot be handed a right manifest, so it is stopped here,
// before any blob, with an *ocistore.WrongSizeError that says to pull
// the tag again; the version's documents are dropped first
// (ocistore.OCI.Verified), and the next index is made from the verified
// size. Past the wait, or when the fetch fails, doc passes as it was
// made: the blob request meets the download, or its failure, and a size
// proved wrong then is borne out by the next index
// (ocistore.OCI.Generation). An index, and a manifest whose archive
// bears its size out, pass.
func (o *OCI) bearOut(ctx context.Context, p addrs.Provider, v versions.Version, doc oci.Document) error {
	l, ok := oci.ProviderTargetLayer(doc)
	if !ok {
		return nil
	}
	size, cached := o.api.CachedSize(l.SHA256)
	if !cached {
		b, err := o.Resolve(ctx, p, digest.NewDigestFromEncoded(digest.SHA256, l.SHA256))
		if err != nil {
			return err
		}
		wait, cancel := context.WithTimeout(ctx, o.wait)
		_, err = o.api.EnsureArchive(wait, p, v, b.Platform)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if err != nil {
			return nil
		}
		if size, cached = o.api.CachedSize(l.SHA256); !cached {
			return nil
		}
	}
	if size <= 0 || size == l.Size {
		return nil
	}
	o.docs.Verified(p, l.SHA256, size)
	return &ocistore.WrongSizeError{Provider: p, Version: v, Manifest: doc.Digest, Stated: l.Size, Verified: size}
}

// ManifestAnswer is Manifest, with what says whether the document is
// still the one Manifest would answer (nil: it may not be reused): while
// the engine's package answer of its version holds, as IndexAnswer's.
func (o *OCI) ManifestAnswer(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, func() bool, error) {
	doc, v, err := o.manifest(ctx, p, d)
	if err != nil {
		return oci.Document{}, nil, err
	}
	if h, _, ok := o.hot.Get(versionKey{p, v}); ok && h.holds() {
		return doc, h.holds, nil
	}
	if ans, err := o.answer(ctx, p, v); err == nil {
		return doc, ans.Holds, nil
	}
	return doc, nil, nil
}

// Resolve returns the archive of p's repository whose sha256 digest is d
// (an archive of a version whose index was handed out, by this replica or
// another), while the version's package record is kept; Blob opens it.
// Errors: ocistore.ErrDigestUnknown, discovery.ErrHostNotAllowed.
func (o *OCI) Resolve(ctx context.Context, p addrs.Provider, d digest.Digest) (ocistore.Blob, error) {
	var b ocistore.Blob
	err := o.adopted(ctx, func() (err error) {
		b, err = o.docs.Resolve(ctx, p, d)
		return err
	})
	return b, err
}

// ociSizer learns an archive's size for the OCI side (ocistore.ArchiveSizer)
// from its origin, at the download URL the origin gives now when the one
// the version's record keeps has moved or expired (relocated). The
// origin's not-found for the whole ask is remembered (notFound), so that
// an archive the origin lacks costs it one ask per period, not one per
// index asked for.
type ociSizer struct {
	origin   ProviderOrigin
	notFound *notfound.Memory
	log      *slog.Logger
}

func (z ociSizer) ArchiveSize(ctx context.Context, p addrs.Provider, v versions.Version, a ocistore.Archive) (int64, error) {
	return z.notFound.ArchiveSize(p, a.SHA256, func() (int64, error) { return z.ask(ctx, p, v, a) })
}

func (z ociSizer) ask(ctx context.Context, p addrs.Provider, v versions.Version, a ocistore.Archive) (int64, error) {
	n, err := z.origin.ArchiveSize(ctx, p, a.URL)
	if err == nil {
		return n, nil
	}
	pl, perr := addrs.ParsePlatform(a.Platform)
	if perr != nil {
		return n, err
	}
	if moved, ok := relocated(ctx, z.origin, z.log, records.KeysOf(p).Of(v), pl, records.ArchiveRecord{URL: a.URL, SHA256: a.SHA256}, err); ok {
		return z.origin.ArchiveSize(ctx, p, moved.URL)
	}
	return n, err
}

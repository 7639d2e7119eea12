// Package ocistore serves the engine's provider versions as OCI
// artifacts: the image index and image
// manifests of a version, built from its package record by package oci,
// kept by digest, and its blobs resolved to archives.
//
// What the first index of a version costs at its origin, beyond the
// version list (shared with the other protocols and usually cached): the
// version's package metadata, one download answer per platform served,
// and its SHA256SUMS and signature, once (the same fetch as VERSION.json's
// or Package's); and the size of each platform's archive, which the
// registry protocol states only in OpenTofu's "packages" addition: from an
// origin without it, one first-byte request (Range: bytes=0-0) per
// platform, each made once and kept. No archive is downloaded to build an
// index. Later indexes of the version, and every manifest, cost nothing.
//
// With a tier shared with other replicas, every digest handed out is
// entered there too, so that a digest one replica handed out resolves on
// every other by digest alone: a replica builds the document again from
// the version's package record before it serves it (see Unadopted and
// Adopt).
//
// It speaks no HTTP (the OCI front door, proxy/ocidoor, does), fetches
// no archive and verifies nothing itself, and asks nothing of the engine
// above it: its caller (mirror.OCI) asks the engine's package API for a
// version's verified archives and hands them down (Answer: IndexOf,
// Adopt), and opens its blobs as the engine's archives.
package ocistore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"
	"golang.org/x/sync/singleflight"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/memo"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/originguard"
	"github.com/tfmirror/tfmirror/v2/mirror/providerlists"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// ArchiveSizer learns the size of an archive from its origin without
// downloading it: the engine's origin, behind its guards (a sealed
// mirror's answers records.ErrOffline).
type ArchiveSizer interface {
	ArchiveSize(ctx context.Context, p addrs.Provider, rawURL string) (int64, error)
}

// ErrDigestUnknown is a digest that names no manifest or blob of the
// repository asked: never handed out for it, or its version no longer
// kept. It is records.ErrDigestUnknown, which module repositories
// answer too.
var ErrDigestUnknown = records.ErrDigestUnknown

// OCI serves an engine's provider versions as OCI artifacts: it builds
// each version's image index and per-platform image manifests (package
// oci) from the version's package record and the archives' sizes, keeps
// every document handed out by its digest for as long as the version's
// package record is kept (so a digest once seen resolves after the tag
// has moved: a platform added, Config.Platforms changed), and resolves a
// blob digest to the archive it names through the same records, cached
// or not. It speaks no HTTP: the OCI front door does.
type OCI struct {
	cfg     Config
	parts   Parts
	store   Store
	sizer   ArchiveSizer
	metrics Metrics
	sizes   singleflight.Group // archive sizes learned, by sha256

	mu   sync.Mutex                       // one read-modify-write of an OCI record at a time
	recs *memo.Memo[string, *ociRecord]   // ociRecordKey -> the record as last read or written (never modified)
	kept *memo.Memo[string, struct{}]     // ociDigestKey -> stored: digest entries known stored
	hot  *memo.Memo[versionKey, hotIndex] // the index last built, while the engine says it holds
	docs *memo.Memo[string, keptDocument] // ociDigestKey -> a document read back by digest
}

// versionKey names a version in memory (no string to build per request).
type versionKey struct {
	p addrs.Provider
	v versions.Version
}

// hotIndex is an index built, with what says whether the package answer
// it was built from still holds (see Answer).
type hotIndex struct {
	doc   oci.Document
	holds func() bool
}

// keptDocument is a document read back by digest, and its version.
type keptDocument struct {
	doc oci.Document
	v   versions.Version
}

// ociMemoEntries bounds each of OCI's memos.
const ociMemoEntries = 4096

// Answer is a version's verified archives as the engine's package API
// answered them (mirror.Engine.Package), one for every platform the
// engine serves that the version has a package for, handed down by the
// caller; Holds says whether the answer still holds (nil: it may not be
// reused).
type Answer struct {
	Archives []Archive
	Holds    func() bool
}

// Parts are the engine's components OCI takes; all are required.
type Parts struct {
	Life    *lifetime.Lifetime   // detached work
	Source  stored.Source        // the digests handed out, stored (and those other replicas handed out, when the engine composes the shared tier over it)
	Hosts   *originguard.Hosts   // the hosts served
	Records *stored.Records      // the stored package records
	Lists   *providerlists.Lists // the package policy on a version, dated by its list: a document kept by digest is not served when the policy holds the version back
}

// recordKept says the cache holds the package record of version v of p.
func (o *OCI) recordKept(p addrs.Provider, v versions.Version) bool {
	_, ok := o.parts.Records.CachedPackage(p, v)
	return ok
}

// Archive is one platform's verified archive of a version.
type Archive struct {
	Platform string // os_arch
	SHA256   string
	// URL is the origin's download location, to learn the size from.
	URL string
	// Size is the archive's length as the origin's signed evidence
	// states it (OpenTofu's package_size), 0 when it does not.
	Size int64
}

// Store is where OCI keeps the documents it handed out and what it
// learned: the cache's records. *cache.Store implements it.
type Store interface {
	GetMeta(key string, v any) (time.Time, error)
	PutMeta(key string, v any) error
	StatBlob(sha string) (cache.BlobInfo, error)
}

// Metrics receives what OCI observes (mirror.Metrics).
type Metrics interface {
	CacheWriteFailed()
}

// Config configures OCI: the engine's timeout of an origin request
// (mirror.Config.OriginTimeout) and its logger. Both are required.
type Config struct {
	OriginTimeout time.Duration
	Logger        *slog.Logger
}

// New returns the OCI documents of an engine, keeping its records in
// store, learning archive sizes the origin does not state from sizer.
// It asks nothing of the engine above it: its caller hands it a
// version's verified archives (Answer).
func New(cfg Config, parts Parts, store Store, sizer ArchiveSizer, metrics Metrics) (*OCI, error) {
	if parts.Life == nil || parts.Source == nil || parts.Hosts == nil || parts.Records == nil || parts.Lists == nil || store == nil || sizer == nil || metrics == nil || cfg.Logger == nil || cfg.OriginTimeout <= 0 {
		return nil, errors.New("ocistore: the OCI side needs the engine's parts, a store, an archive sizer, metrics, a logger and a timeout")
	}
	return &OCI{cfg: cfg, parts: parts, store: store, sizer: sizer, metrics: metrics,
		recs: memo.New[string, *ociRecord](ociMemoEntries),
		kept: memo.New[string, struct{}](16 * ociMemoEntries),
		hot:  memo.New[versionKey, hotIndex](ociMemoEntries),
		docs: memo.New[string, keptDocument](ociMemoEntries),
	}, nil
}

// ociRecord is what is kept of a version's OCI artifacts, beside its
// package record: every document handed out, by digest, and the sizes of
// its archives learned from the origin. Only added to.
type ociRecord struct {
	Schema    int               `json:"schema"`
	Sizes     map[string]int64  `json:"sizes,omitempty"`     // archive sha256 -> bytes
	Documents map[string]ociDoc `json:"documents,omitempty"` // digest -> document
}

type ociDoc struct {
	MediaType string `json:"media_type"`
	Content   []byte `json:"content"`
}

// ociDigestEntry is one digest of a provider's repository: the version
// whose document it is, or whose archive for Platform it is. Platforms
// are what the document was built over: an index's platforms, a
// manifest's one. The entry is kept in the cache and in the tier shared
// with other replicas, under the same key: it never changes once
// written (a digest names one document, of one version), and what it
// says is a hint, not an answer: a replica that finds it in the shared
// tier only (see sharedEntry) builds the document again from the
// version's package record, verified as every package record is, and
// serves it only if it has the digest asked for.
type ociDigestEntry struct {
	Version   string   `json:"version"`
	Platform  string   `json:"platform,omitempty"`  // set for an archive
	Platforms []string `json:"platforms,omitempty"` // set for a document
}

func ociRecordKey(p addrs.Provider, v versions.Version) string {
	return "oci/version/" + p.String() + "/" + v.String()
}

func ociDigestKey(p addrs.Provider, d digest.Digest) string {
	return "oci/digest/" + p.String() + "/" + d.String()
}

// HotIndex returns the image index of version v of p last built, while
// the answer it was built from holds (ok). Otherwise gen is what IndexOf
// takes, read before the caller asks the engine for the version's
// archives.
func (o *OCI) HotIndex(p addrs.Provider, v versions.Version) (doc oci.Document, holds func() bool, gen uint64, ok bool) {
	key := versionKey{p, v}
	if h, _, ok := o.hot.Get(key); ok && h.holds() {
		return h.doc, h.holds, 0, true
	}
	return oci.Document{}, nil, o.hot.Generation(), false
}

// IndexOf returns the image index of version v of p over the verified
// archives ans (as the engine's package API answered, Answer), learning
// archive sizes not known, and keeps its documents by digest; gen is
// HotIndex's. It returns what says whether the index is still the one
// the caller would answer (nil: it may not be reused): ans.Holds, so
// that a new policy, a version list refreshed or anything the engine
// writes ends it. A front door may keep what it made of the index while
// holds says so. Errors: ErrPlatformNotFound when no platform has a
// package; ErrOffline for a size not known offline.
func (o *OCI) IndexOf(ctx context.Context, p addrs.Provider, v versions.Version, gen uint64, ans Answer) (oci.Document, func() bool, error) {
	key := versionKey{p, v}
	archives, holds := ans.Archives, ans.Holds
	if len(archives) == 0 {
		return oci.Document{}, nil, fmt.Errorf("%w: %s %s has no package for a platform this mirror serves", records.ErrPlatformNotFound, p, v)
	}
	b, err := o.build(ctx, p, v, archives)
	if err != nil {
		return oci.Document{}, nil, err
	}
	if err := o.keep(p, v, b, b.docs, ""); err != nil {
		return oci.Document{}, nil, err
	}
	index := b.index
	if holds != nil {
		o.hot.Put(key, gen, hotIndex{doc: index, holds: holds})
	}
	return index, holds, nil
}

// built are the documents of a version built over some of its archives:
// a manifest per archive, then the index over them, with the platforms
// each was built over, the archives' digests and their sizes.
type built struct {
	index     oci.Document
	docs      []oci.Document
	platforms map[digest.Digest][]string // document -> its platforms
	blobs     map[digest.Digest]string   // archive -> its platform
	sizes     map[string]int64           // archive sha256 -> bytes
}

// build builds the documents of version v of p over archives, learning
// archive sizes not known.
func (o *OCI) build(ctx context.Context, p addrs.Provider, v versions.Version, archives []Archive) (built, error) {
	rec := o.record(p, v)
	b := built{platforms: map[digest.Digest][]string{}, blobs: map[digest.Digest]string{}, sizes: map[string]int64{}}
	targets := make([]oci.Target, 0, len(archives))
	all := make([]string, 0, len(archives))
	for _, pa := range archives {
		size, err := o.size(ctx, p, pa, rec)
		if err != nil {
			return built{}, err
		}
		b.sizes[pa.SHA256] = size
		pl, err := addrs.ParsePlatform(pa.Platform)
		if err != nil {
			return built{}, err
		}
		m, err := oci.ProviderTargetManifest(oci.Layer{SHA256: pa.SHA256, Size: size, Title: addrs.ArchiveName(p.Type, v.String(), pa.Platform)})
		if err != nil {
			return built{}, fmt.Errorf("%s %s %s: %w", p, v, pa.Platform, err)
		}
		targets = append(targets, oci.Target{Platform: pl, Manifest: m})
		b.docs = append(b.docs, m)
		b.platforms[m.Digest] = []string{pa.Platform}
		b.blobs[digest.NewDigestFromEncoded(digest.SHA256, pa.SHA256)] = pa.Platform
		all = append(all, pa.Platform)
	}
	index, err := oci.ProviderIndex(targets)
	if err != nil {
		return built{}, fmt.Errorf("%s %s: %w", p, v, err)
	}
	slices.Sort(all)
	b.index = index
	b.docs = append(b.docs, index)
	b.platforms[index.Digest] = all
	return b, nil
}

// size returns the size of a platform's archive: as kept, as the origin
// stated it (OpenTofu's package_size), as cached, or learned from the
// origin, once however many callers ask (each may give up on its own
// context; the request runs on the engine's).
func (o *OCI) size(ctx context.Context, p addrs.Provider, pa Archive, rec *ociRecord) (int64, error) {
	if n := rec.Sizes[pa.SHA256]; n > 0 {
		return n, nil
	}
	if pa.Size > 0 {
		return pa.Size, nil
	}
	if info, err := o.store.StatBlob(pa.SHA256); err == nil && info.Size > 0 {
		return info.Size, nil
	}
	ch := o.sizes.DoChan(pa.SHA256, func() (any, error) {
		ctx, done, err := o.parts.Life.Detached(o.cfg.OriginTimeout)
		if err != nil {
			return int64(0), err
		}
		defer done()
		return o.sizer.ArchiveSize(ctx, p, pa.URL)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return 0, res.Err
		}
		return res.Val.(int64), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// record returns the kept OCI record of v (empty when there is none).
func (o *OCI) record(p addrs.Provider, v versions.Version) *ociRecord {
	key := ociRecordKey(p, v)
	if r, _, ok := o.recs.Get(key); ok {
		return r
	}
	gen := o.recs.Generation()
	var rec ociRecord
	if _, err := o.store.GetMeta(key, &rec); err != nil {
		if !errors.Is(err, cache.ErrNotFound) {
			o.cfg.Logger.Warn("reading a cached OCI record", "provider", p.String(), "version", v.String(), "error", err)
		}
		return &ociRecord{}
	}
	if !records.KnownSchema(rec.Schema) {
		return &ociRecord{}
	}
	o.recs.Put(key, gen, &rec)
	return &rec
}

// keep stores documents docs of b, handed out: the documents and the
// archive sizes in v's OCI record, and an entry for every digest (the
// documents and b's archives), in the cache and in the shared tier
// (except adopted's, read from there). It writes only what is new.
func (o *OCI) keep(p addrs.Provider, v versions.Version, b built, docs []oci.Document, adopted digest.Digest) error {
	rec := o.record(p, v)
	missing := false
	for sha, n := range b.sizes {
		if rec.Sizes[sha] != n {
			missing = true
		}
	}
	for _, d := range docs {
		if _, ok := rec.Documents[d.Digest.String()]; !ok {
			missing = true
		}
	}
	if missing {
		o.mu.Lock()
		err := o.addToRecord(p, v, docs, b.sizes)
		o.mu.Unlock()
		if err != nil {
			return err
		}
	}
	entries := map[digest.Digest]*ociDigestEntry{}
	for _, d := range docs {
		entries[d.Digest] = &ociDigestEntry{Version: v.String(), Platforms: b.platforms[d.Digest]}
	}
	for d, pl := range b.blobs {
		entries[d] = &ociDigestEntry{Version: v.String(), Platform: pl}
	}
	for d, entry := range entries {
		key := ociDigestKey(p, d)
		if _, _, ok := o.kept.Get(key); ok {
			continue
		}
		gen := o.kept.Generation()
		put := o.parts.Source.Put // into the shared tier too
		if d == adopted {
			put = o.store.PutMeta // it came from there
		}
		if err := put(key, entry); err != nil {
			o.metrics.CacheWriteFailed()
			return fmt.Errorf("storing an OCI digest of %s %s: %w", p, v, err)
		}
		o.kept.Put(key, gen, struct{}{})
	}
	return nil
}

func (o *OCI) addToRecord(p addrs.Provider, v versions.Version, docs []oci.Document, sizes map[string]int64) error {
	key := ociRecordKey(p, v)
	o.recs.Forget(key) // read what is stored now
	old := o.record(p, v)
	rec := &ociRecord{Schema: records.Schema, Sizes: maps.Clone(old.Sizes), Documents: maps.Clone(old.Documents)}
	if rec.Sizes == nil {
		rec.Sizes = map[string]int64{}
	}
	if rec.Documents == nil {
		rec.Documents = map[string]ociDoc{}
	}
	maps.Copy(rec.Sizes, sizes)
	for _, d := range docs {
		rec.Documents[d.Digest.String()] = ociDoc{MediaType: d.MediaType, Content: d.Bytes}
	}
	if err := o.store.PutMeta(key, rec); err != nil {
		o.metrics.CacheWriteFailed()
		return fmt.Errorf("storing the OCI record of %s %s: %w", p, v, err)
	}
	o.recs.Forget(key)
	o.recs.Put(key, o.recs.Generation(), rec)
	return nil
}

// entry finds what digest d of p's repository names, while its version's
// package record is kept.
func (o *OCI) entry(ctx context.Context, p addrs.Provider, d digest.Digest) (versions.Version, ociDigestEntry, error) {
	unknown := fmt.Errorf("%w: %s in %s", ErrDigestUnknown, d, p)
	if err := o.parts.Hosts.Check(p.Hostname); err != nil {
		return versions.Version{}, ociDigestEntry{}, err
	}
	if d.Validate() != nil || d.Algorithm() != digest.SHA256 {
		return versions.Version{}, ociDigestEntry{}, unknown
	}
	var entry ociDigestEntry
	switch _, src, err := o.parts.Source.Get(ctx, ociDigestKey(p, d), &entry); {
	case err != nil && !errors.Is(err, cache.ErrNotFound):
		return versions.Version{}, entry, fmt.Errorf("reading an OCI digest of %s: %w", p, err)
	case err != nil:
		return versions.Version{}, entry, unknown
	case src != records.Hit:
		return o.sharedEntry(p, d, entry, unknown)
	}
	v, err := addrs.ParseSemver(entry.Version)
	if err != nil {
		return versions.Version{}, entry, unknown
	}
	if !o.recordKept(p, v) {
		return versions.Version{}, entry, unknown
	}
	return v, entry, nil
}

// Manifest returns the document (index or manifest) of p's repository
// whose digest is d, if it was ever handed out, its version's package
// record is still kept and the package policy lets the version through;
// with its version, and what says whether the document is still the
// one Manifest would answer while the index of its version is kept hot
// (nil: the caller learns it from the engine's package answer of the
// version, as IndexOf's). Errors: ErrDigestUnknown, an *Unadopted to
// adopt first, discovery.ErrHostNotAllowed, the policy's.
func (o *OCI) Manifest(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, versions.Version, func() bool, error) {
	doc, v, err := o.manifest(ctx, p, d)
	if err != nil {
		return oci.Document{}, versions.Version{}, nil, err
	}
	if h, _, ok := o.hot.Get(versionKey{p, v}); ok && h.holds() {
		return doc, v, h.holds, nil
	}
	return doc, v, nil, nil
}

// manifest is the document of digest d and its version, which the
// package policy lets through.
func (o *OCI) manifest(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, versions.Version, error) {
	doc, v, err := o.keptManifest(ctx, p, d)
	if err != nil {
		return oci.Document{}, versions.Version{}, err
	}
	if err := o.parts.Lists.CheckVersion(ctx, p, v); err != nil {
		return oci.Document{}, versions.Version{}, err
	}
	return doc, v, nil
}

func (o *OCI) keptManifest(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, versions.Version, error) {
	key := ociDigestKey(p, d)
	if k, _, ok := o.docs.Get(key); ok {
		if o.recordKept(p, k.v) && o.parts.Hosts.Check(p.Hostname) == nil {
			return k.doc, k.v, nil
		}
	}
	gen := o.docs.Generation()
	v, entry, err := o.entry(ctx, p, d)
	if err != nil {
		return oci.Document{}, versions.Version{}, err
	}
	doc, ok := o.record(p, v).Documents[d.String()]
	if entry.Platform != "" || !ok {
		return oci.Document{}, versions.Version{}, fmt.Errorf("%w: %s in %s", ErrDigestUnknown, d, p)
	}
	out, err := oci.NewDocument(doc.MediaType, doc.Content)
	if err != nil || out.Digest != d {
		return oci.Document{}, versions.Version{}, fmt.Errorf("the kept OCI document %s of %s %s does not match its digest", d, p, v)
	}
	o.docs.Put(key, gen, keptDocument{doc: out, v: v})
	return out, v, nil
}

// Blob is what a blob digest of a repository names: the archive of
// Version for Platform, whose sha256 is SHA256 and whose size, as the
// index said, is Size (0 when not recorded).
type Blob struct {
	Version  versions.Version
	Platform addrs.Platform
	SHA256   string
	Size     int64
}

// Resolve returns the archive of p's repository whose sha256 digest is d
// (an archive of a version whose index was handed out), while the
// version's package record is kept; mirror.OCI.Blob opens it. Errors:
// ErrDigestUnknown, an *Unadopted to adopt first,
// discovery.ErrHostNotAllowed.
func (o *OCI) Resolve(ctx context.Context, p addrs.Provider, d digest.Digest) (Blob, error) {
	v, entry, err := o.entry(ctx, p, d)
	if err != nil {
		return Blob{}, err
	}
	if entry.Platform == "" {
		return Blob{}, fmt.Errorf("%w: %s in %s", ErrDigestUnknown, d, p)
	}
	pl, err := addrs.ParsePlatform(entry.Platform)
	if err != nil {
		return Blob{}, fmt.Errorf("%w: %s in %s", ErrDigestUnknown, d, p)
	}
	return Blob{Version: v, Platform: pl, SHA256: d.Encoded(), Size: o.record(p, v).Sizes[d.Encoded()]}, nil
}

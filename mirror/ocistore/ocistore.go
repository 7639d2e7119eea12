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
// index, and later indexes of the version cost nothing. (Its caller,
// mirror.OCI, has a platform's manifest wait for that platform's archive,
// through the engine's one download of it, before it is answered.)
//
// Neither stated size is signed: an archive the cache holds, verified, is
// sized by what it holds, and a version's documents made with a size its
// verified archive does not have are dropped and made again (sizes.go).
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
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/memo"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/originguard"
	"github.com/tfmirror/tfmirror/v2/mirror/providerlists"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// ArchiveSizer learns the size of an archive from its origin without
// downloading it: through the engine's origin, behind its guards (a
// sealed mirror's answers records.ErrOffline), at the download URL the
// origin gives now when the one kept has moved or expired.
type ArchiveSizer interface {
	// ArchiveSize is the size of archive a of version v of p.
	ArchiveSize(ctx context.Context, p addrs.Provider, v versions.Version, a Archive) (int64, error)
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
	// learned are the sizes the origins answered, by learnedKey (at most
	// maxLearned, then it starts again): a caller that read a version's
	// OCI record before the request that learned a size stored it there,
	// and asks after that request ended, does not ask the origin again.
	learnedMu sync.Mutex
	learned   map[string]int64

	mu   sync.Mutex                       // one read-modify-write of an OCI record at a time
	recs *memo.Memo[string, *ociRecord]   // ociRecordKey -> the record as last read or written (never modified)
	docs *memo.Memo[string, keptDocument] // ociDigestKey -> a document read back by digest

	side *Sides // the sides built on the same engine (Sides.Add), told of a version's records dropped; nil: none
	// dropped counts the versions whose records this side forgot (see
	// Drops), so that what a caller made of an index ends with them.
	dropped atomic.Uint64
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
	// Size is the archive's length as the origin stated it in the
	// package metadata (OpenTofu's package_size), 0 when it did not. No
	// signature covers it: it is taken only for an archive not cached,
	// and a verified size that differs drops the documents made with it
	// (Verified).
	Size int64
}

// Store is where OCI keeps the documents it handed out and what it
// learned: the cache's records, a version's written together (PutMetas:
// all or none), deleted when they were made with a wrong size; and the
// verified archives' sizes (StatBlob). *cache.Store implements it.
type Store interface {
	Remover
	PutMetas(docs map[string]any) error
	StatBlob(sha string) (cache.BlobInfo, error)
	// StatGeneration grows whenever an answer of StatBlob may have
	// changed (an archive committed or removed).
	StatGeneration() uint64
}

// Metrics receives what OCI observes (mirror.Metrics).
type Metrics interface {
	CacheWriteFailed()
	// OCIWrongSizeDropped records a version whose OCI records were
	// dropped: made with an archive size its verified archive does not
	// have.
	OCIWrongSizeDropped()
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
		recs:    memo.New[string, *ociRecord](ociMemoEntries),
		learned: map[string]int64{},
		docs:    memo.New[string, keptDocument](ociMemoEntries),
	}, nil
}

// ociRecord is what is kept of a version's OCI artifacts, beside its
// package record: every document handed out, by digest, and the sizes of
// its archives learned from the origin. Only added to. It is written in
// the same transaction as the digest entries of what it adds (keep), so
// that no document it holds is found without its entry; the entries are
// kept under their own keys, where a replica looks a digest up alone.
type ociRecord struct {
	Schema    int               `json:"schema"`
	Sizes     map[string]int64  `json:"sizes,omitempty"`     // archive sha256 -> bytes
	Documents map[string]ociDoc `json:"documents,omitempty"` // digest -> document
	// entered are the digests whose entries this process stored (in the
	// cache and offered to the shared tier) with the record or since it
	// was read; not stored: a record read from the cache has none, and
	// the next keep of its version writes its entries again, once.
	entered map[string]bool
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

// recordKeys are the keys of a version's OCI records, built once for
// all of them.
type recordKeys struct {
	record string // the version's OCI record
	digest string // what the key of each digest entry of the repository begins with
}

func keysOf(p addrs.Provider, v versions.Version) recordKeys {
	ps := p.String()
	return recordKeys{record: "oci/version/" + ps + "/" + v.String(), digest: "oci/digest/" + ps + "/"}
}

func ociRecordKey(p addrs.Provider, v versions.Version) string { return keysOf(p, v).record }

func ociDigestKey(p addrs.Provider, d digest.Digest) string {
	return "oci/digest/" + p.String() + "/" + d.String()
}

// IndexOf returns the image index of version v of p over the verified
// archives ans (as the engine's package API answered, Answer), learning
// archive sizes not known, and keeps its documents by digest. It asks
// nothing of its caller: whether the index may be reused is ans.Holds,
// which the caller has. Errors: ErrPlatformNotFound when no platform has
// a package; ErrOffline for a size not known offline.
func (o *OCI) IndexOf(ctx context.Context, p addrs.Provider, v versions.Version, ans Answer) (oci.Document, error) {
	archives := ans.Archives
	if len(archives) == 0 {
		return oci.Document{}, fmt.Errorf("%w: %s %s has no package for a platform this mirror serves", records.ErrPlatformNotFound, p, v)
	}
	keys := keysOf(p, v)
	rec := o.recordAt(keys.record)
	if o.borneOut(p, v, rec, archives) {
		rec = o.recordAt(keys.record)
	}
	b, err := o.build(ctx, p, v, rec, archives)
	if err != nil {
		return oci.Document{}, err
	}
	if err := o.keep(keys, p, v, rec, b, b.docs, ""); err != nil {
		return oci.Document{}, err
	}
	return b.index, nil
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
// archive sizes not known in rec, v's OCI record.
func (o *OCI) build(ctx context.Context, p addrs.Provider, v versions.Version, rec *ociRecord, archives []Archive) (built, error) {
	sizes, err := o.sizesOf(ctx, p, v, archives, rec)
	if err != nil {
		return built{}, err
	}
	b := built{platforms: map[digest.Digest][]string{}, blobs: map[digest.Digest]string{}, sizes: map[string]int64{}}
	targets := make([]oci.Target, 0, len(archives))
	all := make([]string, 0, len(archives))
	for i, pa := range archives {
		size := sizes[i]
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

// maxLearned bounds the archive sizes OCI.learned holds.
const maxLearned = 4096

// learnedKey names the size of archive sha as the origin of p's host
// states it: an origin's word on the archives it serves, never on
// another origin's archive of the same bytes (a hostile origin that
// serves another's archive under its own name, with a size it does not
// have, would otherwise state it for both).
func learnedKey(p addrs.Provider, sha string) string {
	return p.Hostname.String() + " " + sha
}

// sizesOf returns the size of each of archives, in order: as cached
// (the archive verified: what the mirror knows wins over what the origin
// states), as kept in rec, as the origin stated it (OpenTofu's
// package_size), or learned from the origin (the total of a first-byte
// request), the archives' requests all at once, each archive's once per
// origin however many callers ask (each may give up on its own context;
// the requests run on the engine's). A size kept in rec that the cached
// archive does not have is a wrong one: the caller drops rec (see
// Verified) before it builds on it, so that it is never met here.
func (o *OCI) sizesOf(ctx context.Context, p addrs.Provider, v versions.Version, archives []Archive, rec *ociRecord) ([]int64, error) {
	sizes := make([]int64, len(archives))
	// The asks are the lifetime's coalesced work (lifetime.Coalesce):
	// each goes on once its callers left, within lifetime.MaxAbandoned.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the asks still waited for, on an error
	type result struct {
		n   int64
		err error
	}
	type ask struct {
		i  int
		ch <-chan result
	}
	var asked []ask
	for i, pa := range archives {
		if n := o.verifiedSize(pa.SHA256); n > 0 {
			sizes[i] = n
			continue
		}
		if n := rec.Sizes[pa.SHA256]; n > 0 {
			sizes[i] = n
			continue
		}
		if pa.Size > 0 {
			sizes[i] = pa.Size
			continue
		}
		key := learnedKey(p, pa.SHA256)
		ch := make(chan result, 1)
		asked = append(asked, ask{i, ch})
		workgroup.Go(o.cfg.Logger, func() {
			val, err := o.parts.Life.Coalesce(ctx, "archive_size", "archive_size "+key, func(ctx context.Context) (any, error) {
				o.learnedMu.Lock()
				n, ok := o.learned[key]
				o.learnedMu.Unlock()
				if ok {
					return n, nil
				}
				n, err := o.sizer.ArchiveSize(ctx, p, v, pa)
				if err == nil {
					o.learnedMu.Lock()
					if len(o.learned) >= maxLearned {
						clear(o.learned)
					}
					o.learned[key] = n
					o.learnedMu.Unlock()
				}
				return n, err
			})
			n, _ := val.(int64)
			ch <- result{n, err}
		}, "provider", p.String(), "sha256", pa.SHA256)
	}
	for _, a := range asked {
		select {
		case res := <-a.ch:
			if res.err != nil {
				return nil, res.err
			}
			sizes[a.i] = res.n
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return sizes, nil
}

// record returns the kept OCI record of v (empty when there is none).
func (o *OCI) record(p addrs.Provider, v versions.Version) *ociRecord {
	return o.recordAt(ociRecordKey(p, v))
}

// recordAt returns the kept OCI record under key (empty when there is
// none).
func (o *OCI) recordAt(key string) *ociRecord {
	if r, _, ok := o.recs.Get(key); ok {
		return r
	}
	gen := o.recs.Generation()
	rec, ok := o.readRecord(key)
	if ok {
		o.recs.Put(key, gen, rec)
	}
	return rec
}

// readRecord reads the OCI record under key from the store: ok when
// there is one it reads (empty otherwise).
func (o *OCI) readRecord(key string) (rec *ociRecord, ok bool) {
	rec = &ociRecord{}
	if _, err := o.store.GetMeta(key, rec); err != nil {
		if !errors.Is(err, cache.ErrNotFound) {
			o.cfg.Logger.Warn("reading a cached OCI record", "key", key, "error", err)
		}
		return &ociRecord{}, false
	}
	if !records.KnownSchema(rec.Schema) {
		return &ociRecord{}, false
	}
	return rec, true
}

// keep stores documents docs of b, handed out, v's OCI record being
// rec: the documents and the archive sizes in v's OCI record, and an
// entry for every digest (the documents and b's archives), in the cache
// in one transaction, then in the shared tier (except adopted's, read
// from there). It writes only what is new.
func (o *OCI) keep(keys recordKeys, p addrs.Provider, v versions.Version, rec *ociRecord, b built, docs []oci.Document, adopted digest.Digest) error {
	if _, batch, _ := merge(keys, v, rec, b, docs); len(batch) == 0 {
		return nil
	}
	o.mu.Lock()
	// What is stored now (another caller, or another OCI side of the
	// engine, may have kept v since rec was read), with the entries this
	// side stored.
	cur, _ := o.readRecord(keys.record)
	if m, _, ok := o.recs.Get(keys.record); ok {
		cur.entered = m.entered
	}
	next, batch, entries := merge(keys, v, cur, b, docs)
	err := o.store.PutMetas(batch)
	if err == nil {
		o.recs.Adopt(keys.record, o.recs.Generation(), next)
	}
	o.mu.Unlock()
	if err != nil {
		o.metrics.CacheWriteFailed()
		return fmt.Errorf("storing the OCI records of %s %s: %w", p, v, err)
	}
	for _, e := range entries {
		if e.d != adopted {
			o.parts.Source.Share(e.key, e.entry)
		}
	}
	return nil
}

// digestEntry is a digest's entry and its key.
type digestEntry struct {
	d     digest.Digest
	key   string
	entry *ociDigestEntry
}

// merge returns v's OCI record rec with documents docs of b added, and
// what to write for it: the record, when it gains a document or a size,
// and the entries of the digests not entered yet, under their keys (no
// key when there is nothing to write); entries are those digests'.
func merge(keys recordKeys, v versions.Version, rec *ociRecord, b built, docs []oci.Document) (next *ociRecord, batch map[string]any, entries []digestEntry) {
	next = &ociRecord{Schema: rec.Schema, Sizes: rec.Sizes, Documents: rec.Documents, entered: maps.Clone(rec.entered)}
	if next.entered == nil {
		next.entered = map[string]bool{}
	}
	batch = map[string]any{}
	grows := false
	for sha, n := range b.sizes {
		grows = grows || rec.Sizes[sha] != n
	}
	for _, d := range docs {
		_, ok := rec.Documents[d.Digest.String()]
		grows = grows || !ok
	}
	if grows {
		next.Schema, next.Sizes, next.Documents = records.Schema, maps.Clone(rec.Sizes), maps.Clone(rec.Documents)
		if next.Sizes == nil {
			next.Sizes = map[string]int64{}
		}
		if next.Documents == nil {
			next.Documents = map[string]ociDoc{}
		}
		maps.Copy(next.Sizes, b.sizes)
		for _, d := range docs {
			next.Documents[d.Digest.String()] = ociDoc{MediaType: d.MediaType, Content: d.Bytes}
		}
		batch[keys.record] = next
	}
	vs := v.String()
	enter := func(d digest.Digest, entry *ociDigestEntry) {
		ds := d.String()
		if next.entered[ds] {
			return
		}
		next.entered[ds] = true
		key := keys.digest + ds
		batch[key] = entry
		entries = append(entries, digestEntry{d: d, key: key, entry: entry})
	}
	for _, d := range docs {
		enter(d.Digest, &ociDigestEntry{Version: vs, Platforms: b.platforms[d.Digest]})
	}
	for d, pl := range b.blobs {
		enter(d, &ociDigestEntry{Version: vs, Platform: pl})
	}
	return next, batch, entries
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
// with its version. Errors: ErrDigestUnknown, an *Unadopted to adopt
// first, discovery.ErrHostNotAllowed, the policy's.
func (o *OCI) Manifest(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, versions.Version, error) {
	doc, v, err := o.keptManifest(ctx, p, d)
	if err != nil {
		return oci.Document{}, versions.Version{}, err
	}
	if err := o.parts.Lists.CheckVersion(ctx, records.KeysOf(p).Of(v)); err != nil {
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

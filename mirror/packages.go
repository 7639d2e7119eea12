package mirror

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
	"golang.org/x/sync/errgroup"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/discovery/registryjson"
	"github.com/tfmirror/tfmirror/verify"
)

// Limits for the checksum documents of a provider version.
const (
	maxSumsBytes      = 1 << 20
	maxSignatureBytes = 64 << 10
	// packageFetchConcurrency bounds parallel package-metadata requests to
	// one origin for one version.
	packageFetchConcurrency = 4
	// minForcedRefresh keeps a client asking for unknown versions from
	// making the mirror refetch a version list more often than this.
	minForcedRefresh = time.Minute
)

// PackageRecord is the verified metadata of one provider version: for
// each platform, the origin's package metadata and the sha256 of its
// archive, checked against a SHA256SUMS document whose signature verified,
// with that document, its signature and the signing keys kept as the
// origin gave them (the evidence). Once stored its archives never change,
// except that platforms not yet fetched may be added, and platforms the
// origin had no package for are asked for again (see believedMissing) and
// may then be added.
//
// A record of a schema before evidenceSchema (written by an earlier
// release) has no Documents, and Archives without Evidence.
type PackageRecord struct {
	// Schema is the record's layout (recordSchema when written).
	Schema  int    `json:"schema"`
	Version string `json:"version"`
	// Sums is the verified content of Documents: file name -> sha256.
	Sums map[string]string `json:"sums"`
	// Documents are the version's SHA256SUMS documents that verified, each
	// with its signature and keys; usually one. Only appended to, so an
	// ArchiveRecord's Document index stays valid.
	Documents []SumsDocument `json:"documents,omitempty"`
	// Archives are the verified packages by os_arch.
	Archives map[string]ArchiveRecord `json:"archives"`
	// Missing are platforms the origin listed but has no package for.
	Missing []string `json:"missing,omitempty"`
	// MissingChecked says when each platform in Missing was last found
	// missing. A platform without an entry (records stored before it was
	// kept) is asked for again.
	MissingChecked map[string]missingCheck `json:"missing_checked,omitempty"`
	VerifiedAt     time.Time               `json:"verified_at"`
	// Provenance says where the record came from (ProvenanceOrigin,
	// ProvenanceImported, ProvenanceUnsigned).
	Provenance Provenance `json:"provenance,omitempty"`
	// Withheld is a version imported without signature under this
	// allowed origin host (by an earlier release) and withheld (see
	// unsigned.go), set aside when the origin's own version of the same
	// number was fetched and verified into this record: kept, as it
	// cannot be fetched again (retention never evicts its archives), and
	// never served.
	Withheld *PackageRecord `json:"withheld,omitempty"`

	// evidenceChecked says checkEvidence passed for this record as it
	// is in memory (never stored).
	evidenceChecked atomic.Bool
}

// Provenance says how a version's packages reached the cache.
type Provenance string

const (
	// ProvenanceOrigin: fetched from the origin and verified against its
	// signed SHA256SUMS.
	ProvenanceOrigin Provenance = ""
	// ProvenanceImported: loaded by Import from an export and verified
	// against the origin's signed SHA256SUMS that came with it.
	ProvenanceImported Provenance = "imported"
	// ProvenanceUnsigned: loaded by Import without any signature
	// (Imported.Unsigned): checked only against the h1: hashes given with
	// it, if any. Such a version has no evidence and is never completed
	// from an origin.
	ProvenanceUnsigned Provenance = "imported without signature"
)

func (pr Provenance) String() string {
	if pr == ProvenanceOrigin {
		return "origin"
	}
	return string(pr)
}

// hasEvidence reports whether rec keeps the origin's evidence for every
// archive in it (every record of evidenceSchema or later does).
func (rec *PackageRecord) hasEvidence() bool { return rec.Schema >= evidenceSchema }

// SumsDocument is one SHA256SUMS document of a version, byte for byte as
// the origin served it, with its detached signature and the signing keys
// the origin's package metadata gave, one of which verified the signature.
type SumsDocument struct {
	// URL and SignatureURL are the origin's shasums_url and
	// shasums_signature_url, absolute.
	URL          string `json:"url"`
	SignatureURL string `json:"signature_url"`
	// Content is the SHA256SUMS document.
	Content []byte `json:"content"`
	// Signature is the detached signature over Content (binary or
	// ASCII-armored, as the origin served it).
	Signature []byte `json:"signature"`
	// SigningKeys are the origin's signing_keys.gpg_public_keys for the
	// packages that refer to this document, every field as given.
	SigningKeys []registryjson.GPGPublicKey `json:"signing_keys"`
}

// missingCheck is one finding that the origin has no package for a platform.
type missingCheck struct {
	At time.Time `json:"at"` // by Config.Now
	// List is when the version list in the cache then was stored (zero
	// when there was none): the finding holds for that list only.
	List time.Time `json:"list"`
}

// ArchiveRecord is the verified package of one platform: the origin's
// file name and download URL, the sha256 of the archive, and the rest of
// the origin's package metadata. It is comparable: Evidence is shared,
// never modified.
type ArchiveRecord struct {
	// Filename is the archive's name as SHA256SUMS records it.
	Filename string `json:"filename"`
	// URL is the origin's download_url, absolute.
	URL string `json:"url"`
	// SHA256 is the archive's verified sha256, lowercase hex (the line of
	// Filename in the SHA256SUMS document).
	SHA256 string `json:"sha256"`
	// Evidence is the rest of the origin's package metadata and which
	// SHA256SUMS document verified it; nil in records of a schema before
	// evidenceSchema. Shared: do not modify.
	Evidence *PackageEvidence `json:"evidence,omitempty"`
}

// PackageEvidence is what the origin's package metadata for one platform
// said besides the file name and download URL (kept in ArchiveRecord),
// as it said it, and the SHA256SUMS document that verified it.
type PackageEvidence struct {
	// Protocols, OS and Arch are the origin's protocols, os and arch.
	Protocols []string `json:"protocols"`
	OS        string   `json:"os"`
	Arch      string   `json:"arch"`
	// Shasum is the origin's shasum, as it wrote it.
	Shasum string `json:"shasum"`
	// Packages is the origin's "packages" (OpenTofu's hashes and sizes
	// of every platform's archive of the version), as it gave them, once
	// checked by checkPackageHashes; omitted when it gave none, and in
	// records stored before it was kept.
	Packages map[string]registryjson.PackageHashes `json:"packages,omitempty"`
	// Document is the index in PackageRecord.Documents of the SHA256SUMS
	// document that verified this package.
	Document int `json:"document"`
}

// covers reports whether rec has an answer for every platform in need:
// an archive, or a finding that it is missing that missing believes.
func (rec *PackageRecord) covers(need []string, missing func(pl string) bool) bool {
	for _, pl := range need {
		if _, ok := rec.Archives[pl]; !ok && !missing(pl) {
			return false
		}
	}
	return true
}

// believedMissing returns a function that reports whether rec's finding
// that the origin has no package for a platform still holds. A finding is
// believed for VersionsTTL, and only while the cached version list is the
// one it was made with: after either the origin is asked again, so a
// package the origin adds (or a failure it repairs) is seen, at most once
// per TTL or list refresh. A finding made at or after since is believed
// regardless (it answers a request made since). A sealed mirror believes
// every finding, as it cannot ask.
func (s *providerRecords) believedMissing(p addrs.Provider, rec *PackageRecord, since time.Time) func(pl string) bool {
	var (
		listRead bool
		listAt   time.Time
	)
	return func(pl string) bool {
		if !slices.Contains(rec.Missing, pl) {
			return false
		}
		if s.cfg.Offline || s.e.local(p.Hostname) {
			return true
		}
		c, ok := rec.MissingChecked[pl]
		switch {
		case !ok:
			return false
		case !since.IsZero() && !c.At.Before(since):
			return true
		case s.cfg.Now().Sub(c.At) >= s.cfg.VersionsTTL:
			return false
		}
		if !listRead {
			listAt, listRead = s.listStoredAt(p), true
		}
		return listAt.Equal(c.List)
	}
}

// providerRecords is the provider side of the engine's records: version
// lists and package records, each fetched from the origin once however
// many callers ask (through the engine's coalescing, on its context),
// verified with its evidence, stored, and read back through the memo.
type providerRecords struct {
	e       *Engine // coalescing, detached work, the shared tier, withholding
	cfg     *Config // the engine's, defaults filled in
	origin  ProviderOrigin
	store   Store
	memo    *metaMemo
	log     *slog.Logger
	metrics Metrics
}

// listStoredAt returns when p's cached version list was stored, or the
// zero time when there is none.
func (s *providerRecords) listStoredAt(p addrs.Provider) time.Time {
	_, storedAt, err := s.cachedVersions(versionsKey(p))
	if err != nil {
		return time.Time{}
	}
	return storedAt
}

func packageKey(p addrs.Provider, v versions.Version) string {
	return "package/" + p.String() + "/" + v.String()
}

// versionEntry finds version v in p's version list, and says where the
// list came from, refreshing a list that lacks it (a release newer than
// the cached list). Only a list that the origin answered lately says that
// v does not exist (ErrVersionNotFound): when the list could not be
// refreshed the error is why, and offline it is ErrOffline.
func (s *providerRecords) versionEntry(ctx context.Context, p addrs.Provider, v versions.Version) (VersionEntry, listState, error) {
	e, _, st, err := s.versionIn(ctx, p, v)
	return e, st, err
}

// versionIn is versionEntry that also returns the list it found v in,
// which dates v for the package policy.
func (s *providerRecords) versionIn(ctx context.Context, p addrs.Provider, v versions.Version) (VersionEntry, *VersionList, listState, error) {
	list, st, err := s.versions(ctx, p, false)
	if err != nil {
		return VersionEntry{}, nil, listState{}, err
	}
	if e, ok := list.Find(v); ok {
		return e, list, st, nil
	}
	if !st.stale && !st.fetched && s.cfg.Now().Sub(st.storedAt) >= minForcedRefresh {
		list, st, err = s.versions(ctx, p, true)
		if err != nil {
			return VersionEntry{}, nil, listState{}, err
		}
		if e, ok := list.Find(v); ok {
			return e, list, st, nil
		}
	}
	switch {
	case st.stale:
		return VersionEntry{}, nil, listState{}, fmt.Errorf("%s has no version %s in its cached version list, which could not be refreshed: %w", p, v, st.err)
	case s.cfg.Offline:
		return VersionEntry{}, nil, listState{}, fmt.Errorf("%w: %s has no version %s in its cached version list", ErrOffline, p, v)
	}
	return VersionEntry{}, nil, listState{}, fmt.Errorf("%w: %s has no version %s", ErrVersionNotFound, p, v)
}

// h1 returns the h1: hash of a cached archive, or "" when it is not cached.
func (s *providerRecords) h1(sha string) string {
	info, err := s.store.StatBlob(sha)
	if err != nil {
		return ""
	}
	return info.H1
}

// cachedPackage returns the stored record for v, if any, from memory when
// it was read before. The record must not be modified (see clone).
func (s *providerRecords) cachedPackage(p addrs.Provider, v versions.Version) (*PackageRecord, bool) {
	key := packageKey(p, v)
	val, _, gen, ok := s.memo.get(key)
	if ok {
		return val.(*PackageRecord), true
	}
	var rec PackageRecord
	storedAt, err := s.store.GetMeta(key, &rec)
	if err != nil {
		if !errors.Is(err, cache.ErrNotFound) {
			s.log.Warn("reading cached package metadata", "provider", p.String(), "version", v.String(), "error", err)
		}
		return nil, false
	}
	if !knownSchema(rec.Schema) {
		return nil, false
	}
	s.memo.put(key, gen, &rec, storedAt)
	return &rec, true
}

// clone returns a deep copy of rec, for adding platforms.
func (rec *PackageRecord) clone() *PackageRecord {
	c := PackageRecord{
		Schema:         recordSchema,
		Version:        rec.Version,
		Sums:           maps.Clone(rec.Sums),
		Documents:      slices.Clone(rec.Documents),
		Archives:       maps.Clone(rec.Archives),
		Missing:        slices.Clone(rec.Missing),
		MissingChecked: maps.Clone(rec.MissingChecked),
		VerifiedAt:     rec.VerifiedAt,
		Provenance:     rec.Provenance,
		Withheld:       rec.Withheld, // never modified
	}
	if c.Sums == nil {
		c.Sums = map[string]string{}
	}
	if c.Archives == nil {
		c.Archives = map[string]ArchiveRecord{}
	}
	return &c
}

// maxPackageRounds bounds how often packageFor joins a fetch of the same
// version's metadata that was for other platforms.
const maxPackageRounds = 32

// packageFor returns the verified package record of version v of p with an
// answer for every platform in need, fetching and verifying what the cache
// lacks. entry is v's version-list entry if the caller has it. Concurrent
// callers for one version share one origin fetch. When the origin fails
// while platforms found missing before are asked for again, the cached
// record is returned as it is. hit says the record was the cached one,
// answering for need without asking the origin.
//
// A cached record without evidence (stored by an earlier release) is
// fetched and verified again, for every platform it has and need; when
// that fails for any reason, or the mirror is offline, it is returned as
// it is, unless evidence is set: then the returned record always has
// evidence, and the error says why there is none (offline: ErrOffline
// and ErrNoEvidence).
func (s *providerRecords) packageFor(ctx context.Context, p addrs.Provider, v versions.Version, need []string, entry *VersionEntry, evidence bool) (rec *PackageRecord, hit bool, err error) {
	start := s.cfg.Now()
	cached, haveCached := s.cachedPackage(p, v)
	if !haveCached {
		cached, haveCached = s.e.shared.sharedPackage(ctx, p, v)
	}
	if haveCached && s.e.withholding.isWithheld(p, cached) {
		// It would shadow the origin's provider (see unsigned.go): the
		// origin's own version is had as if it were not there, and the
		// import is kept inside its record.
		if s.cfg.Offline {
			return nil, false, withheldError(p, v.String())
		}
		cached, haveCached = nil, false
	}
	if haveCached && cached.Provenance == ProvenanceUnsigned {
		// Imported without a signature: nothing to complete it from.
		if evidence {
			return nil, false, fmt.Errorf("%w: %s %s was %s", ErrNoEvidence, p, v, ProvenanceUnsigned)
		}
		s.metrics.CacheLookup("package", true)
		return cached, true, nil
	}
	// old: a record without evidence, which is served only while it
	// cannot be replaced.
	old := haveCached && !cached.hasEvidence()
	if haveCached && (!old || s.cfg.Offline) && cached.covers(need, s.believedMissing(p, cached, time.Time{})) {
		if old && evidence {
			return nil, false, fmt.Errorf("%w: %w: %s %s was cached by an earlier release", ErrOffline, ErrNoEvidence, p, v)
		}
		s.metrics.CacheLookup("package", true)
		return cached, true, nil
	}
	s.metrics.CacheLookup("package", false)
	key := packageKey(p, v)
	// A fetch under way may have been for other platforms than need; then
	// go again. Fetches of one version run one at a time, and a round that
	// leads fetches all of need, so this ends once this caller leads; under
	// many concurrent requests for different platforms that can take a few
	// rounds.
	for range maxPackageRounds {
		res, err := s.e.coalesce(ctx, "package", key, func(ctx context.Context) (any, error) {
			return s.fetchPackage(ctx, p, v, need, entry)
		})
		if err != nil {
			if !haveCached || ctx.Err() != nil {
				return nil, false, err
			}
			stillMissing := func(pl string) bool { return slices.Contains(cached.Missing, pl) }
			switch {
			case old && !evidence && cached.covers(need, stillMissing):
				// The record of an earlier release served as it was
				// served then: whatever the origin says now.
				s.metrics.StaleServed("package")
				s.log.Warn("could not fetch the origin's evidence for package metadata cached by an earlier release; serving it as it is",
					"provider", p.String(), "version", v.String(), "error", err)
				return cached, false, nil
			case !old && cached.covers(need, stillMissing) &&
				!errors.Is(err, discovery.ErrNotFound) && !errors.Is(err, ErrVersionNotFound):
				s.metrics.StaleServed("package")
				s.log.Warn("origin failed asking again for platforms it had no package for; serving cached package metadata",
					"provider", p.String(), "version", v.String(), "error", err)
				return cached, false, nil
			}
			return nil, false, err
		}
		if rec := res.(*PackageRecord); rec.covers(need, s.believedMissing(p, rec, start)) {
			return rec, false, nil
		}
	}
	return nil, false, fmt.Errorf("package metadata for %s %s kept changing while it was fetched", p, v)
}

// fetchPackage fetches the package metadata of the platforms in need that
// the stored record lacks, verifies them against the version's signed
// SHA256SUMS, which must be that of p's type and version v, under the
// name derived for each platform, whose filename, os and arch the answer
// must give (see signednames.go), and their OpenTofu "packages" hashes as
// far as they can be checked (see checkPackageHashes), and stores the
// merged record with the
// evidence. Nothing is stored unless every check passed. A stored record without evidence is
// replaced by a new one for its platforms and need, whose archives must
// have the sha256 they had.
func (s *providerRecords) fetchPackage(ctx context.Context, p addrs.Provider, v versions.Version, need []string, entry *VersionEntry) (*PackageRecord, error) {
	rec, ok := s.cachedPackage(p, v)
	if ok && s.e.withholding.isWithheld(p, rec) {
		rec, ok = nil, false // a withheld import: set aside inside the origin's record when it is stored
	}
	var old *PackageRecord // a record without evidence being replaced
	switch {
	case ok && !rec.hasEvidence():
		old = rec
		need = slices.Clone(need)
		for _, pl := range sortedKeys(old.Archives) {
			if !slices.Contains(need, pl) {
				need = append(need, pl)
			}
		}
		fallthrough
	case !ok:
		rec = &PackageRecord{Schema: recordSchema, Version: v.String(), Archives: map[string]ArchiveRecord{}, Sums: map[string]string{}}
	default:
		rec = rec.clone() // the cached one is shared
	}
	believed := s.believedMissing(p, rec, time.Time{})
	var missing []string
	for _, pl := range need {
		if _, ok := rec.Archives[pl]; !ok && !believed(pl) {
			missing = append(missing, pl)
		}
	}
	if len(missing) == 0 {
		return rec, nil
	}
	if entry == nil {
		e, _, err := s.versionEntry(ctx, p, v)
		if err != nil {
			return nil, err
		}
		entry = &e
	}
	// Platforms the version list does not offer are not asked for.
	var unlisted []string
	missing = slices.DeleteFunc(missing, func(pl string) bool {
		if !slices.Contains(entry.Platforms, pl) {
			unlisted = append(unlisted, pl)
			return true
		}
		return false
	})

	pkgs, notFound, err := s.fetchPackageMeta(ctx, p, entry.originVersion(), missing)
	if err != nil {
		return nil, err
	}
	// Another spelling of the version may have what the first lacks: a
	// platform is missing only once every spelling said so.
	for _, alias := range entry.Aliases {
		if len(notFound) == 0 {
			break
		}
		more, still, err := s.fetchPackageMeta(ctx, p, alias, notFound)
		if err != nil {
			return nil, err
		}
		maps.Copy(pkgs, more)
		notFound = still
	}
	for _, pl := range notFound {
		s.log.Warn("origin lists a platform it has no package for", "provider", p.String(), "version", v.String(), "platform", pl)
	}
	notFound = append(notFound, unlisted...)
	for _, pl := range notFound {
		if _, ok := old.archive(pl); ok {
			// Served since an earlier release cached it: it stays so,
			// without evidence, rather than vanish.
			return nil, fmt.Errorf("%s %s: the origin no longer offers the package for %s that an earlier release cached", p, v, pl)
		}
	}
	sums := map[int]map[string]string{} // parsed Documents, by index
	for _, pl := range missing {
		pkg, ok := pkgs[pl]
		if !ok {
			continue
		}
		doc, err := s.sumsDocument(ctx, p, rec, pkg, sums)
		if err != nil {
			return nil, s.refuse(p, v, pl, err)
		}
		// The name is derived, never read from the answer (signednames.go).
		rel, err := releaseOf(p.Type, v, sums[doc])
		if err != nil {
			return nil, s.refuse(p, v, pl, err)
		}
		name, sha, err := rel.signedPackage(pl, pkg.Filename, pkg.OS, pkg.Arch, pkg.SHASum)
		if err != nil {
			return nil, s.refuse(p, v, pl, err)
		}
		if err := checkPackageHashes(pkg.Packages, name, rel, s.h1); err != nil {
			return nil, s.refuse(p, v, pl, err)
		}
		a := ArchiveRecord{
			Filename: name,
			URL:      pkg.DownloadURL,
			SHA256:   sha,
			Evidence: &PackageEvidence{
				Protocols: pkg.Protocols,
				OS:        pkg.OS,
				Arch:      pkg.Arch,
				Shasum:    pkg.SHASum,
				Packages:  pkg.Packages,
				Document:  doc,
			},
		}
		if was, ok := old.archive(pl); ok && was.SHA256 != a.SHA256 {
			return nil, s.refuse(p, v, pl, &verify.Error{Reason: verify.ReasonChecksum,
				Detail: fmt.Sprintf("the origin's signed sha256 of %s is %s now, but was %s when it was cached", a.Filename, a.SHA256, was.SHA256)})
		}
		rec.Archives[pl] = a
	}
	// Findings of missing platforms, old and new, are made again.
	rec.Missing = slices.DeleteFunc(rec.Missing, func(pl string) bool {
		return slices.Contains(missing, pl) || slices.Contains(unlisted, pl)
	})
	if rec.MissingChecked == nil {
		rec.MissingChecked = map[string]missingCheck{}
	}
	for _, pl := range missing {
		delete(rec.MissingChecked, pl)
	}
	check := missingCheck{At: s.cfg.Now(), List: s.listStoredAt(p)}
	for _, pl := range notFound {
		rec.Missing = append(rec.Missing, pl)
		rec.MissingChecked[pl] = check
	}
	slices.Sort(rec.Missing)
	rec.VerifiedAt = s.cfg.Now().UTC()
	// The withheld import set aside is the one the cache holds now (a
	// prune naming the version may have removed it while this fetch ran),
	// whichever record held it: it cannot be fetched again.
	rec.Withheld = nil
	if cur, ok := s.cachedPackage(p, v); ok {
		if s.e.withholding.isWithheld(p, cur) {
			rec.Withheld = cur
		} else {
			rec.Withheld = cur.Withheld
		}
	}
	err = s.store.PutMeta(packageKey(p, v), rec)
	s.memo.forget(packageKey(p, v))
	if err != nil {
		s.metrics.CacheWriteFailed()
		s.log.Error("storing package metadata", "provider", p.String(), "version", v.String(), "error", err)
	}
	// The import is this mirror's: imported records stay out of the
	// shared tier.
	shared := rec
	if rec.Withheld != nil {
		shared = rec.clone()
		shared.Withheld = nil
	}
	s.e.shared.putShared(packageKey(p, v), shared)
	return rec, nil
}

// archive returns the archive record of platform pl; none when rec is nil.
func (rec *PackageRecord) archive(pl string) (ArchiveRecord, bool) {
	if rec == nil {
		return ArchiveRecord{}, false
	}
	a, ok := rec.Archives[pl]
	return a, ok
}

// sumsDocument returns the index in rec.Documents of the SHA256SUMS
// document pkg refers to, verified with pkg's signing keys, adding it to
// rec (and its lines to rec.Sums) if need be, and sets sums[index] to its
// parsed lines. A document rec already has is not fetched again; when
// pkg gives other keys than those it was verified with, the stored bytes
// are verified with pkg's keys and kept again with them, so that every
// platform refers to a document its own keys verify.
func (s *providerRecords) sumsDocument(ctx context.Context, p addrs.Provider, rec *PackageRecord, pkg *discovery.Package, sums map[int]map[string]string) (int, error) {
	var known *SumsDocument
	for i := range rec.Documents {
		d := &rec.Documents[i]
		if d.URL != pkg.SHASumsURL || d.SignatureURL != pkg.SHASumsSignatureURL {
			continue
		}
		if slices.Equal(d.SigningKeys, pkg.SigningKeys) {
			if sums[i] == nil {
				parsed, err := verify.ParseSHA256SUMS(d.Content)
				if err != nil {
					return 0, err
				}
				sums[i] = parsed
			}
			return i, nil
		}
		known = d
	}
	doc := SumsDocument{URL: pkg.SHASumsURL, SignatureURL: pkg.SHASumsSignatureURL, SigningKeys: pkg.SigningKeys}
	if known != nil {
		doc.Content, doc.Signature = known.Content, known.Signature
	} else {
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() (err error) {
			doc.Content, err = s.origin.FetchDocument(gctx, p, pkg.SHASumsURL, maxSumsBytes)
			return err
		})
		g.Go(func() (err error) {
			doc.Signature, err = s.origin.FetchDocument(gctx, p, pkg.SHASumsSignatureURL, maxSignatureBytes)
			return err
		})
		if err := g.Wait(); err != nil {
			return 0, err
		}
	}
	if err := verify.CheckSignature(doc.Content, doc.Signature, armoredKeys(doc.SigningKeys)); err != nil {
		return 0, err
	}
	parsed, err := verify.ParseSHA256SUMS(doc.Content)
	if err != nil {
		return 0, err
	}
	for name, sum := range parsed {
		if old, ok := rec.Sums[name]; ok && old != sum {
			return 0, &verify.Error{Reason: verify.ReasonChecksum,
				Detail: fmt.Sprintf("SHA256SUMS documents of one version disagree about %s", name)}
		}
	}
	maps.Copy(rec.Sums, parsed)
	rec.Documents = append(rec.Documents, doc)
	i := len(rec.Documents) - 1
	sums[i] = parsed
	return i, nil
}

// armoredKeys returns the ASCII-armored public keys of keys.
func armoredKeys(keys []registryjson.GPGPublicKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.ASCIIArmor
	}
	return out
}

// fetchPackageMeta asks the origin for the package of each platform, a few
// at a time. Platforms the origin has no package for are returned in notFound.
// It returns once every request it started has ended.
func (s *providerRecords) fetchPackageMeta(ctx context.Context, p addrs.Provider, version string, platforms []string) (map[string]*discovery.Package, []string, error) {
	// Every name is checked before the first request starts, so that no
	// return path leaves a request running.
	parsed := make([]addrs.Platform, len(platforms))
	for i, name := range platforms {
		pl, err := addrs.ParsePlatform(name)
		if err != nil {
			return nil, nil, err
		}
		parsed[i] = pl
	}
	var (
		mu       sync.Mutex
		pkgs     = make(map[string]*discovery.Package, len(platforms))
		notFound []string
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(packageFetchConcurrency)
	for i, name := range platforms {
		pl := parsed[i]
		g.Go(func() error {
			pkg, err := s.origin.Package(gctx, p, version, pl)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, discovery.ErrNotFound):
				notFound = append(notFound, name)
				return nil
			case err != nil:
				return err
			}
			pkgs[name] = pkg
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return pkgs, notFound, nil
}

// refuse logs and counts a package that failed verification and returns
// err for the client.
func (s *providerRecords) refuse(p addrs.Provider, v versions.Version, platform string, err error) error {
	var verr *verify.Error
	if errors.As(err, &verr) {
		s.metrics.VerificationFailed(string(verr.Reason))
		s.log.Error("provider package failed verification; nothing was cached",
			"provider", p.String(), "version", v.String(), "platform", platform, "reason", string(verr.Reason), "error", err)
		return fmt.Errorf("%s %s %s: %w", p, v, platform, err)
	}
	return err
}

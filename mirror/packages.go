package mirror

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

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/originguard"
	"github.com/tfmirror/tfmirror/v2/mirror/providerlists"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/verify"
)

const (
	// packageFetchConcurrency bounds parallel package-metadata requests to
	// one origin for one version.
	packageFetchConcurrency = 4
)

// believedMissing returns a function that reports whether rec's finding
// that the origin has no package for a platform still holds. A finding is
// believed for VersionsTTL, and only while the cached version list is the
// one it was made with: after either the origin is asked again, so a
// package the origin adds (or a failure it repairs) is seen, at most once
// per TTL or list refresh. A finding made at or after since is believed
// regardless (it answers a request made since). A sealed mirror believes
// every finding, as it cannot ask.
func (s *providerRecords) believedMissing(k records.ProviderKeys, rec *records.PackageRecord, since time.Time) func(pl string) bool {
	var (
		listRead bool
		listAt   time.Time
	)
	return func(pl string) bool {
		if !slices.Contains(rec.Missing, pl) {
			return false
		}
		if s.cfg.Offline || s.hosts.Local(k.Provider.Hostname) {
			return true
		}
		c, ok := rec.MissingChecked[pl]
		switch {
		case !ok:
			return false
		case !since.IsZero() && !c.At.Before(since):
			return true
		case !records.Fresh(s.cfg.Now(), c.At, s.cfg.VersionsTTL):
			return false
		}
		if !listRead {
			listAt, listRead = s.listStoredAt(k.Versions), true
		}
		return listAt.Equal(c.List)
	}
}

// providerRecords is the provider side of the engine's records: version
// lists and package records, each fetched from the origin once however
// many callers ask (through the engine's coalescing, on its context),
// verified with its evidence, stored, and read back through the memo.
type providerRecords struct {
	life        *lifetime.Lifetime // coalescing, the work Shutdown waits for
	hosts       *originguard.Hosts
	withholding *unsigned.Withholding
	gate        *gate.Gate           // the package policy and release times
	lists       *providerlists.Lists // the providers' version lists
	platforms   platformSet
	source      recordSource // the package records, read and written in one line of calls (mirror/stored.Source)
	cfg         *Config      // the engine's, defaults filled in
	origin      ProviderOrigin
	store       Store
	memo        *stored.Records
	log         *slog.Logger
	metrics     Metrics
}

// listStoredAt returns when the cached version list under key was
// stored, or the zero time when there is none.
func (s *providerRecords) listStoredAt(key string) time.Time {
	_, storedAt, err := s.memo.CachedVersions(key)
	if err != nil {
		return time.Time{}
	}
	return storedAt
}

// maxPackageRounds bounds how often packageFor joins a fetch of the same
// version's metadata that was for other platforms.
const maxPackageRounds = 32

// packageFor returns the verified package record of the version k names
// with an answer for every platform in need, fetching and verifying what
// the cache lacks. entry is the version's version-list entry if the caller
// has it. The record is read once, and handed to the fetch with when it
// was read (storedRead). Concurrent
// callers for one version share one origin fetch. When the origin fails
// while platforms found missing before are asked for again, the cached
// record is returned as it is. hit says the record was the cached one,
// answering for need without asking the origin.
//
// A cached record without evidence (stored by an earlier release) is
// fetched and verified again, for every platform it has and need; when
// that fails for any reason, or the mirror is offline, it is returned as
// it is, unless evidence is set: then the returned record always has
// evidence, and the error says why there is none (offline: records.ErrOffline
// and records.ErrNoEvidence).
func (s *providerRecords) packageFor(ctx context.Context, k records.VersionKeys, need []string, entry *records.VersionEntry, evidence bool) (rec *records.PackageRecord, hit bool, err error) {
	p, v := k.Provider, k.Version
	start := s.cfg.Now()
	read := storedRead{gen: s.memo.Generation()}
	read.rec, read.ok = s.source.Package(ctx, k)
	cached, haveCached := read.rec, read.ok
	if haveCached && s.withholding.IsWithheld(p, cached) {
		// It would shadow the origin's provider (see unsigned.go): the
		// origin's own version is had as if it were not there, and the
		// import is kept inside its record.
		if s.cfg.Offline {
			return nil, false, unsigned.Error(p, v.String())
		}
		cached, haveCached = nil, false
	}
	if haveCached && cached.Provenance == records.ProvenanceUnsigned {
		// Imported without a signature: nothing to complete it from.
		if evidence {
			return nil, false, fmt.Errorf("%w: %s %s was %s", records.ErrNoEvidence, p, v, records.ProvenanceUnsigned)
		}
		s.metrics.CacheLookup("package", true)
		return cached, true, nil
	}
	// old: a record without evidence, which is served only while it
	// cannot be replaced.
	old := haveCached && !cached.HasEvidence()
	covered := func() bool {
		return haveCached && (!old || s.cfg.Offline) && cached.Covers(need, s.believedMissing(k.ProviderKeys, cached, time.Time{}))
	}
	if !covered() {
		need, entry = s.offeredOnly(ctx, k, need, entry, cached)
	}
	if covered() {
		if old && evidence {
			return nil, false, fmt.Errorf("%w: %w: %s %s was cached by an earlier release", records.ErrOffline, records.ErrNoEvidence, p, v)
		}
		s.metrics.CacheLookup("package", true)
		return cached, true, nil
	}
	s.metrics.CacheLookup("package", false)
	// A fetch under way may have been for other platforms than need; then
	// go again. Fetches of one version run one at a time, and a round that
	// leads fetches all of need, so this ends once this caller leads; under
	// many concurrent requests for different platforms that can take a few
	// rounds.
	for range maxPackageRounds {
		res, err := s.life.Coalesce(ctx, "package", k.Package, func(ctx context.Context) (any, error) {
			return s.fetchPackage(ctx, k, need, entry, read)
		})
		if errors.Is(err, lifetime.ErrWritten) && ctx.Err() == nil {
			continue // an import's write given up before its turn: go again
		}
		if err != nil {
			if !haveCached || ctx.Err() != nil {
				return nil, false, err
			}
			stillMissing := func(pl string) bool { return slices.Contains(cached.Missing, pl) }
			switch {
			case old && !evidence && cached.Covers(need, stillMissing):
				// The record of an earlier release served as it was
				// served then: whatever the origin says now.
				s.metrics.StaleServed("package")
				s.life.LogStale(s.log, "could not fetch the origin's evidence for package metadata cached by an earlier release; serving it as it is",
					"provider", p.String(), "version", v.String(), "error", err)
				return cached, false, nil
			case !old && cached.Covers(need, stillMissing) &&
				!errors.Is(err, discovery.ErrNotFound) && !errors.Is(err, records.ErrVersionNotFound):
				s.metrics.StaleServed("package")
				s.life.LogStale(s.log, "origin failed asking again for platforms it had no package for; serving cached package metadata",
					"provider", p.String(), "version", v.String(), "error", err)
				return cached, false, nil
			}
			return nil, false, err
		}
		if rec := res.(*records.PackageRecord); rec.Covers(need, s.believedMissing(k.ProviderKeys, rec, start)) {
			return rec, false, nil
		}
	}
	return nil, false, fmt.Errorf("package metadata for %s %s kept changing while it was fetched", p, v)
}

// heldWhenUnasked returns the cached record of the version k names for
// an answer of every platform (platforms nil, Engine.Package) that failed
// with err because the origin could not be asked for the platforms the
// record lacks (it failed, or the engine is sealed), so that the
// platforms it holds, verified when they were cached, are answered (a
// version installed through the registry protocol, which caches one
// platform's metadata, is so installed through the network mirror too);
// nil when there is none, platforms are named, or err is an answer of the
// origin's (no such version or provider) or no fault of it (the caller
// left, the engine shuts down).
func (s *providerRecords) heldWhenUnasked(ctx context.Context, k records.VersionKeys, platforms []addrs.Platform, err error) *records.PackageRecord {
	if platforms != nil || ctx.Err() != nil || errors.Is(err, discovery.ErrNotFound) ||
		errors.Is(err, records.ErrVersionNotFound) || errors.Is(err, records.ErrShutDown) {
		return nil
	}
	rec, ok := s.source.Package(ctx, k)
	if !ok || len(rec.Archives) == 0 || s.withholding.IsWithheld(k.Provider, rec) {
		return nil
	}
	s.metrics.StaleServed("package")
	s.life.LogStale(s.log, "could not ask the origin for every platform of a version; answering the platforms cached",
		"provider", k.Name, "version", k.Version.String(), "error", err)
	return rec
}

// offeredOnly returns need without the platforms that the version's list
// entry (entry, read when nil) does not offer and that cached (nil: none)
// has no archive of, and the entry: those have no package, and are
// neither asked for nor stored in the record as found missing, so that
// platform names a client makes up do not grow the version's record.
// When the entry cannot be read, need and entry are returned as they
// are (the fetch reads it, and fails as it did).
func (s *providerRecords) offeredOnly(ctx context.Context, k records.VersionKeys, need []string, entry *records.VersionEntry, cached *records.PackageRecord) ([]string, *records.VersionEntry) {
	if entry == nil {
		e, _, _, err := s.lists.Entry(ctx, k)
		if err != nil {
			return need, nil
		}
		entry = &e
	}
	return slices.DeleteFunc(slices.Clone(need), func(pl string) bool {
		_, held := cached.Archive(pl)
		return !held && !slices.Contains(entry.Platforms, pl)
	}), entry
}

// fetchPackage fetches the package metadata of the platforms in need that
// the stored record lacks, verifies them against the version's signed
// SHA256SUMS, which must be that of p's type and version v, under the
// name derived for each platform, whose filename, os and arch the answer
// must give (see signednames.go), and their OpenTofu "packages" hashes as
// far as they can be checked (see records.CheckPackageHashes), and stores the
// merged record with the
// evidence. Nothing is stored unless every check passed. A stored record without evidence is
// replaced by a new one for its platforms and need, whose archives must
// have the sha256 they had. read is the stored record as the caller
// read it, read again only when something was stored since.
func (s *providerRecords) fetchPackage(ctx context.Context, k records.VersionKeys, need []string, entry *records.VersionEntry, read storedRead) (*records.PackageRecord, error) {
	p, v := k.Provider, k.Version
	// The fetch is coalesced: another caller's fetch of this version may
	// have stored the record since the caller read it (or this caller's
	// round before this one did).
	read = read.now(s.memo, k)
	rec, ok := read.rec, read.ok
	if ok && s.withholding.IsWithheld(p, rec) {
		rec, ok = nil, false // a withheld import: set aside inside the origin's record when it is stored
	}
	var old *records.PackageRecord // a record without evidence being replaced
	switch {
	case ok && !rec.HasEvidence():
		old = rec
		need = slices.Clone(need)
		for _, pl := range sortedKeys(old.Archives) {
			if !slices.Contains(need, pl) {
				need = append(need, pl)
			}
		}
		fallthrough
	case !ok:
		rec = &records.PackageRecord{Schema: records.Schema, Version: v.String(), Archives: map[string]records.ArchiveRecord{}, Sums: map[string]string{}}
	default:
		rec = rec.Clone() // the cached one is shared
	}
	believed := s.believedMissing(k.ProviderKeys, rec, time.Time{})
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
		e, _, _, err := s.lists.Entry(ctx, k)
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

	pkgs, notFound, err := s.fetchPackageMeta(ctx, p, entry.OriginVersion(), missing)
	if err != nil {
		return nil, err
	}
	// Another spelling of the version may have what the first lacks: a
	// platform is missing only once every spelling said so. The other
	// spellings are asked, in all, for no more platforms than a version
	// keeps (records.MaxPlatforms), so that an origin listing every
	// platform under every spelling, with a package for none, is not
	// asked once per platform and spelling; a platform left unasked is
	// missing as the others are.
	budget := records.MaxPlatforms
	for _, alias := range entry.Aliases {
		if len(notFound) == 0 || budget == 0 {
			break
		}
		ask := notFound[:min(len(notFound), budget)]
		budget -= len(ask)
		more, still, err := s.fetchPackageMeta(ctx, p, alias, ask)
		if err != nil {
			return nil, err
		}
		maps.Copy(pkgs, more)
		notFound = append(still, notFound[len(ask):]...)
	}
	if len(notFound) > 0 {
		// One line per fetch, however many platforms: an origin may list
		// as many as a version keeps (records.MaxPlatforms).
		named := slices.Sorted(slices.Values(notFound))
		if len(named) > 3 {
			named = named[:3]
		}
		s.log.Warn("origin lists platforms it has no package for", "provider", p.String(), "version", v.String(), "platforms", len(notFound), "examples", named)
	}
	notFound = append(notFound, unlisted...)
	for _, pl := range notFound {
		if _, ok := old.Archive(pl); ok {
			// Served since an earlier release cached it: it stays so,
			// without evidence, rather than vanish.
			return nil, fmt.Errorf("%s %s: the origin no longer offers the package for %s that an earlier release cached", p, v, pl)
		}
	}
	sums := map[int]map[string]string{} // parsed Documents, by index
	rels := map[int]records.Release{}   // the release each parsed Document is, by index
	for _, pl := range missing {
		pkg, ok := pkgs[pl]
		if !ok {
			continue
		}
		// The name is derived, never read from the answer (signednames.go),
		// from the release the document is, found once for all the
		// platforms it names. A stored document serves when it names the
		// platform as the answer does: else the origin's is fetched again
		// (it may name a platform added since).
		var found struct {
			doc       int
			name, sha string
		}
		covers := func(i int, parsed map[string]string) bool {
			rel, ok := rels[i]
			if !ok {
				var err error
				if rel, err = records.ReleaseOf(p.Type, v, parsed); err != nil {
					return false
				}
				if i >= 0 {
					rels[i] = rel
				}
			}
			name, sha, err := rel.SignedPackage(pl, pkg.Filename, pkg.OS, pkg.Arch, pkg.SHASum)
			found.doc, found.name, found.sha = i, name, sha
			return err == nil
		}
		found.doc = -1
		doc, err := s.sumsDocument(ctx, p, rec, pkg, sums, covers)
		if err != nil {
			return nil, s.refuse(p, v, pl, err)
		}
		if found.doc != doc || found.name == "" {
			// A document fetched now.
			rel, ok := rels[doc]
			if !ok {
				if rel, err = records.ReleaseOf(p.Type, v, sums[doc]); err != nil {
					return nil, s.refuse(p, v, pl, err)
				}
				rels[doc] = rel
			}
			if found.name, found.sha, err = rel.SignedPackage(pl, pkg.Filename, pkg.OS, pkg.Arch, pkg.SHASum); err != nil {
				return nil, s.refuse(p, v, pl, err)
			}
		}
		name, sha, rel := found.name, found.sha, rels[doc]
		if err := records.CheckPackageHashes(pkg.Packages, name, rel, s.memo.H1); err != nil {
			return nil, s.refuse(p, v, pl, err)
		}
		a := records.ArchiveRecord{
			Filename: name,
			URL:      pkg.DownloadURL,
			SHA256:   sha,
			Evidence: &records.PackageEvidence{
				Protocols: pkg.Protocols,
				OS:        pkg.OS,
				Arch:      pkg.Arch,
				Shasum:    pkg.SHASum,
				Packages:  pkg.Packages,
				Document:  doc,
			},
		}
		if was, ok := old.Archive(pl); ok && was.SHA256 != a.SHA256 {
			return nil, s.refuse(p, v, pl, &verify.Error{Reason: verify.ReasonChecksum,
				Detail: fmt.Sprintf("the origin's signed sha256 of %s is %s now, but was %s when it was cached", a.Filename, a.SHA256, was.SHA256)})
		}
		rec.Archives[pl] = a
	}
	// Findings of missing platforms, old and new, are made again. Those
	// of platforms the list does not offer go (an earlier release stored
	// one for any name a client asked for): such a platform is answered
	// from the list (offeredOnly), and only this fetch's are kept.
	rec.Missing = slices.DeleteFunc(rec.Missing, func(pl string) bool {
		return slices.Contains(missing, pl) || !slices.Contains(entry.Platforms, pl)
	})
	if rec.MissingChecked == nil {
		rec.MissingChecked = map[string]records.MissingCheck{}
	}
	maps.DeleteFunc(rec.MissingChecked, func(pl string, _ records.MissingCheck) bool {
		return !slices.Contains(rec.Missing, pl)
	})
	if len(notFound) > 0 {
		check := records.MissingCheck{At: s.cfg.Now(), List: s.listStoredAt(k.Versions)}
		for _, pl := range notFound {
			rec.Missing = append(rec.Missing, pl)
			rec.MissingChecked[pl] = check
		}
	}
	slices.Sort(rec.Missing)
	rec.VerifiedAt = s.cfg.Now().UTC()
	// The withheld import set aside is the one the cache holds now (a
	// prune naming the version may have removed it while this fetch ran),
	// whichever record held it: it cannot be fetched again. The record
	// read before the fetch is read again only when something was
	// stored since.
	rec.Withheld = nil
	if cur := read.now(s.memo, k); cur.ok {
		if s.withholding.IsWithheld(p, cur.rec) {
			rec.Withheld = cur.rec
		} else {
			rec.Withheld = cur.rec.Withheld
		}
	}
	// No platform stored meanwhile is written over: the writers that add
	// to a version's record (this fetch, an import's record,
	// mirror/imports.Importer.storeImported) all store it through the
	// version's coalesced fetch (lifetime.Lifetime.Coalesce under
	// k.Package), so they run one at a time and each reads what the one
	// before stored. The import lock is not taken here: an import holds
	// it while it waits for this fetch to end.
	//
	// The import is this mirror's: imported records stay out of the
	// shared tier (which puts the record there without it).
	if err := s.source.Put(k.Package, rec); err != nil {
		s.metrics.CacheWriteFailed()
		s.log.Log(context.Background(), cache.WriteFailureLevel(err), "storing package metadata", "provider", p.String(), "version", v.String(), "error", err)
	}
	return rec, nil
}

// storedRead is a version's package record as read from the stored
// records (ok: there is one), with the memo's generation taken before the
// read: every write of a record advances it (mirror/stored.Records.Forget),
// so while it stands the read is what the cache holds.
type storedRead struct {
	rec *records.PackageRecord
	ok  bool
	gen uint64
}

// now returns r while nothing has been stored since it was read, else
// the record the cache holds now.
func (r storedRead) now(memo *stored.Records, k records.VersionKeys) storedRead {
	gen := memo.Generation()
	if gen == r.gen {
		return r
	}
	cur := storedRead{gen: gen}
	cur.rec, cur.ok = memo.CachedPackageAt(k)
	return cur
}

// sumsDocument returns the index in rec.Documents of the SHA256SUMS
// document pkg refers to, verified with pkg's signing keys, adding it to
// rec (and its lines to rec.Sums) if need be, and sets sums[index] to its
// parsed lines. A document rec already has (the newest of those at
// pkg's URLs) is not fetched again while it covers the platform pkg is
// the answer of (covers, of its parsed lines); when pkg gives other keys
// than those it was verified with, the stored bytes are verified with
// pkg's keys and kept again with them, so that every platform refers to
// a document its own keys verify. Otherwise (a platform the origin added
// since, its document signed again; a key the origin rotated, its
// documents signed again with the new one) the document is fetched
// again from the origin and added: the platforms cached before keep
// theirs. covers is given the index of the stored document it judges, -1
// for one not kept under its own keys yet.
func (s *providerRecords) sumsDocument(ctx context.Context, p addrs.Provider, rec *records.PackageRecord, pkg *discovery.Package, sums map[int]map[string]string, covers func(int, map[string]string) bool) (int, error) {
	var known *records.SumsDocument
	for i := len(rec.Documents) - 1; i >= 0; i-- {
		d := &rec.Documents[i]
		if d.URL != pkg.SHASumsURL || d.SignatureURL != pkg.SHASumsSignatureURL {
			continue
		}
		if !slices.Equal(d.SigningKeys, pkg.SigningKeys) {
			if known == nil {
				known = d
			}
			continue
		}
		if sums[i] == nil {
			parsed, err := verify.ParseSHA256SUMS(d.Content)
			if err != nil {
				return 0, err
			}
			sums[i] = parsed
		}
		if covers(i, sums[i]) {
			return i, nil
		}
	}
	doc := records.SumsDocument{URL: pkg.SHASumsURL, SignatureURL: pkg.SHASumsSignatureURL, SigningKeys: pkg.SigningKeys}
	if known != nil && verify.CheckSignature(known.Content, known.Signature, records.ArmoredKeys(doc.SigningKeys)) == nil {
		if parsed, err := verify.ParseSHA256SUMS(known.Content); err == nil && covers(-1, parsed) {
			doc.Content, doc.Signature = known.Content, known.Signature
		}
	}
	if doc.Content == nil {
		var err error
		if doc.Content, doc.Signature, err = s.origin.FetchSums(ctx, p, pkg, records.MaxSumsBytes, records.MaxSignatureBytes); err != nil {
			return 0, err
		}
	}
	if err := verify.CheckSignature(doc.Content, doc.Signature, records.ArmoredKeys(doc.SigningKeys)); err != nil {
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
	g, gctx := workgroup.WithContext(ctx, s.log, "provider", p.String(), "version", version, "step", "platforms")
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

// refuse logs and counts a package that failed verification, tells
// Config.OriginRefused, and returns err for the client.
func (s *providerRecords) refuse(p addrs.Provider, v versions.Version, platform string, err error) error {
	err = failure.RefusePackage(s.log, s.metrics, p, v, platform, err)
	var verr *verify.Error
	if s.cfg.OriginRefused != nil && errors.As(err, &verr) {
		s.cfg.OriginRefused(string(p.Hostname), string(verr.Reason))
	}
	return err
}

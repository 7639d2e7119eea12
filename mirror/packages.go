package mirror

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"golang.org/x/sync/errgroup"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
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
// each platform, where its archive is and its sha256, checked against a
// SHA256SUMS document whose signature verified. Once stored its archives
// never change, except that platforms not yet fetched may be added, and
// platforms the origin had no package for are asked for again (see
// believedMissing) and may then be added.
type PackageRecord struct {
	// Schema is the record's layout (recordSchema when written).
	Schema  int    `json:"schema"`
	Version string `json:"version"`
	// Sums is the verified SHA256SUMS content: file name -> sha256.
	Sums map[string]string `json:"sums"`
	// SumsURLs are the SHA256SUMS documents verified into Sums.
	SumsURLs []string `json:"sums_urls"`
	// Archives are the verified packages by os_arch.
	Archives map[string]ArchiveRecord `json:"archives"`
	// Missing are platforms the origin listed but has no package for.
	Missing []string `json:"missing,omitempty"`
	// MissingChecked says when each platform in Missing was last found
	// missing. A platform without an entry (records stored before it was
	// kept) is asked for again.
	MissingChecked map[string]missingCheck `json:"missing_checked,omitempty"`
	VerifiedAt     time.Time               `json:"verified_at"`
}

// missingCheck is one finding that the origin has no package for a platform.
type missingCheck struct {
	At time.Time `json:"at"` // by Config.Now
	// List is when the version list in the cache then was stored (zero
	// when there was none): the finding holds for that list only.
	List time.Time `json:"list"`
}

// ArchiveRecord is the verified package of one platform: the origin's
// file name and download URL, and the sha256 of the archive.
type ArchiveRecord struct {
	Filename string `json:"filename"`
	URL      string `json:"url"`
	SHA256   string `json:"sha256"`
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
func (s *Engine) believedMissing(p discovery.Provider, rec *PackageRecord, since time.Time) func(pl string) bool {
	var (
		listRead bool
		listAt   time.Time
	)
	return func(pl string) bool {
		if !slices.Contains(rec.Missing, pl) {
			return false
		}
		if s.cfg.Offline {
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

// listStoredAt returns when p's cached version list was stored, or the
// zero time when there is none.
func (s *Engine) listStoredAt(p discovery.Provider) time.Time {
	_, storedAt, err := s.cachedVersions(versionsKey(p))
	if err != nil {
		return time.Time{}
	}
	return storedAt
}

func packageKey(p discovery.Provider, v versions.Version) string {
	return "package/" + p.String() + "/" + v.String()
}

// versionEntry finds version v in p's version list, and says where the
// list came from, refreshing a list that lacks it (a release newer than
// the cached list). Only a list that the origin answered lately says that
// v does not exist (ErrVersionNotFound): when the list could not be
// refreshed the error is why, and offline it is ErrOffline.
func (s *Engine) versionEntry(ctx context.Context, p discovery.Provider, v versions.Version) (VersionEntry, listState, error) {
	list, st, err := s.versions(ctx, p, false)
	if err != nil {
		return VersionEntry{}, listState{}, err
	}
	if e, ok := list.Find(v); ok {
		return e, st, nil
	}
	if !st.stale && !st.fetched && s.cfg.Now().Sub(st.storedAt) >= minForcedRefresh {
		list, st, err = s.versions(ctx, p, true)
		if err != nil {
			return VersionEntry{}, listState{}, err
		}
		if e, ok := list.Find(v); ok {
			return e, st, nil
		}
	}
	switch {
	case st.stale:
		return VersionEntry{}, listState{}, fmt.Errorf("%s has no version %s in its cached version list, which could not be refreshed: %w", p, v, st.err)
	case s.cfg.Offline:
		return VersionEntry{}, listState{}, fmt.Errorf("%w: %s has no version %s in its cached version list", ErrOffline, p, v)
	}
	return VersionEntry{}, listState{}, fmt.Errorf("%w: %s has no version %s", ErrVersionNotFound, p, v)
}

// h1 returns the h1: hash of a cached archive, or "" when it is not cached.
func (s *Engine) h1(sha string) string {
	info, err := s.store.StatBlob(sha)
	if err != nil {
		return ""
	}
	return info.H1
}

// cachedPackage returns the stored record for v, if any, from memory when
// it was read before. The record must not be modified (see clone).
func (s *Engine) cachedPackage(p discovery.Provider, v versions.Version) (*PackageRecord, bool) {
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
		SumsURLs:       slices.Clone(rec.SumsURLs),
		Archives:       maps.Clone(rec.Archives),
		Missing:        slices.Clone(rec.Missing),
		MissingChecked: maps.Clone(rec.MissingChecked),
		VerifiedAt:     rec.VerifiedAt,
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
func (s *Engine) packageFor(ctx context.Context, p discovery.Provider, v versions.Version, need []string, entry *VersionEntry) (rec *PackageRecord, hit bool, err error) {
	start := s.cfg.Now()
	cached, haveCached := s.cachedPackage(p, v)
	if haveCached && cached.covers(need, s.believedMissing(p, cached, time.Time{})) {
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
		res, err := s.coalesce(ctx, "package", key, func(ctx context.Context) (any, error) {
			return s.fetchPackage(ctx, p, v, need, entry)
		})
		if err != nil {
			stillMissing := func(pl string) bool { return slices.Contains(cached.Missing, pl) }
			if haveCached && cached.covers(need, stillMissing) && ctx.Err() == nil &&
				!errors.Is(err, discovery.ErrNotFound) && !errors.Is(err, ErrVersionNotFound) {
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
// SHA256SUMS, and stores the merged record. Nothing is stored unless every
// check passed.
func (s *Engine) fetchPackage(ctx context.Context, p discovery.Provider, v versions.Version, need []string, entry *VersionEntry) (*PackageRecord, error) {
	rec, ok := s.cachedPackage(p, v)
	if !ok {
		rec = &PackageRecord{Schema: recordSchema, Version: v.String(), Archives: map[string]ArchiveRecord{}, Sums: map[string]string{}}
	}
	rec = rec.clone() // the cached one is shared
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
	for _, pl := range missing {
		pkg, ok := pkgs[pl]
		if !ok {
			continue
		}
		if !slices.Contains(rec.SumsURLs, pkg.SHASumsURL) {
			sums, err := s.fetchSums(ctx, p, pkg)
			if err != nil {
				return nil, s.refuse(p, v, pl, err)
			}
			for name, sum := range sums {
				if old, ok := rec.Sums[name]; ok && old != sum {
					return nil, s.refuse(p, v, pl, &verify.Error{Reason: verify.ReasonChecksum,
						Detail: fmt.Sprintf("SHA256SUMS documents of one version disagree about %s", name)})
				}
				rec.Sums[name] = sum
			}
			rec.SumsURLs = append(rec.SumsURLs, pkg.SHASumsURL)
		}
		if err := verify.VerifySums(rec.Sums, pkg.Filename, pkg.SHASum); err != nil {
			return nil, s.refuse(p, v, pl, err)
		}
		rec.Archives[pl] = ArchiveRecord{Filename: pkg.Filename, URL: pkg.DownloadURL, SHA256: rec.Sums[pkg.Filename]}
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
	err = s.store.PutMeta(packageKey(p, v), rec)
	s.memo.forget(packageKey(p, v))
	if err != nil {
		s.metrics.CacheWriteFailed()
		s.log.Error("storing package metadata", "provider", p.String(), "version", v.String(), "error", err)
	}
	return rec, nil
}

// fetchPackageMeta asks the origin for the package of each platform, a few
// at a time. Platforms the origin has no package for are returned in notFound.
func (s *Engine) fetchPackageMeta(ctx context.Context, p discovery.Provider, version string, platforms []string) (map[string]*discovery.Package, []string, error) {
	var (
		mu       sync.Mutex
		pkgs     = make(map[string]*discovery.Package, len(platforms))
		notFound []string
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(packageFetchConcurrency)
	for _, name := range platforms {
		pl, err := ParsePlatform(name)
		if err != nil {
			return nil, nil, err
		}
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

// fetchSums fetches the SHA256SUMS document pkg refers to and its detached
// signature, and returns its entries if the signature verifies with one of
// the keys the origin gave for pkg.
func (s *Engine) fetchSums(ctx context.Context, p discovery.Provider, pkg *discovery.Package) (map[string]string, error) {
	var doc, sig []byte
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		doc, err = s.origin.FetchDocument(gctx, p, pkg.SHASumsURL, maxSumsBytes)
		return err
	})
	g.Go(func() (err error) {
		sig, err = s.origin.FetchDocument(gctx, p, pkg.SHASumsSignatureURL, maxSignatureBytes)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := verify.CheckSignature(doc, sig, pkg.ArmoredKeys()); err != nil {
		return nil, err
	}
	return verify.ParseSHA256SUMS(doc)
}

// refuse logs and counts a package that failed verification and returns
// err for the client.
func (s *Engine) refuse(p discovery.Provider, v versions.Version, platform string, err error) error {
	var verr *verify.Error
	if errors.As(err, &verr) {
		s.metrics.VerificationFailed(string(verr.Reason))
		s.log.Error("provider package failed verification; nothing was cached",
			"provider", p.String(), "version", v.String(), "platform", platform, "reason", string(verr.Reason), "error", err)
		return fmt.Errorf("%s %s %s: %w", p, v, platform, err)
	}
	return err
}

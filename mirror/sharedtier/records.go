package sharedtier

// The provider records the engine takes from the tier: version lists,
// and package records whose evidence verifies.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
)

// Versions returns the version list under key: the cache's, else the
// tier's, with when it was stored there, remembered in the engine's memo
// (not in the cache, so that its age stays the tier's copy's).
// Remembering it changes what the engine answers from, as a write to the
// cache would: the memo's generation advances, so that no answer stamped
// before holds on. Sealed (Config.Offline), the later listing of the
// two (sealedVersions).
func (s *Shared) Versions(ctx context.Context, key string) (*records.VersionList, time.Time, bool) {
	if s.tier != nil && s.cfg.Offline {
		return s.sealedVersions(ctx, key)
	}
	if list, at, ok := s.recs.Versions(ctx, key); ok {
		return list, at, true
	}
	if s.tier == nil {
		return nil, time.Time{}, false
	}
	_, _, gen, _ := s.recs.Remembered(key)
	var list records.VersionList
	storedAt, ok := s.peek(ctx, key, &list)
	if !ok || !records.KnownSchema(list.Schema) {
		return nil, time.Time{}, false
	}
	s.recs.Adopt(key, gen, &list, storedAt)
	return &list, storedAt, true
}

// ServedVersions returns the version list under key that Versions
// serves, read now from the cache and the tier (see
// stored.Source.ServedVersions): the cache's, else the tier's; sealed,
// the later listing of the two (sealedRead), the tier asked even where
// the cache has a list, and its failure an error.
func (s *Shared) ServedVersions(ctx context.Context, key string) (*records.VersionList, time.Time, bool, error) {
	if s.tier == nil || !s.cfg.Offline {
		var l records.VersionList
		at, src, err := s.Get(ctx, key, &l)
		switch {
		case errors.Is(err, cache.ErrNotFound) && !errors.Is(err, stored.ErrUnanswered):
			return nil, time.Time{}, false, nil
		case err != nil:
			return nil, time.Time{}, false, err
		case !records.KnownSchema(l.Schema):
			return nil, time.Time{}, false, nil
		}
		return &l, at, src == records.Hit, nil
	}
	r, err := s.sealedRead(ctx, key)
	if err != nil {
		return nil, time.Time{}, false, fmt.Errorf("%w: %w", stored.ErrUnanswered, err)
	}
	return r.list, r.storedAt, r.own, nil
}

// sealedVersions is Versions on a sealed replica, which lists no origin:
// the version list it serves is the later listing of the cache's and the
// tier's, the one the connected replicas took last where it is the later
// (sealedRead). Without it, a replica that held a list of its own (it
// was connected once, or an import or a removal wrote one) served that
// one for good, and never the versions published since. The tier is
// asked at most once per key in SeenTTL (the callers of one key at once
// sharing one read): within it, the list taken is answered from the
// engine's memo, asking the tier nothing. A write of the cache's list
// (an import's, a removal's), which the memo forgets, has it taken again.
// So is a key neither has a list under asked once in SeenTTL, unless a
// write happened since (the memo's generation advanced). A tier that
// fails is asked again after SeenTTL; meanwhile the list taken before
// stands, else the cache's.
func (s *Shared) sealedVersions(ctx context.Context, key string) (*records.VersionList, time.Time, bool) {
	val, at, gen, ok := s.recs.Remembered(key)
	switch now := s.cfg.Now(); {
	case ok && s.taken.holds(key, val, now):
		return val.(*records.VersionList), at, true
	case !ok && s.lacked.lacks(key, gen, now):
		return nil, time.Time{}, false
	}
	res, err := s.life.Coalesce(ctx, "versions", "sealed versions\x00"+key, func(ctx context.Context) (any, error) {
		return s.takeSealed(ctx, key), nil
	})
	if err != nil {
		return s.recs.Versions(ctx, key) // the caller went away, or the engine shuts down
	}
	r := res.(sealedList)
	return r.list, r.storedAt, r.list != nil
}

// takeSealed reads the list a sealed replica serves under key
// (sealedRead) and has the engine's memo answer it until SeenTTL has
// passed. What the memo holds already, taken from the same two lists, is
// kept as it is: the memo's generation advances only when the list
// served changed, so that the answers stamped before hold on otherwise.
func (s *Shared) takeSealed(ctx context.Context, key string) sealedList {
	now := s.cfg.Now()
	val, valAt, gen, remembered := s.recs.Remembered(key)
	r, err := s.sealedRead(ctx, key)
	prev, hadPrev := s.taken.get(key)
	switch {
	case err != nil && remembered:
		// The tier did not answer: the list the memo holds (the later
		// listing taken before, or the cache's) stands.
		list := val.(*records.VersionList)
		s.taken.put(key, takenList{at: now, list: weak.Make(list), from: prev.from})
		return sealedList{list: list, storedAt: valAt}
	case r.list == nil:
		// None: asked again after SeenTTL, or once a write happened.
		if gen, ok := s.unwritten(ctx, key, gen, r); ok {
			s.lacked.put(key, takenList{at: now, none: true, gen: gen})
		}
		return r
	case remembered && hadPrev && prev.list.Value() == val && prev.from.same(r.from):
		// Taken from the same two lists as before: what the memo holds.
		prev.at = now
		s.taken.put(key, prev)
		return sealedList{list: val.(*records.VersionList), storedAt: valAt}
	}
	// Put in the memo, again where a write under another key advanced
	// its generation meanwhile (unwritten), a few times at most.
	for range 4 {
		var kept bool
		if r.own && !remembered {
			kept = s.recs.Remember(key, gen, r.list, r.storedAt) // as the store holds it
		} else {
			kept = s.recs.Adopt(key, gen, r.list, r.storedAt)
		}
		if kept {
			break
		}
		var ok bool
		if gen, ok = s.unwritten(ctx, key, gen, r); !ok {
			break
		}
		_, _, _, remembered = s.recs.Remembered(key)
	}
	s.taken.put(key, takenList{at: now, list: weak.Make(r.list), from: r.from})
	return r
}

// unwritten says, where the memo's generation advanced from gen while r
// was read (a write under any key advances it: the lists read at once
// of other keys taken into the memo, a package record stored), whether
// the cache's list under key is still the one read, and returns the
// generation to put r in the memo with: then what r was taken from
// stands, and the tier is not asked again for it on the next lookup.
func (s *Shared) unwritten(ctx context.Context, key string, gen uint64, r sealedList) (uint64, bool) {
	now := s.recs.Generation()
	if now == gen {
		return gen, true
	}
	var cur records.VersionList
	_, _, err := s.recs.Get(ctx, key, &cur)
	have := err == nil && records.KnownSchema(cur.Schema)
	switch {
	case err != nil && !errors.Is(err, cache.ErrNotFound), have != (r.cached != nil):
		return 0, false
	case have && !reflect.DeepEqual(&cur, r.cached):
		return 0, false
	}
	return now, true
}

// sealedList is the version list a sealed replica serves (sealedRead).
type sealedList struct {
	list     *records.VersionList // nil: none
	storedAt time.Time            // when list was stored (the tier's copy's, for one taken from there)
	own      bool                 // list is the cache's, as stored
	cached   *records.VersionList // the cache's list read (nil: none)
	from     listSources          // the lists read
}

// listSources tells the cache's and the tier's version lists read apart
// from others: when each was stored and listed (zero: none).
type listSources struct{ ownAt, ownListed, theirAt, theirListed time.Time }

// same says whether s and o are the same lists.
func (s listSources) same(o listSources) bool {
	return s.ownAt.Equal(o.ownAt) && s.ownListed.Equal(o.ownListed) && s.theirAt.Equal(o.theirAt) && s.theirListed.Equal(o.theirListed)
}

// sealedRead reads the version lists under key from the cache and the
// tier and returns the one a sealed replica serves: the cache's, unless
// the tier's was listed after it (its records.VersionList.ListingTime
// later: the connected replicas listed the origin since), when it is the
// tier's, with what imports added to the cache's (laterListing); the
// tier's where the cache has none. A list an import or a removal wrote
// in the cache keeps the time of the listing it was made from (the
// tier's, when the replica had none of its own), so that it is served
// until a later listing comes: what a removal took off stays off until
// then. A tier that fails (its error returned) leaves the cache's.
func (s *Shared) sealedRead(ctx context.Context, key string) (sealedList, error) {
	var own, theirs records.VersionList
	ownAt, _, err := s.recs.Get(ctx, key, &own)
	haveOwn := err == nil && records.KnownSchema(own.Schema)
	if err != nil && !errors.Is(err, cache.ErrNotFound) {
		s.log.Warn("reading cached version list", "key", key, "error", err)
	}
	theirAt, found, terr := s.read(ctx, key, &theirs)
	found = found && records.KnownSchema(theirs.Schema)
	var r sealedList
	if haveOwn {
		r.cached = &own
		r.from.ownAt, r.from.ownListed = ownAt, own.ListingTime(ownAt)
	}
	if found {
		r.from.theirAt, r.from.theirListed = theirAt, theirs.ListingTime(theirAt)
	}
	switch {
	case found && !haveOwn:
		r.list, r.storedAt = &theirs, theirAt
	case found && r.from.theirListed.After(r.from.ownListed):
		r.list, r.storedAt = laterListing(&theirs, theirAt, &own, ownAt), theirAt
	case haveOwn:
		r.list, r.storedAt, r.own = &own, ownAt, true
	}
	return r, terr
}

// laterListing is the version list a sealed replica serves where theirs,
// the tier's list (stored there at theirAt), was listed after own, the
// cache's (stored at ownAt): theirs, its time of listing kept
// (records.VersionList.ListingTime), with
//
//   - the versions imports added to own (records.VersionList.ImportAdded;
//     every version of a list an import made from nothing, which no
//     listing is behind) that theirs does not list: an import's version
//     stays listed, added to the later listing, which lacked it, and
//     dated by its time as the release dating dates an import's addition
//     (mirror/gate);
//   - the dating of the versions theirs names that it does not date
//     itself (records.VersionList.Dates): own's dating of them (a list
//     a removal stored of one served so carries the dating it was
//     served with, which the release dating does not read of a list
//     no listing of this replica's is behind), else, for one own's
//     listing did not name (published since it), the time of own's
//     listing, which lacked it, as a replica that takes another's newer
//     listing for the one before its own dates them where no record of
//     the replica that saw them first does (never as versions of a
//     first listing, dated by their signature alone).
func laterListing(theirs *records.VersionList, theirAt time.Time, own *records.VersionList, ownAt time.Time) *records.VersionList {
	out := theirs.WithVersions(slices.Clone(theirs.Versions))
	out.ListedAt = theirs.ListingTime(theirAt)
	out.ImportAdded = slices.Clone(theirs.ImportAdded)
	listed := make(map[string]bool, len(theirs.Versions))
	for _, e := range theirs.Versions {
		listed[e.Version] = true
	}
	ownListed := own.ListingTime(ownAt)
	added := own.ImportAdded
	if ownListed.IsZero() {
		added = own.Names() // an import's alone
	}
	for _, e := range own.Versions {
		if !listed[e.Version] && slices.Contains(added, e.Version) {
			out.Versions = append(out.Versions, e)
			out.ImportAdded = append(out.ImportAdded, e.Version)
			out.Imported = true
		}
	}
	records.SortVersions(out.Versions)
	ownNamed := make(map[string]bool)
	for _, v := range own.Named() {
		ownNamed[v] = true
	}
	cloned := false
	for _, v := range theirs.Named() {
		if !theirs.Dates[v].IsZero() {
			continue
		}
		at := own.Dates[v]
		if at.IsZero() && !ownNamed[v] {
			at = ownListed
		}
		if at.IsZero() {
			continue
		}
		if !cloned {
			out.Dates, cloned = maps.Clone(theirs.Dates), true
			if out.Dates == nil {
				out.Dates = map[string]time.Time{}
			}
		}
		out.Dates[v] = at.UTC()
	}
	return out
}

// takenList is the version list a sealed replica took to serve under a
// key (takeSealed), which the engine's memo holds while it does (it is
// not kept alive here), and when.
type takenList struct {
	at   time.Time // when the tier was asked
	list weak.Pointer[records.VersionList]
	from listSources
	none bool   // neither the cache nor the tier had a list
	gen  uint64 // for none, the memo's generation before they were read
}

// takenLists remembers, by key, the version list a sealed replica took
// last (see sealedVersions), or that it found none. Beyond seenMax keys
// they are all forgotten, and taken again.
type takenLists struct {
	mu sync.Mutex
	m  map[string]takenList
}

// get returns the list taken last under key.
func (l *takenLists) get(key string) (takenList, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.m[key]
	return t, ok
}

// holds says whether val, the list the engine's memo holds under key, is
// the one taken last, within SeenTTL of now.
func (l *takenLists) holds(key string, val any, now time.Time) bool {
	t, ok := l.get(key)
	if !ok || t.none || val == nil || val != any(t.list.Value()) {
		return false
	}
	return t.within(now)
}

// lacks says whether neither the cache nor the tier had a list under key
// when asked last, within SeenTTL of now, and nothing was written since
// the memo's generation was gen.
func (l *takenLists) lacks(key string, gen uint64, now time.Time) bool {
	t, ok := l.get(key)
	return ok && t.none && t.gen == gen && t.within(now)
}

// within says whether t was taken within SeenTTL of now.
func (t takenList) within(now time.Time) bool {
	age := now.Sub(t.at)
	return age >= 0 && age < SeenTTL
}

// put remembers t as the list taken under key.
func (l *takenLists) put(key string, t takenList) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= seenMax {
		l.m = make(map[string]takenList)
	}
	l.m[key] = t
}

// Package returns the package record of v: the cache's, else the tier's
// (sharedPackage).
func (s *Shared) Package(ctx context.Context, k records.VersionKeys) (*records.PackageRecord, bool) {
	if rec, ok := s.recs.CachedPackageAt(k); ok {
		return rec, true
	}
	return s.sharedPackage(ctx, k)
}

// sharedPackage copies the package record of v from the tier to the
// cache, if the tier has one (which the tier authenticated as a
// replica's, see Tier) with evidence that still verifies: a copy that
// does not is left where it is, so that the version is fetched and
// verified anew, as when the cached record fails, and its record then
// replaces the tier's.
func (s *Shared) sharedPackage(ctx context.Context, k records.VersionKeys) (*records.PackageRecord, bool) {
	if s.tier == nil {
		return nil, false
	}
	p, v, key := k.Provider, k.Version, k.Package
	var rec records.PackageRecord
	if _, ok := s.peek(ctx, key, &rec); !ok || !records.KnownSchema(rec.Schema) || !rec.HasEvidence() {
		return nil, false
	}
	if err := rec.VerifyEvidence(p.Type, v); err != nil {
		reason := records.ReasonOf(err)
		s.metrics.VerificationFailed(reason)
		s.log.Error("the shared store's package record failed verification; fetching the version from the origin",
			"provider", p.String(), "version", v.String(), "reason", reason, "error", err)
		return nil, false
	}
	rec.MarkEvidenceChecked()
	// A withheld import set aside in it is another replica's, which an
	// earlier release shared: imported records stay local.
	rec.Withheld = nil
	return s.keepPackage(ctx, k, &rec)
}

// maxKeepRounds bounds the rounds keepPackage waits for other writers of
// the version's record.
const maxKeepRounds = 4

// keepPackage stores rec, the tier's package record of a version the
// cache had none of, in the cache, and returns it; unless a record of
// the version was stored while the tier was asked (an import's, whose
// packages may not be fetched again, or a fetch's with more platforms):
// that one is kept, and returned. Every writer of a version's record
// stores it through the version's coalesced fetch
// (lifetime.Lifetime.Coalesce under k.Package), one at a time, each
// reading what the one before stored; so does this copy. When another
// writer's step was under way, the record it stored is taken.
func (s *Shared) keepPackage(ctx context.Context, k records.VersionKeys, rec *records.PackageRecord) (*records.PackageRecord, bool) {
	for range maxKeepRounds {
		ran := false
		res, err := s.life.Coalesce(ctx, "package", k.Package, func(context.Context) (any, error) {
			ran = true
			if cur, ok := s.recs.CachedPackageAt(k); ok {
				return cur, nil
			}
			err := s.store.PutMeta(k.Package, rec)
			s.recs.Forget(k.Package)
			if err != nil {
				s.metrics.CacheWriteFailed()
				s.log.Log(context.Background(), cache.WriteFailureLevel(err), "storing package metadata",
					"provider", k.Provider.String(), "version", k.Version.String(), "error", err)
			}
			return rec, nil
		})
		switch {
		case err != nil:
			return nil, false // the caller's context ended, or the engine shuts down
		case ran:
			return res.(*records.PackageRecord), true
		}
		if cur, ok := s.recs.CachedPackageAt(k); ok {
			return cur, true
		}
	}
	return nil, false
}

// Installable reports whether a sealed mirror can serve version v of p
// from the tier: the version's package record (rec, the cached one, if
// any; else the tier's, copied into the cache) has an archive of a served
// platform that the tier holds and that this replica trusts it for. What
// the tier answered is remembered for SeenTTL, so that a warm version list
// asks it nothing.
func (s *Shared) Installable(ctx context.Context, p addrs.Provider, v versions.Version, rec *records.PackageRecord) bool {
	if s.tier == nil {
		return false
	}
	now := s.cfg.Now()
	if rec == nil {
		k := records.KeysOf(p).Of(v)
		key := "package/" + k.Package
		if has, ok := s.seen.get(key, now); ok && !has {
			return false
		}
		var ok bool
		if rec, ok = s.sharedPackage(ctx, k); !ok {
			s.seen.put(key, false, now)
			return false
		}
	}
	for _, pl := range slices.Sorted(maps.Keys(rec.Archives)) {
		a := rec.Archives[pl]
		if !s.served(pl) || !s.Trusts(a.SHA256) {
			continue
		}
		key := "archive/" + a.SHA256
		if has, ok := s.seen.get(key, now); ok {
			if has {
				return true
			}
			continue
		}
		body, _, err := s.tier.OpenArchive(ctx, a.SHA256)
		if err != nil {
			return false // a failing tier is gone around: not listed
		}
		s.seen.put(key, body != nil, now)
		if body != nil {
			body.Close()
			return true
		}
	}
	return false
}

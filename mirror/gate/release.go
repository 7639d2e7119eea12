package gate

// Release times: when each version was released, for the package
// policy's minimum release age (see gate.go). A version's release time
// is the later of two times, each learned once and kept write-once in the
// cache (and the shared tier, so that replicas sharing it agree):
//
//   - signed: the creation time of the OpenPGP signature of its
//     SHA256SUMS, read once the signature verified (from the package
//     record's evidence when the cache has it, else from the origin: one
//     download answer, the SHA256SUMS and its signature);
//   - absent: the time of the latest listing of the origin that did not
//     yet contain the version (the version list this mirror, or a
//     replica sharing its store, had before the one that first listed
//     it). A version in the first listing ever taken has none (the
//     bootstrap): it is dated by its signature alone. A version keeps
//     its time once listed: one a listing lacks (a short answer of the
//     origin) is not new to the listing that names it again; one of the
//     first listing is recorded then with the zero time, as such. The
//     listing keeps the versions it lacked (records.Lacking), so that a
//     replica that takes it from the shared tier as the one before its
//     own, with none of its own, does not take them for new either.
//     The listing carries, besides, the absent times of the versions it
//     names (ListingDates): authenticated with the list in the shared
//     tier, they date a version whose record is gone (deleted from the
//     tier, or never stored in the cache) as the record did. An import
//     is no listing: a version it added to a list is none of the
//     listing's, dated by its time (records.VersionList.ImportAdded;
//     on a sealed replica that serves the tier's later listing over the
//     list, and keeps the version in it, by that listing's time:
//     mirror/sharedtier), and a list it made alone is no list stored
//     before a listing (records.VersionList.ImportOnly). Nor is retention's removal of a
//     version (mirror/inventory.Inventory.RemoveVersion): the list keeps
//     the version among those it lacked, and the shared tier's list
//     stored without it is no listing of this replica's. A listing with
//     no list stored before it (none in the cache, none in the shared
//     tier: never taken, or deleted from the tier) takes the records the
//     cache or the tier holds of its versions, those of the newest of
//     each line at most (firstListingLookups), so that a
//     replica with an empty cache whose tier lost the list but not the
//     records does not take the versions other replicas dated for ones
//     of the first listing. A listing whose lookups the tier did not
//     answer (it failed) leaves a mark in the cache (settle): the next
//     listings look up again the versions of the replica's own listing
//     that have no dating, until the tier answers, so that a first
//     listing taken while the tier was down, served meanwhile as by a
//     replica without a tier, takes the other replicas' dating of its
//     versions once it is back.
//
// Modules have no signature, and the module registry protocol gives no
// publication date: a module version is dated by the listing rule alone.
// One in the first listing ever stored (the bootstrap: it carries no
// absent record) is taken as released before the mirror first looked;
// one that no stored listing names (nor an earlier one: it has no
// record) has no release time known, and is held while a minimum
// release age applies. Module release times are
// keyed by the version parsed (addrs.ParseModuleVersion), stored under
// its canonical form, so that "v1.1.0" and "1.1.0" are one version to the
// gate whatever the client or the origin spells.
//
// What learning costs: only versions that might be inside the window are
// looked up: per major version line, newest first, until one is known to
// be old enough; the older ones of its line (lower in precedence: another
// build of the same release, "1.1.0+b" beside "1.1.0+a", is looked up on
// its own) are taken to be as old (their listing time, when they came
// later, still counts). A version's times never change, so a second
// listing costs nothing, and a new version its own three requests. The
// older ones are taken to be as old for the listing only: a version's
// own package (its documents, its archives) is judged by its own
// signature, learned then when nothing here knows it (its own three
// requests, once), so that a version published into an older line after
// a newer one (a backport) is not served for the newer one's age. Where
// the origin may not be asked (a sealed mirror) and nothing here knows
// it, the listing's date stands. A listing of an address with no
// listing of the replica's own before it (a first listing, or another
// replica's list taken from the shared tier by an empty cache) asks the
// cache, then the shared tier, for the dating records of at most
// maxFirstListingLookups of its versions, 16 at once, once: the replica
// has a listing of its own from then on. When the tier failed to answer
// some, the next listings ask again for as many, of the versions of that
// own listing that have no dating, until it answers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// Key prefixes of the release-time records.
const (
	signedPrefix = "release/signed/" // + provider + "/" + version
	absentPrefix = "release/absent/" // + kind + "/" + address + "/" + version
	// The mark that a listing of address found the shared tier failing
	// to answer some of its dating lookups (see settle): the cache's
	// alone, never shared.
	unansweredPrefix = "release/unanswered/" // + kind + "/" + address
)

// maxRecordLookups bounds the release-time records of one listing looked
// for at once (in the cache, then the shared tier).
const maxRecordLookups = 16

// maxFirstListingLookups bounds the dating records looked up for a first
// listing of an address (see firstListingLookups).
const maxFirstListingLookups = 256

// releaseTimesMax bounds the release times kept in memory; past it they
// are dropped and read again from the cache as needed.
const releaseTimesMax = 1 << 16

// maxLookupsPerList bounds the origin lookups of one listing of one
// provider, so that an origin listing many fresh versions cannot make
// the mirror fetch them all at once; the rest are looked up on the next
// listings, and held meanwhile (their release time is not known).
const maxLookupsPerList = 32

// releaseRecord is one release-time finding, written once.
type releaseRecord struct {
	Schema int       `json:"schema"`
	At     time.Time `json:"at"`
}

// releaseTimes learns and keeps release times.
type releaseTimes struct {
	cfg     Config
	parts   Parts
	origin  Origin
	store   Store
	log     *slog.Logger
	metrics Metrics

	mu     sync.Mutex
	signed map[string]time.Time            // by signed key
	absent map[string]map[string]time.Time // by kind/address, then version (loaded whole)
}

func signedKey(p addrs.Provider, v string) string { return signedPrefix + p.String() + "/" + v }

// versionKey is how versions of kind are keyed: a module's by the
// canonical form of the version parsed (its listings spell versions as
// their origin does; false for one that does not parse, which has no
// release time), a provider's as listed (its lists hold canonical
// versions already).
func versionKey(kind string) func(string) (string, bool) {
	if kind == string(policy.Module) {
		return func(raw string) (string, bool) {
			v, err := addrs.ParseModuleVersion(raw)
			return v.String(), err == nil
		}
	}
	return func(v string) (string, bool) { return v, true }
}

func absentBase(kind, address string) string { return absentPrefix + kind + "/" + address + "/" }

// NoteListing records, for every version of next (a listing of address,
// of kind "provider" or "module", stored under key) that prev (the
// listing before it, taken at prevAt; nil when there was none) lacks,
// that it was absent at prevAt, or at the clock's time when prevAt is
// ahead of it (a listing taken while the clock was set forward: the
// version was published before now, not after that time). A version
// another replica recorded first keeps that replica's record. With no
// previous listing at all, the versions of next are dated by the records
// the cache or the shared tier holds of them (noteFirstListing), those
// with none are of the first listing (the bootstrap), undated: a
// provider's dated by its signature alone.
//
// A version prev (or this replica's own listing) names and next lacks (an
// origin answering a short or empty list for a while, or a version pulled
// and published again) keeps the time it has: one that has none (of a
// first listing, the bootstrap) is recorded then, as such (the zero time;
// once the shared tier answered its lookup), so that a listing that names
// it again is not taken for the one that first listed it. So too a
// version this replica's own listing names that prev, another replica's
// newer listing, lacks.
//
// prev are the versions the listing before named, those it lacked of
// the one before it too (records.VersionList.Named): a version that a
// short listing lacked is not new to the one that names it again,
// whichever replica took them.
//
// prev may be another replica's listing, taken from the shared tier
// because it is newer than this replica's own (the cache's, under key).
// The versions it names that the own listing lacks were never new to a
// listing of this replica's: they are dated too, by the record of the
// replica that saw them first, else as absent at the own listing; with no
// own listing, by that record alone. Left undated, a version that came
// after the first listing would be taken for one of it (the bootstrap)
// and pass any minimum release age.
//
// prevDates are the datings prev carries (records.VersionList.Dates, by
// canonical version; ListingDates): a version prev names that has no
// record here takes its date from it when the shared tier has no record
// of it either (deleted by a writer of the bucket, which cannot take a
// date out of the list it is authenticated with), the later of the two
// when the tier has one too. Its dates of versions prev does not name
// are not read.
//
// The dating records looked up are bounded as a first listing's when
// this replica has no listing of its own (firstListingLookups). While an
// earlier listing's lookups went unanswered (the shared tier failed; see
// settle), the versions of the own listing that have no dating are
// looked up again, as many, and take prev's dating of them too.
func (g *Gate) NoteListing(ctx context.Context, kind, address, key string, prev []string, prevDates map[string]time.Time, prevAt time.Time, next []string) {
	g.rel.noteListing(ctx, kind, address, key, prev, prevDates, prevAt, next)
}

// ListingDates is the dating of the versions named (those of a listing
// about to be stored: its versions and those it lacked) that this
// replica knows, after NoteListing of it: what the list carries
// (records.VersionList.Dates), so that a replica that takes it as the
// one before its own dates them so where their dating records are gone
// (deleted from the shared tier, or never stored in a cache). A version
// of the first listing (the bootstrap), which has no time, is left out:
// one named by the list and absent from its dates is taken so anyway.
// While some of the address's dating lookups went unanswered (the mark:
// see settle), it is nil, as the list of an earlier release: the list
// does not date all it could, and a replica that takes it looks every
// record up rather than a bounded few.
func (g *Gate) ListingDates(kind, address string, named []string) map[string]time.Time {
	if g.rel.shared() && g.rel.mark(kind, address) != nil {
		return nil
	}
	known := g.rel.absentOf(kind, address)
	canon := versionKey(kind)
	out := map[string]time.Time{} // never nil: a list of a release that dates (see noteListing)
	for _, raw := range named {
		v, ok := canon(raw)
		if !ok {
			continue
		}
		if at := known[v]; !at.IsZero() {
			out[v] = at.UTC()
		}
	}
	return out
}

func (r *releaseTimes) noteListing(ctx context.Context, kind, address, key string, prev []string, prevDates map[string]time.Time, prevAt time.Time, next []string) {
	shared := r.shared()
	if prev == nil {
		// The cache has no list of address (prev would be it): the times
		// recorded are its records alone. Without a shared tier, they are
		// all there is: nothing to look up, nor to mark.
		known := r.absentWith(kind, address, func() ([]string, map[string]time.Time) { return nil, nil })
		if shared {
			r.settle(kind, address, r.mark(kind, address), r.noteFirstListing(ctx, kind, address, next, known), true)
		}
		return
	}
	var mark *unansweredMark
	if shared {
		mark = r.mark(kind, address)
	}
	now := r.cfg.Now()
	canon := versionKey(kind)
	set := func(vs []string) map[string]bool {
		out := make(map[string]bool, len(vs))
		for _, raw := range vs {
			if v, ok := canon(raw); ok {
				out[v] = true
			}
		}
		return out
	}
	// notAfterNow is a listing's time as a version's: a listing dated
	// ahead of the clock was taken before now all the same.
	notAfterNow := func(at time.Time) time.Time {
		if at.After(now) {
			return now
		}
		return at
	}
	inPrev, inNext := set(prev), set(next)
	own, ownDates, ownAt, haveOwn := r.ownListing(kind, key)
	inOwn := set(own)
	base := absentBase(kind, address)
	known := r.absentWith(kind, address, func() ([]string, map[string]time.Time) { return own, ownDates })
	var todo []dating
	// again are the versions of the own listing with no dating, looked up
	// again while an earlier listing's lookups went unanswered (marked):
	// all of them, past the bound of a first listing's lookups, or the
	// mark would go with versions never looked up (a listing taken while
	// the tier did not answer is rare; its lookups again are once);
	// dated only by another replica's record, or prev's dating of them.
	var again []dating
	seen := make(map[string]bool, len(next))
	note := func(raw string) {
		v, ok := canon(raw)
		if !ok || seen[v] {
			return
		}
		seen[v] = true
		var listed time.Time // prev's own dating of it, authenticated with prev
		if inPrev[v] {
			listed = prevDates[v]
		}
		// A version dated here keeps its dating; so does one recorded as
		// of the first listing (the zero time), unless prev dates it (a
		// first listing taken while the tier did not answer, whose record
		// went since).
		if at, ok := known[v]; ok && (!at.IsZero() || listed.IsZero()) {
			return
		}
		switch {
		case inOwn[v]:
			// New to an earlier listing of this replica's (which recorded
			// it then), or of its first (the bootstrap).
			switch {
			case !inNext[v]:
				todo = append(todo, dating{v: v, listed: listed, unlisted: true})
			case mark.asks(v):
				again = append(again, dating{v: v, listed: listed})
			case !listed.IsZero():
				// Undated here (a first listing taken while the tier did
				// not answer, its record since deleted) and dated by
				// another replica's listing: that dating stands.
				todo = append(todo, dating{v: v, listed: listed})
			}
		case !inPrev[v]:
			todo = append(todo, dating{v: v, at: notAfterNow(prevAt)})
		case haveOwn:
			todo = append(todo, dating{v: v, at: notAfterNow(ownAt), listed: listed}) // named first by another replica's listing
		default:
			todo = append(todo, dating{v: v, listed: listed, unlisted: !inNext[v]})
		}
	}
	for _, raw := range next {
		note(raw)
	}
	for _, raw := range prev {
		note(raw)
	}
	for _, raw := range own {
		note(raw)
	}
	// Another replica's record of each, looked for at once. A replica
	// with no listing of its own (an empty cache) has every version of
	// prev and next to date: where prev dates what it names (a list of a
	// release that dates: its dates are never nil), it asks for the
	// records of those firstListingLookups picks, as a first listing
	// does, the others taking prev's dates; of a list that dates nothing
	// (an earlier release's, or one written while lookups went
	// unanswered), for all. The versions looked up again are asked for
	// all.
	vs := versionsOf(todo)
	if !haveOwn && prevDates != nil {
		vs = firstListingLookups(kind, vs, nil)
	}
	theirs, unanswered := r.lookupRecords(ctx, base, append(vs, versionsOf(again)...))
	r.noteDatings(kind, address, slices.Concat(todo, again), theirs, unanswered)
	r.settle(kind, address, mark, unanswered, false)
}

// dating is a version of a listing that noteListing dates, and what it
// knows to date it by.
type dating struct {
	v        string
	at       time.Time // zero: dated only by another replica's record, or by listed
	listed   time.Time // the listing before's own dating of it (prevDates), where it names it
	unlisted bool      // next lacks it: recorded even with no time (the bootstrap)
}

// versionsOf is the versions of ds.
func versionsOf(ds []dating) []string {
	vs := make([]string, len(ds))
	for i, d := range ds {
		vs[i] = d.v
	}
	return vs
}

// noteDatings records the dating of each version of ds, of a listing of
// address: another replica's record of it (theirs: that listing saw it
// first) or the listing before's own dating of it (listed: it stands
// where the record is gone), the later of the two, else the time found
// here (at; none for a version looked up again). One with no time at all
// is recorded as of the first listing (the bootstrap) where the listing
// lacks it (unlisted) and the shared tier answered its lookup (not in
// unanswered); any other is left undated.
func (r *releaseTimes) noteDatings(kind, address string, ds []dating, theirs map[string]time.Time, unanswered map[string]bool) {
	base := absentBase(kind, address)
	now := r.cfg.Now()
	for _, d := range ds {
		at := d.at
		ahead := false
		if their := later(theirs[d.v], d.listed); !their.IsZero() {
			// Another replica's listing, dated ahead of this clock (its
			// own was ahead), was taken before now all the same.
			at, ahead = their, their.After(now)
			if ahead {
				at = now
			}
		}
		switch {
		case ahead:
			r.writeLocalOnce(base+d.v, at) // the tier keeps the other replica's
		case !at.IsZero() && at.Equal(theirs[d.v]):
			r.writeLocalOnce(base+d.v, at) // the tier's record: it holds it already
		case !at.IsZero() && unanswered[d.v]:
			// The tier did not answer for it: it may hold another
			// replica's dating, later (a tighter bound) than this
			// replica's, which this must not replace.
			r.writeLocalOnce(base+d.v, at)
		case !at.IsZero():
			r.writeOnce(base+d.v, at)
		case d.unlisted && !unanswered[d.v]:
			// Of a first listing, recorded as such in the cache alone: a
			// tier that failed to answer may hold another replica's
			// record of it, which this must not replace. Not while the
			// tier does not answer for it: the record in the cache would
			// stand for it when it is looked up again (settle).
			r.writeLocalOnce(base+d.v, at)
		default:
			continue
		}
		r.noteAbsent(kind, address, d.v, at)
	}
}

// shared says whether release times are read beyond the cache (a shared
// tier composed over the stored records): without one, the cache's
// records are all known (absentOf) and nothing is looked up, nor marked
// as unanswered.
func (r *releaseTimes) shared() bool { return r.parts.Source.Beyond() }

// unansweredMark is the mark, in the cache alone, that some of an
// address's dating lookups went unanswered (the shared tier failed): the
// versions to look up again (see settle).
type unansweredMark struct {
	Schema int       `json:"schema"`
	At     time.Time `json:"at"`
	// Versions are the versions to look up again, canonical; none: every
	// version of the replica's own listing that has no dating (a first
	// listing taken while the tier did not answer).
	Versions []string `json:"versions,omitempty"`
}

// asks says whether m has version v looked up again (false for no mark).
func (m *unansweredMark) asks(v string) bool {
	return m != nil && (m.Versions == nil || slices.Contains(m.Versions, v))
}

// mark returns the mark of address's dating lookups unanswered, nil when
// the cache holds none.
func (r *releaseTimes) mark(kind, address string) *unansweredMark {
	var m unansweredMark
	if _, err := r.store.GetMeta(unansweredPrefix+kind+"/"+address, &m); err != nil {
		return nil
	}
	return &m
}

// settle keeps the mark of address's dating lookups unanswered (mark: the
// one the cache holds, nil for none) in step with a listing's lookups:
// it names the versions whose lookup went unanswered (unanswered; every
// undated version when first says the listing was a first one: the
// versions it did not look up too), so that the next listings look
// those up again, if undated, and only those; it goes once all were
// answered. A version whose lookup keeps failing (an object of the
// bucket it cannot read) costs one lookup per listing. A first listing
// taken while the tier did not answer is taken for the first ever (the
// bootstrap) meanwhile, as by a replica without a tier; the versions of
// it another replica dated take that dating once the tier answers.
func (r *releaseTimes) settle(kind, address string, mark *unansweredMark, unanswered map[string]bool, first bool) {
	key := unansweredPrefix + kind + "/" + address
	if len(unanswered) == 0 {
		if mark != nil {
			if err := r.store.DeleteMeta(key); err != nil && !errors.Is(err, cache.ErrNotFound) {
				r.log.Warn("removing the mark of release times to look up again", "key", key, "error", err)
			}
		}
		return
	}
	var vs []string
	if !first {
		vs = slices.Sorted(maps.Keys(unanswered))
	}
	if mark != nil && slices.Equal(mark.Versions, vs) && (mark.Versions == nil) == (vs == nil) {
		return
	}
	if err := r.parts.Records.Put(key, &unansweredMark{Schema: records.Schema, At: r.cfg.Now().UTC(), Versions: vs}); err != nil {
		r.metrics.CacheWriteFailed()
		r.log.Log(context.Background(), cache.WriteFailureLevel(err), "storing the mark of release times to look up again", "key", key, "error", err)
	}
}

// noteFirstListing dates the versions of next, a first listing of
// address (no list of it is stored before it: none was ever taken, or
// the shared tier's is gone, deleted by a writer of the bucket), by the
// records of them that the cache or the shared tier holds: with no list
// before its own, a replica with an empty cache would take a version
// other replicas dated as new for one of the first listing ever (the
// bootstrap), and pass it for any minimum release age. A version with no
// record is of the first listing, undated, as before. Only the versions
// firstListingLookups picks are looked up, once: the replica stores the
// listing, and has one before its own from then on (and looks them up
// again on its next listings while some lookups went unanswered: see
// settle). known are the times the cache holds. It returns the versions
// whose lookup the tier did not answer. Asked only with a shared tier.
func (r *releaseTimes) noteFirstListing(ctx context.Context, kind, address string, next []string, known map[string]time.Time) map[string]bool {
	base := absentBase(kind, address)
	theirs, unanswered := r.lookupRecords(ctx, base, firstListingLookups(kind, next, known))
	for v, at := range theirs {
		r.writeLocalOnce(base+v, at) // the tier holds it already
		r.noteAbsent(kind, address, v, at)
	}
	return unanswered
}

// firstListingLookups returns the versions of next (of kind: a first
// listing, the versions a listing with none of the replica's own before
// it dates, or those looked up again; known left out: the cache has their
// records), in their canonical spelling, whose dating records are looked
// up: all of them up to maxFirstListingLookups; past it, up to that many,
// the newest version of each minor version line (major.minor), then the
// next newest of each, and so on; the lines of each major version line
// newest first, taken in turn from each major line. A version published
// lately is the newest of its line, or one of the few newest; a backport
// into an older line is the newest of that line, and an older major
// line's newest lines come as early as a newer one's.
func firstListingLookups(kind string, next []string, known map[string]time.Time) []string {
	type candidate struct {
		v    versions.Version
		name string
		rank int // within its minor line, newest first
		line int // its minor line's within its major line, newest first
	}
	canon := versionKey(kind)
	seen := make(map[string]bool, len(next))
	majors := map[uint64]map[uint64][]candidate{} // by major, then minor
	for _, raw := range next {
		name, ok := canon(raw)
		if _, dated := known[name]; !ok || dated || seen[name] {
			continue
		}
		seen[name] = true
		v, err := versions.ParseVersion(name)
		if err != nil {
			continue
		}
		if majors[v.Major] == nil {
			majors[v.Major] = map[uint64][]candidate{}
		}
		majors[v.Major][v.Minor] = append(majors[v.Major][v.Minor], candidate{v: v, name: name})
	}
	newestFirst := func(a, b candidate) int {
		switch {
		case a.v.GreaterThan(b.v):
			return -1
		case b.v.GreaterThan(a.v):
			return 1
		}
		return strings.Compare(a.name, b.name)
	}
	var all []candidate
	for _, minors := range majors {
		for i, minor := range slices.Sorted(maps.Keys(minors)) {
			cs := minors[minor]
			slices.SortFunc(cs, newestFirst)
			for j := range cs {
				cs[j].rank, cs[j].line = j, len(minors)-1-i
			}
			all = append(all, cs...)
		}
	}
	slices.SortFunc(all, func(a, b candidate) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		if a.line != b.line {
			return a.line - b.line
		}
		return newestFirst(a, b)
	})
	out := make([]string, 0, min(len(all), maxFirstListingLookups))
	for _, c := range all[:min(len(all), maxFirstListingLookups)] {
		out = append(out, c.name)
	}
	return out
}

// lookupRecords returns the time of the dating record of each version of
// vs (canonical) under base that the cache or the shared tier holds (none
// for a version whose record has the zero time, or none has), looked up
// maxRecordLookups at once, and the versions whose lookup the shared
// tier did not answer (it failed: stored.ErrUnanswered), or that
// panicked (a bug of the mirror's, logged): such a version is not taken
// as one with no recorded time.
func (r *releaseTimes) lookupRecords(ctx context.Context, base string, vs []string) (found map[string]time.Time, unanswered map[string]bool) {
	type answer struct {
		at       time.Time
		answered bool
	}
	answers := make([]answer, len(vs))
	g := workgroup.New(r.log, "lookup", "release times", "under", base)
	g.SetLimit(maxRecordLookups)
	for i, v := range vs {
		g.Go(func() error {
			var rec releaseRecord
			_, _, err := r.parts.Source.Get(ctx, base+v, &rec)
			answers[i].answered = !errors.Is(err, stored.ErrUnanswered)
			if err == nil {
				answers[i].at = rec.At
			}
			return nil
		})
	}
	// Each lookup's outcome is in answers; one that panicked left its
	// answer unanswered, and its error is logged.
	_ = g.Wait()
	found, unanswered = make(map[string]time.Time), make(map[string]bool)
	for i, a := range answers {
		switch {
		case !a.answered:
			unanswered[vs[i]] = true
		case !a.at.IsZero():
			found[vs[i]] = a.at
		}
	}
	return found, unanswered
}

// noteAbsent sets the absent time of version v of address in memory,
// when its times are there (the records stored are read else).
func (r *releaseTimes) noteAbsent(kind, address, v string, at time.Time) {
	// The maps handed out are never modified: a new one replaces it.
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.absent[kind+"/"+address]; ok {
		m = maps.Clone(m)
		m[v] = at
		r.absent[kind+"/"+address] = m
	}
}

// ownListing returns the versions of this replica's own listing of kind
// stored under key (the cache's, never the shared tier's; those it lacked
// too, not those an import added: records.VersionList.Named), the dates
// it carries of them (records.VersionList.Dates) and when it was taken;
// false when the cache has none, or one an import made alone
// (records.VersionList.ImportOnly: no listing of the origin).
func (r *releaseTimes) ownListing(kind, key string) ([]string, map[string]time.Time, time.Time, bool) {
	var names []string
	var dates map[string]time.Time
	var l records.Listing
	var storedAt time.Time
	var err error
	if kind == string(policy.Module) {
		ml := new(records.ModuleVersionList)
		storedAt, err = r.store.GetMeta(key, ml)
		names, dates, l = ml.Named(), ml.Dates, ml
	} else {
		pl := new(records.VersionList)
		storedAt, err = r.store.GetMeta(key, pl)
		names, dates, l = pl.Named(), pl.Dates, pl
	}
	listedAt, readable := l.Listed()
	if err != nil || !readable {
		return nil, nil, time.Time{}, false
	}
	if listedAt.IsZero() {
		listedAt = storedAt
	}
	return names, dates, listedAt, true
}

// listKey is the key of the version list of address, of kind.
func listKey(kind, address string) string {
	if kind == string(policy.Module) {
		return records.ModuleVersionsKeyOf(address)
	}
	return records.VersionsKeyOf(address)
}

// absentOf returns the absent times recorded for address, read from the
// cache once: its records, and the dates its stored version list of
// address carries of the versions it names (ListingDates), the later
// where both date a version, so that a record the cache failed to store
// does not leave the version to be taken for one of the first listing
// once the memory is gone (a restart). The map must not be modified.
func (r *releaseTimes) absentOf(kind, address string) map[string]time.Time {
	return r.absentWith(kind, address, func() ([]string, map[string]time.Time) {
		named, dates, _, _ := r.ownListing(kind, listKey(kind, address))
		return named, dates
	})
}

// absentWith is absentOf with the cache's version list of address (the
// versions it names, the dates it carries) given by ownList, called only
// when the times are not in memory, so that a caller that has read the
// list already does not read it again.
func (r *releaseTimes) absentWith(kind, address string, ownList func() ([]string, map[string]time.Time)) map[string]time.Time {
	id := kind + "/" + address
	r.mu.Lock()
	m, ok := r.absent[id]
	r.mu.Unlock()
	if ok {
		return m
	}
	base := absentBase(kind, address)
	canon := versionKey(kind)
	m = map[string]time.Time{}
	err := r.store.ScanMeta(base, func(key string, _ time.Time, raw json.RawMessage) error {
		var rec releaseRecord
		if json.Unmarshal(raw, &rec) == nil && records.KnownSchema(rec.Schema) {
			// Records of earlier releases are keyed by the origin's
			// spelling: read under the canonical one, the latest time
			// when two spellings were recorded.
			if v, ok := canon(key[len(base):]); ok {
				m[v] = later(m[v], rec.At)
			}
		}
		return nil
	})
	if err != nil {
		r.log.Warn("reading release times", "address", address, "error", err)
		return m
	}
	named, dates := ownList()
	for _, raw := range named {
		if v, ok := canon(raw); ok && !dates[v].IsZero() {
			m[v] = later(m[v], dates[v])
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.absent) >= releaseTimesMax/64 {
		clear(r.absent)
	}
	if cur, ok := r.absent[id]; ok {
		return cur
	}
	r.absent[id] = m
	return m
}

// writeOnce stores at under key unless the cache has a record there
// (through the stored records, into the shared tier too).
func (r *releaseTimes) writeOnce(key string, at time.Time) {
	r.putOnce(r.parts.Source.Put, key, at)
}

// writeLocalOnce is writeOnce into the cache alone.
func (r *releaseTimes) writeLocalOnce(key string, at time.Time) {
	r.putOnce(r.parts.Records.Put, key, at)
}

// putOnce stores at under key through put unless the cache has a record
// there (one of the first listing, the zero time, gives way to a dating:
// another replica's list dates a version this replica took for one of
// its first listing while the tier did not answer); a failure to store
// it is counted and logged.
func (r *releaseTimes) putOnce(put func(key string, v any) error, key string, at time.Time) {
	var old releaseRecord
	if _, err := r.store.GetMeta(key, &old); err == nil && (!old.At.IsZero() || at.IsZero()) {
		return // a record of the first listing (the zero time) gives way to a dating
	}
	if err := put(key, &releaseRecord{Schema: records.Schema, At: at.UTC()}); err != nil {
		r.metrics.CacheWriteFailed()
		r.log.Log(context.Background(), cache.WriteFailureLevel(err), "storing a release time", "key", key, "error", err)
	}
}

// signedAt returns the signature time of version v of p when it is known
// without asking the origin: remembered, in the cache or the shared tier,
// or in the evidence of the version's package record.
func (r *releaseTimes) signedAt(ctx context.Context, p addrs.Provider, v string, rec *records.PackageRecord) (time.Time, bool) {
	key := signedKey(p, v)
	r.mu.Lock()
	at, ok := r.signed[key]
	r.mu.Unlock()
	if ok {
		return at, true
	}
	var stored releaseRecord
	_, src, err := r.parts.Source.Get(ctx, key, &stored)
	switch {
	case err == nil && src == records.Hit && records.KnownSchema(stored.Schema):
		r.remember(key, stored.At)
		return stored.At, true
	case err == nil && records.KnownSchema(stored.Schema) && !stored.At.IsZero():
		r.keep(key, stored.At) // another replica's: stored here too
		return stored.At, true
	case err != nil && !errors.Is(err, cache.ErrNotFound):
		r.log.Warn("reading a release time", "key", key, "error", err)
	}
	if rec != nil && rec.HasEvidence() && len(rec.Documents) > 0 {
		doc := rec.Documents[0]
		if at, err := verify.SignatureTime(doc.Content, doc.Signature, records.ArmoredKeys(doc.SigningKeys)); err == nil {
			r.keep(key, at)
			return at, true
		}
	}
	return time.Time{}, false
}

func (r *releaseTimes) remember(key string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.signed) >= releaseTimesMax {
		clear(r.signed)
	}
	r.signed[key] = at
}

// keep stores and remembers a signature time just learned.
func (r *releaseTimes) keep(key string, at time.Time) {
	r.writeOnce(key, at)
	r.remember(key, at)
}

// lookup learns the signature time of the version of entry from the
// origin: the download answer of one platform, the SHA256SUMS it names
// and its signature, which must verify with the answer's keys, and the
// document must be the release of p's type and that version (a signature
// vouches for the names it signed).
func (r *releaseTimes) lookup(ctx context.Context, p addrs.Provider, v versions.Version, entry records.VersionEntry) (time.Time, error) {
	if len(entry.Platforms) == 0 {
		return time.Time{}, fmt.Errorf("%s %s lists no platform", p, v)
	}
	plName := entry.Platforms[0]
	for _, pl := range entry.Platforms {
		if r.cfg.Platforms == nil || slices.Contains(r.cfg.Platforms, pl) {
			plName = pl
			break
		}
	}
	pl, err := addrs.ParsePlatform(plName)
	if err != nil {
		return time.Time{}, err
	}
	pkg, err := r.origin.Package(ctx, p, entry.OriginVersion(), pl)
	if err != nil {
		return time.Time{}, err
	}
	sums, sig, err := r.origin.FetchSums(ctx, p, pkg, records.MaxSumsBytes, records.MaxSignatureBytes)
	if err != nil {
		return time.Time{}, err
	}
	at, err := verify.SignatureTime(sums, sig, records.ArmoredKeys(pkg.SigningKeys))
	if err != nil {
		return time.Time{}, err
	}
	parsed, err := verify.ParseSHA256SUMS(sums)
	if err != nil {
		return time.Time{}, err
	}
	if _, err := records.ReleaseOf(p.Type, v, parsed); err != nil {
		return time.Time{}, err
	}
	return at, nil
}

// datedVersions is the release of each version of a list that a
// minimum release age may hold, and which of them were inferred: dated
// by a newer version of their major line known to be old enough, taken
// to be as old so that a listing looks up few (see the file comment).
// A listing is judged so; a version's own package is judged by its own
// signature (releaseTimes.ownRelease), so that a version published into
// an older line after a newer one (a backport), in a provider's first
// listing, is not taken to be as old as that newer one. inferred holds
// the list entry of each version inferred, which its own dating asks the
// origin with; absent the listing rule's time of each version (the
// cache's records and the list's own Dates, the later).
type datedVersions struct {
	rels     map[string]policy.Release
	inferred map[string]records.VersionEntry
	absent   map[string]time.Time
}

// withListDates is absent (the times the cache holds, absentOf's: never
// nil, not to be modified) with the dates a list carries of its versions
// (records.VersionList.Dates), the later where both date one: a list
// taken from the shared tier, which this replica has not listed itself
// (an empty cache, within the list's time to live, or a sealed mirror),
// dates its versions so, as it would once listed.
func withListDates(absent, dates map[string]time.Time) map[string]time.Time {
	if len(dates) == 0 {
		return absent
	}
	out := maps.Clone(absent)
	for v, at := range dates {
		if at.After(out[v]) {
			out[v] = at
		}
	}
	return out
}

// importAddedDates dates the versions an import added to list
// (records.VersionList.ImportAdded), which the listing behind it lacked
// (this replica's, or another's from the shared tier that the import
// added to: records.VersionList.ImportOnly), by the time of that listing
// (no later than now: a listing dated ahead of the clock was taken before
// now all the same), as the listing rule does once the origin lists
// them: so that an import does not have a version taken for one of that
// listing until then, nor on a sealed mirror, which lists no more. None
// for a list without a listing's time.
func importAddedDates(list *records.VersionList, now time.Time) map[string]time.Time {
	if len(list.ImportAdded) == 0 || list.ListedAt.IsZero() {
		return nil
	}
	at := list.ListedAt
	if at.After(now) {
		at = now
	}
	out := make(map[string]time.Time, len(list.ImportAdded))
	for _, v := range list.ImportAdded {
		out[v] = at
	}
	return out
}

// canAsk says whether the origin of p may be asked for what dates its
// versions: the engine is not sealed and p's host is not local-only.
func (r *releaseTimes) canAsk(p addrs.Provider) bool {
	return !r.cfg.Offline && !r.parts.Hosts.Local(p.Hostname)
}

// providerReleases returns the release of every version of list that a
// minimum release age of window may hold (see the file comment for what
// is looked up). now is the clock's reading for the whole answer.
func (r *releaseTimes) providerReleases(ctx context.Context, p addrs.Provider, list *records.VersionList, window time.Duration, now time.Time) datedVersions {
	absent := withListDates(withListDates(r.absentOf("provider", p.String()), list.Dates), importAddedDates(list, now))
	out := datedVersions{rels: make(map[string]policy.Release, len(list.Versions)), inferred: map[string]records.VersionEntry{}, absent: absent}
	lines := map[uint64][]versionAt{}
	for _, e := range list.Versions {
		v, err := versions.ParseVersion(e.Version)
		if err != nil {
			continue
		}
		lines[v.Major] = append(lines[v.Major], versionAt{v: v, entry: e})
	}
	lookups := 0
	canAsk := r.canAsk(p)
	for _, line := range lines {
		slices.SortFunc(line, func(a, b versionAt) int {
			switch {
			case a.v.GreaterThan(b.v):
				return -1
			case b.v.GreaterThan(a.v):
				return 1
			}
			return 0
		})
		var anchor time.Time         // release of the newest version known old enough
		var anchorV versions.Version // that version
		anchored, failed := false, false
		for _, va := range line {
			name := va.entry.Version
			ab := absent[name]
			// Only a version below the anchor is taken to be as old: one
			// of the same precedence (another build of the release,
			// "1.1.0+b" beside "1.1.0+a") is not older, and is dated alone.
			if anchored && va.v.LessThan(anchorV) {
				out.rels[name] = policy.Release{Known: true, At: later(anchor, ab)}
				out.inferred[name] = va.entry
				continue
			}
			rel, asked, err := r.alone(ctx, p, va.v, va.entry, ab, canAsk && !failed && lookups < maxLookupsPerList)
			if asked {
				lookups++
			}
			failed = failed || err != nil
			out.rels[name] = rel
			if rel.Known && !rel.InHouse && !anchored && now.Sub(rel.At) >= window {
				anchor, anchorV, anchored = rel.At, va.v, true
			}
		}
	}
	return out
}

// alone dates version v of p (entry, its list entry; ab, the time of the
// latest listing that lacked it) by itself: an in-house build is the
// operator's own; any other by its signature time, known or, when ask
// says so, learned from the origin, and the listing rule. A version
// whose signature time is not known is not known (held). asked reports
// that the origin was asked, and err its failure, logged here.
func (r *releaseTimes) alone(ctx context.Context, p addrs.Provider, v versions.Version, entry records.VersionEntry, ab time.Time, ask bool) (rel policy.Release, asked bool, err error) {
	rec, _ := r.parts.Records.CachedPackage(p, v)
	if rec != nil && rec.Provenance == records.ProvenanceUnsigned {
		return policy.Release{Known: true, InHouse: true}, false, nil
	}
	signed, ok := r.signedAt(ctx, p, entry.Version, rec)
	if !ok && ask {
		at, err := r.lookupShared(ctx, p, v, entry)
		if err != nil {
			if ctx.Err() == nil { // a caller gone is no failure to learn it
				r.log.Warn("could not learn when a version was signed; it is held while a minimum release age applies",
					"provider", p.String(), "version", entry.Version, "error", err)
			}
			return policy.Release{}, true, err
		}
		signed, ok, asked = at, true, true
	}
	if !ok {
		return policy.Release{}, asked, nil
	}
	return policy.Release{Known: true, At: later(signed, ab)}, asked, nil
}

// ownRelease returns the release of version v of p as its own package
// is judged, from d, the dating of the list v was found in: as d
// dates it, unless d inferred it, when it is dated by itself: its
// signature time, learned from the origin when it is not known and ask
// says so (one lookup, kept; a failure holds it). When it may not be
// asked (a sealed mirror, a judgment that asks no origin) and nothing
// here knows its signature (a record kept before evidence was), the
// inference stands.
func (r *releaseTimes) ownRelease(ctx context.Context, p addrs.Provider, v versions.Version, d datedVersions, ask bool) policy.Release {
	name := v.String()
	rel := d.rels[name]
	entry, inferred := d.inferred[name]
	if !inferred {
		return rel
	}
	own, asked, _ := r.alone(ctx, p, v, entry, d.absent[name], ask)
	if own.Known || asked {
		return own
	}
	return rel
}

// lookupShared is lookup for every caller at once, on the engine's
// context, keeping what it learned.
func (r *releaseTimes) lookupShared(ctx context.Context, p addrs.Provider, v versions.Version, entry records.VersionEntry) (time.Time, error) {
	key := signedKey(p, v.String())
	res, err := r.parts.Life.Coalesce(ctx, "release", key, func(ctx context.Context) (any, error) {
		// Again: a lookup that ended just before this one began has
		// learned it.
		r.mu.Lock()
		at, ok := r.signed[key]
		r.mu.Unlock()
		if ok {
			return at, nil
		}
		at, err := r.lookup(ctx, p, v, entry)
		if err != nil {
			return nil, err
		}
		r.keep(key, at)
		return at, nil
	})
	if err != nil {
		return time.Time{}, err
	}
	return res.(time.Time), nil
}

// moduleReleases returns the release of every version of vs (versions
// of m, those whose valid is false left out): dated by the listing rule
// alone (see the file comment), with the dates the list they come from
// carries (records.ModuleVersionList.Dates; nil for none); in-house
// versions (imported without origin) are the operator's own; a version
// no stored listing names is not known.
func (r *releaseTimes) moduleReleases(m addrs.Module, vs []versions.Version, valid []bool, dates map[string]time.Time) map[versions.Version]policy.Release {
	absent := withListDates(r.absentOf("module", m.String()), dates)
	out := make(map[versions.Version]policy.Release, len(vs))
	var listed map[versions.Version]bool // the stored listing, read when needed
	for i, v := range vs {
		if !valid[i] {
			continue
		}
		switch at, ok := absent[v.String()]; {
		case r.inHouseModule(m, v):
			out[v] = policy.Release{Known: true, InHouse: true}
		case ok:
			out[v] = policy.Release{Known: true, At: at}
		default:
			if listed == nil {
				listed = r.storedListing(m)
			}
			if listed[v] {
				out[v] = policy.Release{Known: true} // the bootstrap: released before the mirror first looked
			} else {
				out[v] = policy.Release{}
			}
		}
	}
	return out
}

// moduleRelease is moduleReleases of one version of m.
func (r *releaseTimes) moduleRelease(m addrs.Module, v versions.Version) policy.Release {
	return r.moduleReleases(m, []versions.Version{v}, []bool{true}, nil)[v]
}

// storedListing is the set of versions of m's stored listing (empty when
// there is none).
func (r *releaseTimes) storedListing(m addrs.Module) map[versions.Version]bool {
	var list records.ModuleVersionList
	out := map[versions.Version]bool{}
	if _, err := r.store.GetMeta(records.ModuleVersionsKey(m), &list); err != nil || !records.KnownSchema(list.Schema) {
		return out
	}
	for _, raw := range list.Versions {
		if v, err := addrs.ParseModuleVersion(raw); err == nil {
			out[v] = true
		}
	}
	return out
}

type versionAt struct {
	v     versions.Version
	entry records.VersionEntry
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// inHouseModule says version v of m was imported without origin: the
// operator's own.
func (r *releaseTimes) inHouseModule(m addrs.Module, v versions.Version) bool {
	var rec records.ModuleRecord
	_, err := r.store.GetMeta(records.ModuleRecordKey(m, v), &rec)
	return err == nil && rec.Provenance == records.ProvenanceUnsigned
}

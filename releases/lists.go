package releases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/internal/jsonbound"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// listSchema is the schema of the stored version lists.
const listSchema = 1

// maxListedVersions bounds the versions taken from one list: its newest.
const maxListedVersions = 10000

// maxStoredListBytes bounds a version list as it is stored (its newest
// versions are kept within it): below the largest document the cache
// takes on disk, 4 MiB for the smallest caches (a sixteenth of
// --cache-max-bytes, at least 4 MiB), so that every list fetched is
// stored and the next one is compared with it (the listing rule). A list
// the cache refused would leave every later list a first one, whose
// versions the listing rule cannot date. HashiCorp's Terraform list is
// about half a MiB.
const maxStoredListBytes = 3 << 20

// List is a product's version list, newest first. It is the origin's
// word, which no signature covers: it says what may be asked for, and
// every file then asked for is verified on its own.
type List struct {
	Versions []Listed  `json:"versions"`
	At       time.Time `json:"at"` // when it was fetched from the origin
	Schema   int       `json:"schema"`
}

// Has says whether the list has version, spelt as the origin spells it.
func (l *List) Has(version string) bool {
	return slices.ContainsFunc(l.Versions, func(e Listed) bool { return e.Version == version })
}

// Listed is one version of a List: its platforms (HashiCorp) or its file
// names (OpenTofu), as the origin lists them and as named by the rules of
// the publisher's layout.
type Listed struct {
	Version string   `json:"version"`
	Builds  []Build  `json:"builds,omitempty"`
	Files   []string `json:"files,omitempty"`
}

// ListState says where a list came from.
type ListState struct {
	// Stale says the origin failed and the cached list was served.
	Stale bool
	// At is when the list was fetched from the origin.
	At time.Time
}

// listMemo is a product's version list as stored, decoded: every write
// of a stored list goes through Releases (fetchList, AirGap.addListed),
// which puts the list it stores here, so that what is kept here is what
// the cache holds, and a list is decoded from the cache once (list).
type listMemo struct {
	list *List
}

func listKey(pub Publisher, product string) string {
	return "releases/list/" + string(pub) + "/" + product
}

// Versions returns the product's version list: the cached one while
// younger than Config.ListTTL, else the origin's, or the cached one
// (ListState.Stale) when the origin fails or has not answered within
// Config.StaleAfter (the refresh goes on, for the callers after it).
// Offline, only versions with a verified SHA256SUMS and at least one
// archive cached are listed. The package policy is not applied here
// (mirror/served.Releases does).
func (r *Releases) Versions(ctx context.Context, pub Publisher, product string) (*List, ListState, error) {
	if err := r.CheckProduct(pub, product); err != nil {
		return nil, ListState{}, err
	}
	list, st, err := r.list(ctx, pub, product, r.cfg.ListTTL)
	if r.cfg.Offline && errors.Is(err, records.ErrOffline) {
		// Sealed with no list stored (its origin served none, or none
		// that read, and each version was asked for all the same): what
		// the cache holds is listed all the same (held).
		list, st, err = &List{Schema: listSchema}, ListState{}, nil
	}
	if err != nil {
		return nil, ListState{}, err
	}
	if r.cfg.Offline {
		list = r.held(pub, product, list)
	}
	r.metrics.CLIServed(string(pub), product, "list", st.Stale)
	return list, st, nil
}

// list is Versions without the offline filter, from a list fetched less
// than maxAge ago when there is one.
func (r *Releases) list(ctx context.Context, pub Publisher, product string, maxAge time.Duration) (*List, ListState, error) {
	key := listKey(pub, product)
	r.mu.Lock()
	m := r.lists[key]
	r.mu.Unlock()
	now := r.cfg.Now()
	if m == nil {
		var stored List
		if _, err := r.store.GetMeta(key, &stored); err == nil && stored.Schema == listSchema {
			// Kept, unless a list was put in memory since it was read
			// (fetchList, AirGap.addListed, which stored it after or as
			// this one was read): that one is served, and kept.
			r.mu.Lock()
			if m = r.lists[key]; m == nil {
				m = &listMemo{list: plainFiles(&stored)}
				r.lists[key] = m
			}
			r.mu.Unlock()
		}
	}
	// A list dated more than a day ahead (a clock set forward and back)
	// is taken as expired, not fresh until the clock catches up with it
	// (records.Fresh, as the engine's lists).
	if m != nil && (r.cfg.Offline || records.Fresh(now, m.list.At, maxAge)) {
		return m.list, ListState{At: m.list.At}, nil
	}
	if r.cfg.Offline {
		return nil, ListState{}, records.ErrOffline
	}
	// With a cached list to answer with, the refresh is waited for at
	// most StaleAfter; it goes on (detached, ended by Close), and stores
	// what it fetches for the callers after this one.
	wctx := ctx
	if m != nil {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, r.cfg.StaleAfter)
		defer cancel()
	}
	v, err := r.detached(wctx, key, func(ctx context.Context) (any, error) {
		// Again: a flight that ended just before this one began may
		// have fetched it.
		r.mu.Lock()
		m := r.lists[key]
		r.mu.Unlock()
		if m != nil && records.Fresh(r.cfg.Now(), m.list.At, maxAge) {
			return m.list, nil
		}
		return r.fetchList(ctx, pub, product)
	})
	if errors.Is(err, context.DeadlineExceeded) && wctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w after %s", lifetime.ErrStillWaiting, r.cfg.StaleAfter)
	}
	if err != nil {
		if m != nil && !errors.Is(err, ErrNotFound) && ctx.Err() == nil {
			r.stale.Log(r.log, time.Now(), lifetime.StaleMessage(err, "release list"), "publisher", string(pub), "product", product, "error", err)
			return m.list, ListState{Stale: true, At: m.list.At}, nil
		}
		return nil, ListState{}, err
	}
	list := v.(*List)
	return list, ListState{At: list.At}, nil
}

// minForcedRefresh is how old a version list must be to be fetched again
// before its time to live because a version asked for is not in it (a
// release newer than the list), as for providers' lists.
const minForcedRefresh = time.Minute

// checkListed refuses (ErrNotFound) a version that the product's version
// list does not have, fetching the list again first when it is older
// than minForcedRefresh: what the origin lists is all it publishes, and
// a version it does not list is not asked of it, so that a client naming
// made-up versions costs at most a list fetch a minute, not an origin
// request each. The list is unsigned and this decides only what is asked
// for; what is then fetched is verified on its own. Only a list the
// origin answered refuses: when there is none (an origin that serves no
// list, or an origin in trouble) or it could not be refreshed (served
// stale), the version is asked for as it was before.
func (r *Releases) checkListed(ctx context.Context, pub Publisher, product, version string) error {
	list, st, err := r.list(ctx, pub, product, r.cfg.ListTTL)
	if err != nil || st.Stale || list.Has(version) {
		return nil
	}
	if list, st, err = r.list(ctx, pub, product, minForcedRefresh); err != nil || st.Stale || list.Has(version) {
		return nil
	}
	return fmt.Errorf("%w: %s %s is not in the origin's version list", ErrNotFound, product, version)
}

// fetchList fetches the origin's list, notes the versions it lists for
// the first time (the listing rule, see listing.go) and stores it.
func (r *Releases) fetchList(ctx context.Context, pub Publisher, product string) (*List, error) {
	var (
		data []byte
		err  error
	)
	if pub == OpenTofu {
		data, err = r.fetchDocument(ctx, r.cfg.OpenTofuAPIURL, r.cfg.MaxListBytes)
	} else {
		data, err = r.fetchDocument(ctx, strings.TrimSuffix(r.cfg.HashiCorpURL, "/")+"/"+product+"/index.json", r.cfg.MaxListBytes)
	}
	if err != nil {
		return nil, err
	}
	var list *List
	if pub == OpenTofu {
		list, err = parseTofuList(data)
	} else {
		list, err = parseHashiCorpList(product, data)
	}
	if err != nil {
		// The origin's answer is at fault, not the mirror: a bad
		// gateway, as a registry's malformed versions answer is.
		return nil, &failure.OriginError{Kind: failure.OriginFailed,
			Err: fmt.Errorf("%s's version list of %s: %w", pub, product, err)}
	}
	list.At, list.Schema = r.cfg.Now().UTC(), listSchema
	key := listKey(pub, product)
	var prev List
	if _, err := r.store.GetMeta(key, &prev); err == nil && prev.Schema == listSchema {
		r.noteListing(pub, product, &prev, list)
	}
	if err := r.store.PutMeta(key, list); err != nil {
		r.log.Error("release list served but not cached", "publisher", string(pub), "product", product, "error", err)
	}
	r.mu.Lock()
	r.lists[key] = &listMemo{list: list}
	r.mu.Unlock()
	return list, nil
}

// maxListEntries bounds the entries of a version list as it is read: ten
// times the versions kept of it. A list with more is refused (an origin
// fault, as a malformed list is), before its entries are decoded.
const maxListEntries = 10 * maxListedVersions

// listEntryLimits bound one version of a list as it is decoded (some two
// thousand builds or files): a list is too large to bound as a whole
// (HashiCorp's runs to some hundred elements a version), so each of its
// versions is bounded on its own, and one over the bounds refuses the
// list.
var listEntryLimits = jsonbound.Limits{Depth: 8, Elements: 1 << 14}

// maxListElements bounds the elements a version list's entries hold
// together (jsonbound.Budget): twice those of a list of as many versions
// as are kept (maxListedVersions), each with the fourteen builds and the
// fields of a release of HashiCorp's (some hundred elements a version),
// some fifty times those of HashiCorp's own Terraform list. Without it, a
// list within the byte limit of versions each just within listEntryLimits
// (64 MiB of "{}") took seconds of CPU to decode at every refresh; it is
// refused once its entries hold more.
const maxListElements = 1 << 21

// listVersions is the "versions" member of a version list document. A
// document without one, or with a null one (an error answered with 200,
// such as {"message":"API rate limit exceeded"}), is not a list: taken
// for an empty one, it would be stored over the cached list and served
// fresh.
func listVersions(data []byte) ([]byte, error) {
	var versions []byte
	err := jsonbound.Object(data, 1024, func(key string, value []byte) error {
		if key == "versions" {
			versions = value
		}
		return nil
	})
	if err == nil && (versions == nil || string(versions) == "null") {
		err = errors.New(`no "versions"`)
	}
	return versions, err
}

// parseHashiCorpList reads PRODUCT/index.json: the versions whose key is
// a canonical version, each with the builds named as the layout names
// them (PRODUCT_VERSION_OS_ARCH.zip); everything else is left out. A
// version listed twice is taken as first listed.
func parseHashiCorpList(product string, data []byte) (*List, error) {
	doc, err := listVersions(data)
	list := &List{}
	seen := map[string]bool{}
	budget := jsonbound.NewBudget(maxListElements)
	if err == nil {
		err = jsonbound.Object(doc, maxListEntries, func(v string, raw []byte) error {
			if _, err := CanonicalVersion(v); err != nil || seen[v] {
				return nil
			}
			var ver struct {
				Builds []struct {
					OS       string `json:"os"`
					Arch     string `json:"arch"`
					Filename string `json:"filename"`
				} `json:"builds"`
			}
			if err := budget.Unmarshal(raw, &ver, listEntryLimits); err != nil {
				return fmt.Errorf("version %s: %w", v, err)
			}
			seen[v] = true
			l := Listed{Version: v}
			for _, b := range ver.Builds {
				name := product + "_" + v + "_" + b.OS + "_" + b.Arch + ".zip"
				if platformPart(b.OS) && platformPart(b.Arch) && b.Filename == name && len(l.Builds) < 64 {
					l.Builds = append(l.Builds, Build{OS: b.OS, Arch: b.Arch, Filename: name})
				}
			}
			list.Versions = append(list.Versions, l)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("not a releases index: %w", err)
	}
	newest(list)
	return list, nil
}

// parseTofuList reads OpenTofu's api.json: {"versions": [{"id", "files"}]}.
func parseTofuList(data []byte) (*List, error) {
	doc, err := listVersions(data)
	list := &List{}
	seen := map[string]bool{}
	budget := jsonbound.NewBudget(maxListElements)
	if err == nil {
		entry := 0
		err = jsonbound.Array(doc, maxListEntries, func(raw []byte) error {
			entry++
			var ver struct {
				ID    string   `json:"id"`
				Files []string `json:"files"`
			}
			if err := budget.Unmarshal(raw, &ver, listEntryLimits); err != nil {
				return fmt.Errorf("entry %d: %w", entry, err)
			}
			if _, err := CanonicalVersion(ver.ID); err != nil || seen[ver.ID] {
				return nil
			}
			seen[ver.ID] = true
			l := Listed{Version: ver.ID}
			for _, f := range ver.Files {
				if tofuFileName(ver.ID, f) && len(l.Files) < 128 {
					l.Files = append(l.Files, f)
				}
			}
			list.Versions = append(list.Versions, l)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("not an OpenTofu version list: %w", err)
	}
	newest(list)
	return list, nil
}

// newest sorts list newest first and keeps its newest versions, at most
// maxListedVersions within maxStoredListBytes: the same ones whatever
// order the origin gave them in (HashiCorp's versions are the members of
// an object, which have none), so that a list too long to keep whole
// never leaves out its newest release, nor a different one at each fetch
// (which the next fetch would take for a version first listed).
func newest(list *List) {
	sortList(list)
	if len(list.Versions) > maxListedVersions {
		list.Versions = list.Versions[:maxListedVersions]
	}
	size := 256 // the list's own fields
	for i, l := range list.Versions {
		b, err := json.Marshal(l)
		size += len(b) + 1
		if err != nil || size > maxStoredListBytes {
			list.Versions = list.Versions[:i]
			return
		}
	}
}

// tofuFileName says whether f, listed among the files of OpenTofu's
// version, is a plain file name of that version (tofu_VERSION_…, of
// letters, digits, ".", "_", "-" and "+", no ".."), which an installer
// may put in a URL as it is: the list is unsigned, so a name that would
// add a query, a fragment, an escaped separator or markup to such a URL
// is left out.
func tofuFileName(version, f string) bool {
	rest, ok := strings.CutPrefix(f, TofuProduct+"_"+version+"_")
	if !ok || rest == "" || len(f) >= 128 || strings.Contains(f, "..") {
		return false
	}
	for _, c := range rest {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-+", c)) {
			return false
		}
	}
	return true
}

// plainFiles is list with only the file names tofuFileName lets through:
// a list stored before they were left out is served as one fetched now.
func plainFiles(list *List) *List {
	for i, l := range list.Versions {
		if slices.ContainsFunc(l.Files, func(f string) bool { return !tofuFileName(l.Version, f) }) {
			list.Versions[i].Files = slices.DeleteFunc(slices.Clone(l.Files), func(f string) bool { return !tofuFileName(l.Version, f) })
		}
	}
	return list
}

// sortList orders a list newest first; versions of equal precedence
// (builds of one release, "1.9.0+a" and "1.9.0+b") by their spelling, so
// that the order is the same whatever order they came in. Each version
// is parsed once.
func sortList(list *List) {
	parsed := make(map[string]versions.Version, len(list.Versions))
	for _, l := range list.Versions {
		parsed[l.Version], _ = versions.ParseVersion(l.Version)
	}
	slices.SortFunc(list.Versions, func(a, b Listed) int {
		va, vb := parsed[a.Version], parsed[b.Version]
		switch {
		case va.GreaterThan(vb):
			return -1
		case vb.GreaterThan(va):
			return 1
		}
		return strings.Compare(a.Version, b.Version)
	})
}

// PreRelease reports whether version is a pre-release: a hyphen before
// its build metadata ("1.10.0-rc1"; not "1.9.1+ci-2", a build of a
// release).
func PreRelease(version string) bool {
	pre, _, _ := strings.Cut(version, "+")
	return strings.Contains(pre, "-")
}

// CompareVersions orders two versions as versions (-1 when a is older).
func CompareVersions(a, b string) int {
	va, _ := versions.ParseVersion(a)
	vb, _ := versions.ParseVersion(b)
	switch {
	case va.GreaterThan(vb):
		return 1
	case vb.GreaterThan(va):
		return -1
	}
	return 0
}

// held is list as a sealed mirror serves it: the versions with a
// verified SHA256SUMS and at least one of its archives cached, each
// naming only what the mirror serves of it (heldListed). The versions
// whose SHA256SUMS the cache holds are found with one scan of the
// product's stored ones, not a lookup for each version listed: a sealed
// mirror holds few of the hundreds of versions its publisher lists.
// Should the scan fail, every version is looked up.
func (r *Releases) held(pub Publisher, product string, list *List) *List {
	prefix := sumsKey(pub, product, "")
	stored := map[string]bool{}
	scanErr := r.store.ScanMeta(prefix, func(key string, _ time.Time, _ json.RawMessage) error {
		stored[strings.TrimPrefix(key, prefix)] = true
		return nil
	})
	if scanErr != nil {
		r.log.Warn("could not scan the stored SHA256SUMS; looking each version up", "publisher", string(pub), "product", product, "error", scanErr)
	}
	out := &List{At: list.At, Schema: list.Schema}
	for _, l := range list.Versions {
		if scanErr == nil && !stored[l.Version] {
			continue
		}
		delete(stored, l.Version)
		s, err := r.HeldSums(pub, product, l.Version)
		if err != nil {
			continue
		}
		if h, ok := r.heldListed(s, l); ok {
			out.Versions = append(out.Versions, h)
		}
	}
	// The versions held that the stored list lacks (there is none when
	// the origin served no list: each version was asked for all the
	// same), as their signed SHA256SUMS names their files.
	added := false
	for version := range stored {
		s, err := r.HeldSums(pub, product, version)
		if err != nil || s.Version != version {
			continue
		}
		if h, ok := r.heldListed(s, sumsListed(s)); ok {
			out.Versions, added = append(out.Versions, h), true
		}
	}
	if added {
		sortList(out)
	}
	return out
}

// sumsListed is the list entry of s's version as its signed SHA256SUMS
// names its files: HashiCorp's builds, OpenTofu's archives, SHA256SUMS,
// its .gpgsig and the files passed through (heldListed keeps of them
// what the mirror holds).
func sumsListed(s *Sums) Listed {
	l := Listed{Version: s.Version}
	for _, b := range s.Builds() {
		if s.Publisher == OpenTofu {
			l.Files = append(l.Files, b.Filename)
		} else {
			l.Builds = append(l.Builds, Build{OS: b.OS, Arch: b.Arch, Filename: b.Filename})
		}
	}
	if s.Publisher == OpenTofu {
		sums := SumsName(s.Publisher, s.Product, s.Version)
		l.Files = append(l.Files, sums, sums+".gpgsig")
		l.Files = append(l.Files, passedThrough(s.Publisher, s.Product, s.Version)...)
	}
	return l
}

// heldListed is l as a sealed mirror lists it, of a version whose verified
// SHA256SUMS is s: HashiCorp's builds whose archives are cached,
// OpenTofu's files the mirror serves (the archives cached, the SHA256SUMS
// and its .gpgsig, the cosign files held); not ok when no archive of it is
// cached. A listing names no file a client would be answered 404 for.
func (r *Releases) heldListed(s *Sums, l Listed) (Listed, bool) {
	builds := r.ServedBuilds(s)
	if len(builds) == 0 {
		return Listed{}, false
	}
	cached := func(name string) bool {
		return slices.ContainsFunc(builds, func(b Build) bool { return b.Filename == name })
	}
	out := Listed{Version: l.Version}
	for _, b := range l.Builds {
		if cached(b.Filename) {
			out.Builds = append(out.Builds, b)
		}
	}
	passed := passedThrough(s.Publisher, s.Product, s.Version)
	for _, f := range l.Files {
		keep := Serves(s.Publisher, s.Product, s.Version, f) // and, of what it serves, what is held:
		switch _, _, archive := archiveName(s.Product, s.Version, f); {
		case !keep:
		case archive:
			keep = cached(f)
		case slices.Contains(passed, f):
			var data []byte
			_, err := r.store.GetMeta(fileKey(s.Publisher, s.Product, s.Version, f), &data)
			keep = err == nil
		}
		if keep {
			out.Files = append(out.Files, f)
		}
	}
	return out, true
}

package releases

// Carrying CLI versions across an air gap: what an export reads of the
// versions the cache holds (AirGap.Held), and what an import loads
// (AirGap.Import), verified exactly as the pull-through path verifies
// them. Package
// airgap writes and reads the bundle; this side owns the trust: a
// SHA256SUMS is taken only once its signature verifies with the
// publisher's keys configured here, never with a key that comes with it,
// and an archive only once its sha256 matches that SHA256SUMS.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// AirGap is the releases side as an air gap sees it: the versions to
// export and the import of one. Releases.AirGap returns it.
type AirGap struct{ r *Releases }

// AirGap returns the releases side's air-gap side.
func (r *Releases) AirGap() *AirGap { return &AirGap{r: r} }

// HeldVersion is a CLI version the cache holds: its SHA256SUMS, verified
// again with the keys in force, its entry in the product's version list,
// and the archives of it in the cache. One whose stored SHA256SUMS no
// longer verifies has Err set, and only its names.
type HeldVersion struct {
	Publisher        Publisher
	Product, Version string
	// Err says why the stored SHA256SUMS is not taken: it does not verify
	// with the keys in force (they changed since it was stored).
	Err  error
	Sums *Sums
	// Listed is the version's entry in the stored version list, or one
	// made from the SHA256SUMS when the stored list lacks it.
	Listed Listed
	// Cached are the archives of the version in the cache.
	Cached []Build
	// ListedAt is the listing rule's time of the version (zero when
	// none): with Sums.SignedAt, what the package policy judges it by.
	ListedAt time.Time
	// PassedThrough are the files of the version passed through as the
	// origin sent them and kept (OpenTofu's cosign .sig and .pem), by
	// name: nothing vouches for them but the exporting mirror.
	PassedThrough map[string][]byte
}

// Held calls fn with every version of a served product whose verified
// SHA256SUMS and at least one archive the cache holds, by publisher,
// product and version; and with every one whose stored SHA256SUMS no
// longer verifies with the keys in force (HeldVersion.Err).
func (a *AirGap) Held(fn func(HeldVersion) error) error {
	r := a.r
	lists := map[string]*List{}
	return r.store.ScanMeta("releases/sums/", func(key string, _ time.Time, _ json.RawMessage) error {
		parts := strings.Split(strings.TrimPrefix(key, "releases/sums/"), "/")
		if len(parts) != 3 || r.CheckProduct(Publisher(parts[0]), parts[1]) != nil {
			return nil
		}
		s, err := r.loadSums(key)
		switch {
		case errors.Is(err, cache.ErrNotFound):
			return nil // gone, or of another schema
		case err != nil:
			return fn(HeldVersion{Publisher: Publisher(parts[0]), Product: parts[1], Version: parts[2],
				Err: fmt.Errorf("its stored SHA256SUMS does not verify with the %s keys in force (%s): %w", parts[0], keysSetting(Publisher(parts[0])), err)})
		case key != sumsKey(s.Publisher, s.Product, s.Version):
			return nil
		}
		h := HeldVersion{Publisher: s.Publisher, Product: s.Product, Version: s.Version, Sums: s}
		for _, b := range s.Builds() {
			if r.engine.HasBlob(b.SHA256) {
				h.Cached = append(h.Cached, b)
			}
		}
		if len(h.Cached) == 0 {
			return nil
		}
		lk := listKey(s.Publisher, s.Product)
		list, ok := lists[lk]
		if !ok {
			var stored List
			if _, err := r.store.GetMeta(lk, &stored); err == nil && stored.Schema == listSchema {
				list = &stored
			}
			lists[lk] = list
		}
		h.Listed = listedOf(s, list)
		h.ListedAt = r.ListingTime(s.Publisher, s.Product, s.Version)
		for _, name := range passedThrough(s.Publisher, s.Product, s.Version) {
			// One kept before its shape was checked, and bad, stays behind.
			if data, ok := heldCosignFile(r.store, fileKey(s.Publisher, s.Product, s.Version, name), name); ok {
				if h.PassedThrough == nil {
					h.PassedThrough = map[string][]byte{}
				}
				h.PassedThrough[name] = data
			}
		}
		return fn(h)
	})
}

// listedOf is s's entry in list, or one made from s.
func listedOf(s *Sums, list *List) Listed {
	if list != nil {
		if i := slices.IndexFunc(list.Versions, func(l Listed) bool { return l.Version == s.Version }); i >= 0 {
			return list.Versions[i]
		}
	}
	return Listed{Version: s.Version}
}

// Imported is a CLI version read from an air-gap bundle.
type Imported struct {
	Publisher        Publisher
	Product, Version string
	// Document and Signature are its SHA256SUMS and the signature the
	// exporting mirror verified it with.
	Document, Signature []byte
	// Files is OpenTofu's list of the version's file names, as the
	// exporting mirror's version list had it (HashiCorp's builds are
	// taken from the SHA256SUMS).
	Files    []string
	Archives []ImportedArchive
	// PassedThrough are files the door passes through unverified
	// (OpenTofu's cosign .sig and .pem), by name, kept as given.
	PassedThrough map[string][]byte
}

// ImportedArchive is one archive of an Imported version.
type ImportedArchive struct {
	// Filename is its name, which the SHA256SUMS must list.
	Filename string
	// SHA256, when set, is the sha256 the bundle's manifest gives it,
	// which must be the SHA256SUMS's.
	SHA256 string
	// Open opens its bytes.
	Open func(ctx context.Context) (io.ReadCloser, int64, error)
}

// ImportOutcome is what Import did.
type ImportOutcome struct {
	// Archives are the archives imported, Present those the cache had
	// already; Bytes the size of those imported.
	Archives, Present int
	Bytes             int64
	// SignedAt and ListedAt are what the package policy judges the
	// version by (see HeldVersion): an import stores what verifies, and
	// the policy decides what is served.
	SignedAt, ListedAt time.Time
}

// ImportError is an imported version refused, and why; File names the
// file at fault as the publisher names it.
type ImportError struct {
	File string
	Err  error
}

func (e *ImportError) Error() string { return e.File + ": " + e.Err.Error() }
func (e *ImportError) Unwrap() error { return e.Err }

// Import verifies an imported CLI version as the pull-through path
// verifies one from its origin and stores it: its SHA256SUMS against the
// publisher's keys configured here (the signature that comes with it is
// checked, never trusted for its key), each archive against that
// SHA256SUMS under a name it signed, and the zip holding the program.
// The SHA256SUMS is one the exporting mirror verified and stored, which
// the caller's other anchor vouches for (package airgap imports a CLI
// version only when a trusted export key's manifest lists it), so its
// signature is judged as a stored one's (verifySums): a key that expired
// after the export still verifies what it signed while valid.
// Every archive's sha256 is checked before any is stored (each one's zip
// as it is stored), and the SHA256SUMS is stored last, so that a version
// refused leaves nothing a client could be served: an archive stored
// before a later one failed is named by no stored SHA256SUMS, and
// retention removes it. The version then joins the stored version
// list, which is what a sealed mirror lists. A file passed through that
// comes with it (OpenTofu's cosign .sig and .pem) must have the shape
// cosign writes (cosignShape), as one from the origin must. A product
// this mirror does not serve is refused (ErrNotFound).
func (a *AirGap) Import(ctx context.Context, in Imported) (ImportOutcome, error) {
	r := a.r
	var out ImportOutcome
	pub, product, version := in.Publisher, in.Product, in.Version
	if pub != HashiCorp && pub != OpenTofu {
		return out, fmt.Errorf("%w: no publisher %q", ErrNotFound, pub)
	}
	if err := r.CheckProduct(pub, product); err != nil {
		return out, err
	}
	if _, err := CanonicalVersion(version); err != nil {
		return out, err
	}
	sumsName := SumsName(pub, product, version)
	if len(in.Document) > maxSmallDocument || len(in.Signature) > maxSmallDocument {
		return out, &ImportError{File: sumsName, Err: errors.New("larger than a SHA256SUMS and its signature may be")}
	}
	s := &Sums{Publisher: pub, Product: product, Version: version, Document: in.Document, Signature: in.Signature, Schema: sumsSchema, Provenance: records.ProvenanceImported}
	if err := r.verifySums(s, true); err != nil {
		a.r.refusedSums(pub, product, err)
		return out, &ImportError{File: sumsName, Err: fmt.Errorf("does not verify with the %s keys this mirror trusts (%s): %w", pub, keysSetting(pub), err)}
	}
	for name, data := range in.PassedThrough {
		if !slices.Contains(passedThrough(pub, product, version), name) {
			return out, &ImportError{File: name, Err: errors.New("is not a file the mirror passes through")}
		}
		if err := cosignShape(name, data); err != nil {
			return out, &ImportError{File: name, Err: fmt.Errorf("is not a cosign file: %w", err)}
		}
	}
	if len(in.Archives) == 0 {
		return out, &ImportError{File: sumsName, Err: errors.New("no archive of the version comes with it")}
	}
	builds := s.Builds()
	blobs := make([]mirror.Blob, 0, len(in.Archives))
	seen := map[string]bool{}
	for _, arc := range in.Archives {
		if seen[arc.Filename] {
			return out, &ImportError{File: arc.Filename, Err: errors.New("is given twice")}
		}
		seen[arc.Filename] = true
		i := slices.IndexFunc(builds, func(b Build) bool { return b.Filename == arc.Filename })
		if i < 0 {
			return out, &ImportError{File: arc.Filename, Err: fmt.Errorf("is not an archive its signed %s lists", sumsName)}
		}
		want := builds[i].SHA256
		if arc.SHA256 != "" && arc.SHA256 != want {
			return out, &ImportError{File: arc.Filename, Err: fmt.Errorf("the bundle gives sha256 %s, the signed %s %s", arc.SHA256, sumsName, want)}
		}
		if err := checkSHA256(ctx, arc, want); err != nil {
			a.r.refusedSums(pub, product, err)
			return out, &ImportError{File: arc.Filename, Err: err}
		}
		blobs = append(blobs, r.archiveBlob(pub, product, version, want, arc.Filename, "", arc.Open))
	}
	// Retention keeps the archives from the moment they are committed,
	// and from the end of the import only those the stored SHA256SUMS
	// names.
	imp := r.engine.AirGap().BeginImport()
	defer imp.End()
	r.imports.Lock() // not while retention removes a version
	defer r.imports.Unlock()
	for _, b := range blobs {
		size, present, err := r.engine.AirGap().ImportBlob(ctx, imp, b)
		if err != nil {
			return out, &ImportError{File: b.Filename, Err: err}
		}
		if present {
			out.Present++
		} else {
			out.Archives++
			out.Bytes += size
		}
	}
	key := sumsKey(pub, product, version)
	if err := r.store.PutMeta(key, s); err != nil {
		return out, fmt.Errorf("storing %s: %w", sumsName, err)
	}
	r.remember(key, s)
	for name, data := range in.PassedThrough {
		key := fileKey(pub, product, version, name)
		var had []byte
		if _, err := r.store.GetMeta(key, &had); err == nil {
			continue // an import never changes what the mirror serves
		}
		if err := r.store.PutMeta(key, data); err != nil {
			return out, fmt.Errorf("storing %s: %w", name, err)
		}
	}
	if err := a.addListed(s, in.Files); err != nil {
		return out, fmt.Errorf("adding %s %s to the stored version list: %w", product, version, err)
	}
	out.SignedAt, out.ListedAt = s.SignedAt, r.ListingTime(pub, product, version)
	return out, nil
}

// keysSetting names the setting of a publisher's keys.
func keysSetting(pub Publisher) string {
	if pub == OpenTofu {
		return "--releases-opentofu-keys"
	}
	return "--releases-hashicorp-keys"
}

// checkSHA256 reads a whole and checks its sha256.
func checkSHA256(ctx context.Context, a ImportedArchive, want string) error {
	if a.Open == nil {
		return errors.New("has nothing to read")
	}
	rc, _, err := a.Open(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return &verify.Error{Reason: verify.ReasonChecksum, Detail: fmt.Sprintf("sha256 %s, its signed SHA256SUMS says %s", got, want)}
	}
	return nil
}

// addListed adds s's version to the stored version list of its product
// (and the one in memory), unless it is there: HashiCorp's builds as the
// signed SHA256SUMS names them, OpenTofu's files as given, under the
// rules its list is read by. A list made here is dated at the zero time,
// so that a mirror that is not sealed fetches the origin's at once.
func (a *AirGap) addListed(s *Sums, files []string) error {
	r := a.r
	key := listKey(s.Publisher, s.Product)
	var list List
	if _, err := r.store.GetMeta(key, &list); err != nil || list.Schema != listSchema {
		list = List{Schema: listSchema}
	}
	if slices.ContainsFunc(list.Versions, func(l Listed) bool { return l.Version == s.Version }) {
		return nil
	}
	l := Listed{Version: s.Version}
	if s.Publisher == OpenTofu {
		for _, f := range files {
			if tofuFileName(s.Version, f) && len(l.Files) < 128 && !slices.Contains(l.Files, f) {
				l.Files = append(l.Files, f)
			}
		}
		if len(l.Files) == 0 {
			sums := SumsName(s.Publisher, s.Product, s.Version)
			for _, b := range s.Builds() {
				l.Files = append(l.Files, b.Filename)
			}
			l.Files = append(l.Files, sums, sums+".gpgsig")
		}
	} else {
		for _, b := range s.Builds() {
			l.Builds = append(l.Builds, Build{OS: b.OS, Arch: b.Arch, Filename: b.Filename})
		}
	}
	if len(list.Versions) >= maxListedVersions {
		return fmt.Errorf("it holds %d versions, the most taken", maxListedVersions)
	}
	list.Versions = append(list.Versions, l)
	sortList(&list)
	if err := r.store.PutMeta(key, &list); err != nil {
		return err
	}
	r.mu.Lock()
	r.lists[key] = &listMemo{list: &list}
	r.mu.Unlock()
	return nil
}

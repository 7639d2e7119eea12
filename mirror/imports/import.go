package imports

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/originguard"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// Importer loads provider versions imported from outside their origin
// into the engine's cache, verified exactly as if they came from the
// origin: mirror.AirGap.Import. Its methods are safe for concurrent use.
type Importer struct {
	parts   Parts
	cfg     Config
	store   Store
	log     *slog.Logger
	metrics Metrics
}

// Parts are the engine's components an import takes; all are required.
type Parts struct {
	Life        *lifetime.Lifetime    // the work Shutdown waits for, the import lock, coalescing, the notifier
	Records     *stored.Records       // the stored package records and version lists, the h1: of cached archives
	Source      stored.Source         // the version lists as the engine serves them: the cache's, else the shared tier's
	Hosts       *originguard.Hosts    // the hosts imports loaded packages of
	Withholding *unsigned.Withholding // the hosts that take imports without signature
	Fetcher     *fetch.Fetcher        // commits the archives, verified as downloads are
}

// Store is what an import reads and writes of the cache. *cache.Store
// implements it.
type Store interface {
	GetMeta(key string, v any) (time.Time, error)
	PutMeta(key string, v any) error
}

// Metrics receives what an import observes (mirror.Metrics).
type Metrics interface {
	CacheWriteFailed()
	// VerificationFailed counts a package refused, by verify.Reason.
	VerificationFailed(reason string)
}

// Config configures an Importer: the engine's (mirror.Config), its
// defaults filled in. Every field is required.
type Config struct {
	// MaxArchiveBytes refuses larger archives.
	MaxArchiveBytes int64
	Now             func() time.Time
	Logger          *slog.Logger
}

// New returns the importer of an engine.
func New(cfg Config, parts Parts, store Store, metrics Metrics) (*Importer, error) {
	if parts.Life == nil || parts.Records == nil || parts.Source == nil || parts.Hosts == nil || parts.Withholding == nil || parts.Fetcher == nil || store == nil || metrics == nil || cfg.Now == nil || cfg.Logger == nil || cfg.MaxArchiveBytes <= 0 {
		return nil, errors.New("imports: the engine's parts, a store, metrics, a clock, a logger and the archive size limit are required")
	}
	return &Importer{parts: parts, cfg: cfg, store: store, log: cfg.Logger, metrics: metrics}, nil
}

// Imported is one provider version loaded from outside the origin (an
// export of another mirror, a `terraform providers mirror` directory or
// in-house builds), for Import.
type Imported struct {
	Provider addrs.Provider
	Version  versions.Version
	// Documents are the origin's SHA256SUMS documents with their
	// signatures and signing keys, byte for byte; each package refers to
	// its own by index. Empty when Unsigned.
	Documents []records.SumsDocument
	// Packages are the version's packages, one per platform.
	Packages []Package
	// Protocols are the version's plugin protocol versions ("5.0"), for
	// the version list; optional. No signature over SHA256SUMS covers
	// them: the caller gives them only when its anchor vouches for them
	// (airgap: the exporting mirror's manifest), and the first import of
	// the version that gives them sets them.
	Protocols []string
	// Unsigned accepts packages without any signature: they are checked
	// against their H1 where given, and recorded as records.ProvenanceUnsigned.
	Unsigned bool
}

// Package is one platform's package of an Imported version.
type Package struct {
	// Platform is os_arch.
	Platform string
	// Filename is the archive's name as the input gives it (any name when
	// Unsigned, which keeps it). A signed package's must be the name
	// derived from the provider's type, the version and Platform (see
	// signednames.go), under which the SHA256SUMS document lists it.
	Filename string
	// DownloadURL, Protocols, OS, Arch and Shasum are the origin's package
	// metadata, as it gave them (empty when Unsigned); OS and Arch must be
	// Platform's. DownloadURL is not kept: no signature covers it, and an
	// imported archive is never fetched again from a host the input
	// names (the archive record Import stores has no URL, which is how
	// retention knows it cannot be fetched again, in a record of the
	// origin's too). Protocols, which no signature covers either, are
	// kept as given: the caller leaves them empty unless its anchor
	// vouches for them, as Imported.Protocols.
	DownloadURL string
	Protocols   []string
	OS, Arch    string
	Shasum      string
	// Packages is the origin's "packages" (OpenTofu's hashes and sizes of
	// every platform's archive of the version), as it gave them; nil when
	// it gave none. Checked as an origin's are (ignored when Unsigned).
	Packages map[string]registryjson.PackageHashes
	// Document is the index in Imported.Documents of the SHA256SUMS
	// document that lists this package.
	Document int
	// H1 is the h1: hash the archive must have, when known ("").
	H1 string
	// SHA256 is the sha256 (lowercase hex) the archive must have, when
	// known (""): what the caller's trust anchor vouched for. A signed
	// package's line in its SHA256SUMS must agree; an unsigned one is
	// then stored without being read twice.
	SHA256 string
	// Open opens the archive's bytes and returns its size (-1 if unknown).
	Open func(ctx context.Context) (io.ReadCloser, int64, error)
}

// Error is a failure of Import that one imported item caused: a
// SHA256SUMS document (Document >= 0) or a package (Package >= 0), so
// that the caller can name the file it read it from.
type Error struct {
	Document int // index in Imported.Documents, or -1
	Package  int // index in Imported.Packages, or -1
	Err      error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func docError(i int, err error) error { return &Error{Document: i, Package: -1, Err: err} }
func pkgError(i int, err error) error { return &Error{Document: -1, Package: i, Err: err} }

// Result says what Import did with each package, in the order given.
type Result struct {
	Packages []Outcome
}

// Outcome is what Import did with one package.
type Outcome struct {
	Platform string
	// Present says the cache held the package already (the version's
	// record, for the platform, with the archive cached); nothing was read.
	Present bool
	// Size is the archive's size in bytes.
	Size int64
}

// Import verifies an imported version exactly as if it came from the
// origin and stores it. Whether the input is to be trusted at all is the
// caller's decision (airgap's, from the operator's keys): the signing keys
// in Documents are what the signatures are checked against, not a reason
// to trust them; Package.SHA256 carries what the caller's anchor
// vouched for. It checks: the signature over each SHA256SUMS document with
// its signing keys, that each is the document of p's type and version v,
// each package's file name, os and arch against those of its platform,
// never believing the input's over the signed names (see signednames.go),
// and its shasum against the line of that name (and
// its "packages" hashes as far as they can be checked, see
// records.CheckPackageHashes: the h1: ones once the archives are cached), and
// then each archive's sha256 and that it is an installable package, as
// the archive fetcher checks an origin download (the same code commits
// it). Only once every archive is committed is the version's record
// stored and the version added to its provider's cached version list;
// a version that fails any check leaves no record, so nothing of it is
// served. The provider's host needs not be an allowed origin: a host that
// is not one becomes local-only (served from the cache, never contacted).
// An Unsigned version under an allowed origin is refused (unsigned.ErrUnsignedOrigin)
// unless Config.UnsignedHosts names the host: it would shadow the
// origin's provider (see package mirror/unsigned).
//
// Packages the cache holds already are checked against the record: the
// same sha256 (or nothing is stored). A version cached with a signature
// is not completed by an unsigned import, nor the other way round; both
// are checked again against the record the import joins when it is
// stored, which a metadata fetch may have written meanwhile.
//
// Errors: a *verify.Error (verify.ErrIntegrity) naming the file when a
// check fails; records.ErrShutDown; errors opening or storing the archives. An
// error that one document or package caused is an *Error.
func (s *Importer) Import(ctx context.Context, in Imported) (Result, error) {
	if !s.parts.Life.StartWork() {
		return Result{}, records.ErrShutDown
	}
	defer s.parts.Life.EndWork()
	// What is kept from the size limit, and whether it exceeds it, is
	// recomputed once the import has written its records (or failed:
	// an archive it committed that no record names is not kept).
	imp := s.parts.Life.BeginImport()
	defer imp.End()
	s.parts.Life.Imports().Lock()
	defer s.parts.Life.Imports().Unlock()
	p, v := in.Provider, in.Version
	if len(in.Packages) == 0 {
		return Result{}, fmt.Errorf("%s %s: nothing to import", p, v)
	}
	provenance := records.ProvenanceImported
	if in.Unsigned {
		provenance = records.ProvenanceUnsigned
		if !s.parts.Withholding.UnsignedAllowed(p.Hostname) {
			err := unsigned.Refused(p)
			s.log.Warn("import without signature refused under an allowed origin host", "provider", p.String(), "version", v.String())
			return Result{}, err
		}
	}

	// The metadata: checked before any archive is read.
	archives := make([]records.ArchiveRecord, len(in.Packages))
	var rels []records.Release
	if in.Unsigned {
		if err := checkPlatforms(in); err != nil {
			return Result{}, err
		}
		for i, pkg := range in.Packages {
			a := records.ArchiveRecord{Filename: pkg.Filename, SHA256: strings.ToLower(pkg.SHA256)} // no URL: see Package.DownloadURL
			if a.SHA256 == "" {
				sha, err := s.sumArchive(ctx, pkg)
				if err != nil {
					return Result{}, pkgError(i, s.refuse(p, v, pkg.Platform, err))
				}
				a.SHA256 = sha
			}
			archives[i] = a
		}
	} else {
		var err error
		if archives, rels, err = signedArchives(in, s.parts.Records.H1); err != nil {
			return Result{}, s.refuseImport(in, err)
		}
	}

	// The record it will join, if the cache has one (checked again when
	// the record is stored: it may change in between).
	cached, held := s.parts.Records.CachedPackage(p, v)
	if held && !s.setAside(p, cached, in) {
		if err := s.joinable(p, v, cached, in, archives, provenance); err != nil {
			return Result{}, err
		}
	}

	// The archives, through the fetcher.
	res := Result{Packages: make([]Outcome, len(in.Packages))}
	for i, pkg := range in.Packages {
		out, err := s.importArchive(ctx, imp, p, archives[i], pkg)
		if err != nil {
			// The fetcher logged and counted it.
			return Result{}, pkgError(i, fmt.Errorf("%s %s %s: %w", p, v, pkg.Platform, err))
		}
		// Present is the package held already, not its bytes: an archive
		// cached under another address (the same zip of another host) is
		// a package this import adds.
		if was, ok := cached.Archive(pkg.Platform); !ok || was.SHA256 != archives[i].SHA256 { // none when cached is nil
			out.Present = false
		}
		res.Packages[i] = out
	}
	// The h1: hashes of "packages" against the archives now cached.
	if !in.Unsigned {
		for i, pkg := range in.Packages {
			if err := records.CheckPackageHashes(pkg.Packages, archives[i].Filename, rels[pkg.Document], s.parts.Records.H1); err != nil {
				return Result{}, pkgError(i, s.refuse(p, v, pkg.Platform, err))
			}
		}
	}

	// The record, then the version list, then the host.
	if err := s.storeImported(ctx, p, v, in, archives, provenance); err != nil {
		return Result{}, err
	}
	if err := s.listImported(ctx, p, v, in); err != nil {
		return Result{}, err
	}
	if in.Unsigned {
		if rec, ok := s.parts.Records.CachedPackage(p, v); ok {
			s.parts.Withholding.InHouse(p, rec)
		}
	}
	if err := s.parts.Hosts.Record(p.Hostname); err != nil {
		return Result{}, err
	}
	return res, nil
}

// checkPlatforms checks that each package of in is of a valid platform,
// given once.
func checkPlatforms(in Imported) error {
	seen := map[string]bool{}
	for i, pkg := range in.Packages {
		if _, err := addrs.ParsePlatform(pkg.Platform); err != nil {
			return pkgError(i, err)
		}
		if seen[pkg.Platform] {
			return pkgError(i, fmt.Errorf("%s %s: platform %s given twice", in.Provider, in.Version, pkg.Platform))
		}
		seen[pkg.Platform] = true
	}
	return nil
}

// signedArchives checks the signed metadata of in (not Unsigned) before
// any archive is read, trusting nothing of it that no signature covers:
// each SHA256SUMS document's signature with its signing keys
// (verify.CheckSignature: a key that expired after it signed still
// verifies it, as an origin's answer's; the caller judges a key it
// pins), that it is
// the release of in's provider type and version (records.ReleaseOf) and that the
// documents agree; then for each package, that its platform is valid and
// given once, that its filename, os and arch are its platform's and its
// shasum the line of the name derived for it (records.Release.SignedPackage,
// see signednames.go), its "packages" hashes (records.CheckPackageHashes, with
// h1), and the sha256 the caller vouches for, if any. It returns each
// package's archive record, named as derived with the signed sha256, and
// each document's release, by index. An error one document or package
// caused is an *Error.
func signedArchives(in Imported, h1 func(sha string) string) ([]records.ArchiveRecord, []records.Release, error) {
	p, v := in.Provider, in.Version
	if len(in.Documents) == 0 {
		return nil, nil, &verify.Error{Reason: verify.ReasonMissingChecksum,
			Detail: fmt.Sprintf("%s %s comes without any SHA256SUMS document", p, v)}
	}
	rels := make([]records.Release, len(in.Documents))
	all := map[string]string{}
	for i, doc := range in.Documents {
		if err := verify.CheckSignature(doc.Content, doc.Signature, records.ArmoredKeys(doc.SigningKeys)); err != nil {
			return nil, nil, docError(i, err)
		}
		parsed, err := verify.ParseSHA256SUMS(doc.Content)
		if err != nil {
			return nil, nil, docError(i, err)
		}
		if rels[i], err = records.ReleaseOf(p.Type, v, parsed); err != nil {
			return nil, nil, docError(i, err)
		}
		for name, sum := range parsed {
			if old, ok := all[name]; ok && old != sum {
				return nil, nil, docError(i, &verify.Error{Reason: verify.ReasonChecksum,
					Detail: fmt.Sprintf("SHA256SUMS documents of one version disagree about %s", name)})
			}
			all[name] = sum
		}
	}
	if err := checkPlatforms(in); err != nil {
		return nil, nil, err
	}
	archives := make([]records.ArchiveRecord, len(in.Packages))
	for i, pkg := range in.Packages {
		if pkg.Document < 0 || pkg.Document >= len(rels) {
			return nil, nil, pkgError(i, &verify.Error{Reason: verify.ReasonMissingChecksum,
				Detail: fmt.Sprintf("%s refers to SHA256SUMS document %d, which was not given", pkg.Filename, pkg.Document)})
		}
		rel := rels[pkg.Document]
		name, sha, err := rel.SignedPackage(pkg.Platform, pkg.Filename, pkg.OS, pkg.Arch, pkg.Shasum)
		if err != nil {
			return nil, nil, pkgError(i, err)
		}
		if err := records.CheckPackageHashes(pkg.Packages, name, rel, h1); err != nil {
			return nil, nil, pkgError(i, err)
		}
		if pkg.SHA256 != "" && !strings.EqualFold(pkg.SHA256, sha) {
			return nil, nil, pkgError(i, &verify.Error{Reason: verify.ReasonChecksum,
				Detail: fmt.Sprintf("SHA256SUMS gives sha256 %s for %s, the import vouches for %s", sha, name, pkg.SHA256)})
		}
		archives[i] = records.ArchiveRecord{Filename: name, SHA256: sha, // no URL: see Package.DownloadURL
			Evidence: &records.PackageEvidence{Protocols: pkg.Protocols, OS: pkg.OS, Arch: pkg.Arch, Shasum: pkg.Shasum,
				Packages: pkg.Packages, Document: pkg.Document}}
	}
	return archives, rels, nil
}

// refuseImport is refuse for an error of signedArchives: an
// *Error's own error is logged and counted with its platform.
func (s *Importer) refuseImport(in Imported, err error) error {
	var ierr *Error
	if !errors.As(err, &ierr) {
		return err
	}
	pl := ""
	if ierr.Package >= 0 && ierr.Package < len(in.Packages) {
		pl = in.Packages[ierr.Package].Platform
	}
	return &Error{Document: ierr.Document, Package: ierr.Package, Err: s.refuse(in.Provider, in.Version, pl, ierr.Err)}
}

// joinable checks that the imported packages, verified as archives, may
// join the cached record of p v: the same sha256 for every platform both
// have, and no platform added to a record of the other provenance
// (signed or not). A record of an earlier release, without evidence, is
// replaced, keeping its sha256s.
func (s *Importer) joinable(p addrs.Provider, v versions.Version, cached *records.PackageRecord, in Imported, archives []records.ArchiveRecord, provenance records.Provenance) error {
	for i, pkg := range in.Packages {
		was, ok := cached.Archive(pkg.Platform)
		if !ok {
			continue
		}
		if was.SHA256 != archives[i].SHA256 {
			return pkgError(i, s.refuse(p, v, pkg.Platform, &verify.Error{Reason: verify.ReasonChecksum,
				Detail: fmt.Sprintf("%s has sha256 %s, but the cache holds %s for %s %s %s", pkg.Filename, archives[i].SHA256, was.SHA256, p, v, pkg.Platform)}))
		}
	}
	if !cached.HasEvidence() {
		// The record is replaced by one of the imported packages alone:
		// every platform it has must be among them, or its package,
		// which a sealed mirror cannot fetch again, would vanish (as the
		// origin's path refuses to let it: mirror.providerRecords.fetchPackage).
		has := slices.Sorted(maps.Keys(cached.Archives))
		for _, pl := range has {
			if !slices.ContainsFunc(in.Packages, func(pkg Package) bool { return pkg.Platform == pl }) {
				return fmt.Errorf("%s %s is cached by an earlier release, without evidence, with a package for %s that this import does not carry; import every platform it has together (%s), or it would be dropped",
					p, v, pl, strings.Join(has, ", "))
			}
		}
		return nil
	}
	if (cached.Provenance == records.ProvenanceUnsigned) == in.Unsigned {
		return nil
	}
	for i, pkg := range in.Packages {
		if _, ok := cached.Archives[pkg.Platform]; !ok {
			return pkgError(i, fmt.Errorf("%s %s is cached %s; its package for %s cannot be added from an import %s",
				p, v, describe(cached.Provenance), in.Packages[i].Platform, describe(provenance)))
		}
	}
	return nil
}

// setAside says cached, p's record of the version in imports, is a
// withheld import without signature (see package mirror/unsigned) that a
// signed import of the version sets aside, as the origin's fetched
// version does, rather than join: a withheld import never takes a
// version away from the clients, and on a sealed mirror an import is how
// the origin's version comes.
func (s *Importer) setAside(p addrs.Provider, cached *records.PackageRecord, in Imported) bool {
	return !in.Unsigned && s.parts.Withholding.IsWithheld(p, cached)
}

func describe(pr records.Provenance) string {
	if pr == records.ProvenanceUnsigned {
		return "without signature"
	}
	return "with the origin's signature"
}

// sumArchive returns the sha256 of pkg's archive.
func (s *Importer) sumArchive(ctx context.Context, pkg Package) (string, error) {
	body, _, err := pkg.Open(ctx)
	if err != nil {
		return "", err
	}
	defer body.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(body, s.cfg.MaxArchiveBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", pkg.Filename, err)
	}
	if n > s.cfg.MaxArchiveBytes {
		return "", &verify.Error{Reason: verify.ReasonBadArchive,
			Detail: fmt.Sprintf("%s is larger than the %d bytes allowed", pkg.Filename, s.cfg.MaxArchiveBytes)}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// storeImported merges the imported packages into v's record and stores
// it, in turn with package-metadata fetches of the same version: through
// their coalescing (the same key), so that a fetch under way, which read
// the record before the import, does not store its own over the
// import's (mirror.providerRecords.fetchPackage).
func (s *Importer) storeImported(ctx context.Context, p addrs.Provider, v versions.Version, in Imported, archives []records.ArchiveRecord, provenance records.Provenance) error {
	key := records.PackageKey(p, v)
	for range maxRounds {
		_, ran, err := s.parts.Life.CoalesceWrite(ctx, "package", key, func(context.Context) (any, error) {
			rec, ok := s.parts.Records.CachedPackage(p, v)
			var withheld *records.PackageRecord
			if ok && s.setAside(p, rec, in) {
				// A withheld import, set aside inside the signed record
				// as a fetch from the origin sets it aside: it cannot be
				// fetched again.
				withheld, rec, ok = rec, nil, false
			}
			if ok {
				// What Import checked may have changed since (a metadata
				// fetch of the version stored the origin's record): an
				// unsigned archive must not join a signed record, nor
				// the other way round.
				if err := s.joinable(p, v, rec, in, archives, provenance); err != nil {
					return nil, err
				}
			}
			if ok && rec.HasEvidence() {
				rec = rec.Clone()
			} else {
				rec = &records.PackageRecord{Schema: records.Schema, Version: v.String(), Sums: map[string]string{},
					Archives: map[string]records.ArchiveRecord{}, Provenance: provenance, Withheld: withheld}
			}
			// The imported documents, each once, by their new index.
			index := make([]int, len(in.Documents))
			for i, doc := range in.Documents {
				index[i] = -1
				for j, have := range rec.Documents {
					if string(have.Content) == string(doc.Content) && string(have.Signature) == string(doc.Signature) &&
						slices.Equal(have.SigningKeys, doc.SigningKeys) && have.URL == doc.URL && have.SignatureURL == doc.SignatureURL {
						index[i] = j
					}
				}
				if index[i] < 0 {
					rec.Documents = append(rec.Documents, doc)
					index[i] = len(rec.Documents) - 1
					parsed, err := verify.ParseSHA256SUMS(doc.Content)
					if err != nil {
						return nil, err
					}
					maps.Copy(rec.Sums, parsed)
				}
			}
			for i, pkg := range in.Packages {
				if have, ok := rec.Archives[pkg.Platform]; ok {
					// Held without protocols (imported on a publisher's
					// key alone, whose anchor vouches for none), the
					// archive takes those this import's anchor vouches
					// for, as the version list does (listImported).
					if ev := have.Evidence; ev != nil && len(ev.Protocols) == 0 && len(pkg.Protocols) > 0 && have.SHA256 == archives[i].SHA256 {
						withProtocols := *ev
						withProtocols.Protocols = slices.Clone(pkg.Protocols)
						have.Evidence = &withProtocols
						rec.Archives[pkg.Platform] = have
					}
					continue
				}
				a := archives[i]
				if a.Evidence != nil {
					ev := *a.Evidence
					ev.Document = index[ev.Document]
					a.Evidence = &ev
				}
				rec.Archives[pkg.Platform] = a
				rec.Missing = slices.DeleteFunc(rec.Missing, func(pl string) bool { return pl == pkg.Platform })
				delete(rec.MissingChecked, pkg.Platform)
			}
			rec.VerifiedAt = s.cfg.Now().UTC()
			err := s.store.PutMeta(key, rec)
			s.parts.Records.Forget(key)
			if err != nil {
				s.metrics.CacheWriteFailed()
				return nil, fmt.Errorf("storing package metadata of %s %s: %w", p, v, err)
			}
			return rec, nil
		})
		if ran || err != nil && ctx.Err() != nil {
			return err
		}
		// A metadata fetch of this version was under way: go again.
	}
	return fmt.Errorf("package metadata for %s %s kept changing while it was imported", p, v)
}

// listImported adds v with the imported platforms to p's cached version
// list, in turn with refreshes of it.
func (s *Importer) listImported(ctx context.Context, p addrs.Provider, v versions.Version, in Imported) error {
	key := records.VersionsKey(p)
	err := s.parts.Life.WriteInTurn(ctx, "versions", key, func(context.Context) error {
		return s.addListed(ctx, key, p, v, in)
	})
	if errors.Is(err, lifetime.ErrKeptFetching) {
		return fmt.Errorf("version list of %s kept changing while it was imported", p)
	}
	return err
}

// addListed adds v with the imported platforms to the version list
// under key (see listImported).
func (s *Importer) addListed(ctx context.Context, key string, p addrs.Provider, v versions.Version, in Imported) error {
	list, err := s.listBefore(ctx, key)
	if err != nil {
		return err
	}
	list.Imported = true
	i := slices.IndexFunc(list.Versions, func(e records.VersionEntry) bool { return e.Version == v.String() })
	if (!list.ImportOnly || !list.ListedAt.IsZero()) && !slices.Contains(list.ImportAdded, v.String()) && !slices.Contains(list.Named(), v.String()) {
		// Not named by the listing behind the list (this
		// replica's, or another's it served), which lacked it.
		list.ImportAdded = append(list.ImportAdded, v.String())
	}
	if i < 0 {
		list.Versions = append(list.Versions, records.VersionEntry{Version: v.String(), Platforms: []string{}})
		i = len(list.Versions) - 1
	}
	e := &list.Versions[i]
	e.Platforms = slices.Clone(e.Platforms)
	for _, pkg := range in.Packages {
		if !slices.Contains(e.Platforms, pkg.Platform) {
			e.Platforms = append(e.Platforms, pkg.Platform)
		}
	}
	slices.Sort(e.Platforms)
	if len(e.Protocols) == 0 {
		e.Protocols = slices.Clone(in.Protocols)
	}
	records.SortVersions(list.Versions)
	err = s.store.PutMeta(key, list)
	s.parts.Records.Forget(key)
	if err != nil {
		s.metrics.CacheWriteFailed()
		return fmt.Errorf("storing version list of %s: %w", p, err)
	}
	return nil
}

// listBefore returns a copy of the version list under key that an
// import adds to (the new list's Versions, Lacked, Dates, ListedAt, Warnings,
// ImportOnly and ImportAdded; a new list when there is none), so that the
// release dating (mirror/gate) takes the import for no listing of the
// origin: the list keeps when the listing behind it was taken (its time
// of storing, for a list of an earlier release, which did not keep it,
// unless an import wrote it); a list the cache holds none of its own of
// (none, or only the shared tier's, another replica's, which it serves
// and the import adds to) is ImportOnly, keeping the time of the shared
// list's listing; and a version an import added is no version of the
// listing behind the list (ImportAdded), whichever replica took it. A
// list an import of an earlier release wrote cannot tell whether a
// listing is behind it, nor when: it is taken for one at its time of
// storing, as it was then, and a version an import adds to it is judged
// as then until the next listing (by its signature: on a mirror fed by
// imports alone, whose lists imports alone wrote, dating it by the time
// of the import before would hold every new import back for the window
// from there), dated by that time once the origin lists it.
func (s *Importer) listBefore(ctx context.Context, key string) (*records.VersionList, error) {
	var from records.VersionList
	storedAt, err := s.store.GetMeta(key, &from)
	own := err == nil && records.KnownSchema(from.Schema)
	if !own {
		if err != nil && !errors.Is(err, cache.ErrNotFound) {
			return nil, err
		}
		// The list served meanwhile, if any: the shared tier's, another
		// replica's (read there, not only when remembered, so that the
		// import adds to it rather than leave its versions out). A tier
		// that does not answer fails the import of the version: a list
		// of the import alone would hide the tier's versions from this
		// replica until it lists the origin again (for good, sealed).
		from = records.VersionList{}
		storedAt, _, err = s.parts.Source.Get(ctx, key, &from)
		switch {
		case errors.Is(err, stored.ErrUnanswered):
			return nil, fmt.Errorf("reading the shared store's version list before the import: %w", err)
		case err != nil || !records.KnownSchema(from.Schema):
			return &records.VersionList{Schema: records.Schema, ImportOnly: true}, nil
		}
	}
	list := &records.VersionList{
		Schema:   records.Schema,
		Versions: slices.Clone(from.Versions),
		// Its dating, for the next listing and the versions served until
		// then; when it was listed, dating the versions the import adds,
		// as its listing lacked them; the origin's warnings, served with
		// the list.
		Lacked: from.Lacked, Dates: from.Dates, ListedAt: from.ListingTime(storedAt), Warnings: from.Warnings,
		ImportOnly: from.ImportOnly || !own,
	}
	if own {
		list.ImportAdded = slices.Clone(from.ImportAdded)
	}
	return list, nil
}

// maxRounds bounds how often an import waits for a fetch of the record it
// writes, which then changed it.
const maxRounds = 32

// refuse logs a package of the import that failed verification, counts
// it, and returns err for the caller, as the engine's origin path does
// for a package fetched.
func (s *Importer) refuse(p addrs.Provider, v versions.Version, platform string, err error) error {
	return failure.RefusePackage(s.log, s.metrics, p, v, platform, err)
}

// importArchive commits pkg's archive, verified as a, to the cache
// through the fetcher (reading it from pkg.Open rather than the origin),
// unless the cache has it already, as part of imp.
func (s *Importer) importArchive(ctx context.Context, imp *lifetime.Import, p addrs.Provider, a records.ArchiveRecord, pkg Package) (Outcome, error) {
	out := Outcome{Platform: pkg.Platform}
	info, present, err := s.parts.Fetcher.Import(ctx, imp, p, a, fetch.Source{Open: pkg.Open, H1: pkg.H1})
	if err != nil {
		return out, err
	}
	out.Present = present
	if pkg.H1 != "" && info.H1 != "" && info.H1 != pkg.H1 {
		return out, &verify.Error{Reason: verify.ReasonChecksum,
			Detail: fmt.Sprintf("%s has %s, its VERSION.json says %s", a.Filename, info.H1, pkg.H1)}
	}
	out.Size = info.Size
	return out, nil
}

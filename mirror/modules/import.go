package modules

// Registry modules carried across an air gap: what an export reads of a
// module version (ListCachedModules, OpenStored) and what an import loads
// (ImportModule).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/internal/scratch"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// Imported is one registry module version loaded from outside its
// origin, for ImportModule: from an export of another mirror, whose
// record it carries, or a local module that has no origin.
type Imported struct {
	Module addrs.Module
	// Version is the version as the origin spells it ("v1.2.0" or
	// "1.2.0"); it is listed so, and stored under its canonical form
	// (records.ModuleRecordKey). One that does not parse
	// (addrs.ParseModuleVersion) is refused.
	Version string
	// Location is the origin's download location the package was fetched
	// from, and Commit the Git commit it resolved to; both empty for a
	// local module (Local).
	Location string
	Commit   string
	// Direct says Location is a package URL (records.ModuleRecord.Direct);
	// RegistryCredentials, which implies it, that it is to be fetched
	// with the origin's credential (records.ModuleRecord.RegistryCredentials).
	Direct              bool
	RegistryCredentials bool
	// Local says the module has no origin: it was never fetched, and is
	// never fetched again. Its host may not be an allowed origin.
	Local bool
	// SHA256 is the sha256 (lowercase hex) the package must have, when
	// known (""): what the caller's trust anchor vouched for.
	SHA256 string
	// Open opens the package, a tar.gz as the mirror serves it, and
	// returns its size (-1 if unknown).
	Open func(ctx context.Context) (io.ReadCloser, int64, error)
}

// ImportOutcome is what ImportModule did.
type ImportOutcome struct {
	// Present says the cache held the package already.
	Present bool
	// Size is the package's size in bytes.
	Size int64
}

// ImportModule stores an imported module version. Whether the input is
// to be trusted at all is the caller's decision (airgap's, from the
// operator's keys). It checks the package as a fetched one is bounded
// (Config.ModuleLimits: its size, and that it unpacks within the limits
// of files and entries, with names and links inside it) and its sha256
// against in.SHA256; a version the cache has a record of already must
// agree with it (the same location, and the same package once known:
// its sha256, or its tree for the same package in other bytes, which
// the record takes when the cache no longer holds its own; see
// records.ModuleRecord.Tree), so an import never changes what the mirror
// serves of a version. The
// package is committed first, then the record, written last; a version
// that fails any check leaves no record. A host that is not an allowed
// origin becomes local-only, as with Import.
//
// Errors: a *verify.Error (verify.ErrIntegrity) when the package or the
// record disagree with what vouches for them or with the cache; a
// *modsource.LimitError; records.ErrShutDown; errors reading or storing it.
func (s *Modules) ImportModule(ctx context.Context, in Imported) (ImportOutcome, error) {
	var out ImportOutcome
	if !s.life.StartWork() {
		return out, records.ErrShutDown
	}
	defer s.life.EndWork()
	imp := s.life.BeginImport() // as Import
	defer imp.End()
	s.life.Imports().Lock()
	defer s.life.Imports().Unlock()
	m := in.Module
	v, err := addrs.ParseModuleVersion(in.Version)
	if err != nil {
		return out, fmt.Errorf("module %s: %w", m, err)
	}
	rec := records.ModuleRecord{Schema: records.Schema, Module: m.String(), Version: in.Version,
		Commit: in.Commit, Provenance: records.ProvenanceImported}
	rec.SetDownload(in.Location, in.Direct, in.RegistryCredentials)
	switch {
	case in.Local && s.hosts.Allowed(m.Hostname):
		return out, fmt.Errorf("module %s %s: %s is an allowed origin; a local module without origin is not imported under an origin's host", m, in.Version, m.Hostname)
	case in.Local:
		rec.SetDownload("", false, false)
		rec.Commit, rec.Provenance = "", records.ProvenanceUnsigned
	default:
		addr, err := rec.Address()
		if err != nil {
			return out, fmt.Errorf("module %s %s: %w", m, in.Version, err)
		}
		rec.Kind, rec.Package, rec.Subdir = addr.Kind, addr.Package(), addr.Subdir
	}
	key := records.ModuleRecordKey(m, v)

	// The record it joins, if the cache has one.
	var cached records.ModuleRecord
	haveCached := false
	if _, err := s.store.GetMeta(key, &cached); err == nil && records.KnownSchema(cached.Schema) {
		haveCached = true
		// An export carries the location redacted (its credentials, as
		// a pre-signed URL's, expire anyway): what it keeps must agree.
		if redact.Location(cached.Location) != redact.Location(rec.Location) {
			return out, s.refuseModule(m, in.Version, verify.ReasonChecksum, fmt.Sprintf("the import gives location %q, the cache holds %q", redact.Location(rec.Location), redact.Location(cached.Location)))
		}
		// The full one, for fetching, and how.
		rec.SetDownload(cached.Location, cached.Direct, cached.RegistryCredentials)
		rec.Package = cached.Package
		// A package of another sha256 is staged and judged by its tree
		// below: the same package in other bytes (compressed by another
		// Go release's compressor) is the one the cache holds.
		if cached.SHA256 != "" && cached.SHA256 == in.SHA256 {
			if info, err := s.store.StatBlob(cached.SHA256); err == nil {
				out.Present, out.Size = true, info.Size
				return out, s.recordHost(m)
			}
		}
	}
	// Staged and checked: a new version, a local module (no sha256 is
	// vouched for, its bytes decide), or a package the cache no longer
	// holds. Judged before it is stored: a package of another tree, or
	// one the cache holds in its own bytes, leaves nothing behind.
	renewed := false // the package the cache names, in other bytes
	sum, tree, size, err := s.stageModule(ctx, imp, m, in, rec, func(sum, tree string) (bool, error) {
		if !haveCached || cached.SHA256 == "" || cached.SHA256 == sum {
			return true, nil
		}
		// By its tree only: the commit an import names is its word, and
		// nothing binds the package's files to it (a fetch, which
		// resolves the commit itself, may go by it).
		if !s.trees.same(ctx, cached, tree, "") {
			return false, s.refuseModule(m, in.Version, verify.ReasonChecksum, fmt.Sprintf("the imported package has sha256 %s, the cache holds %s", sum, cached.SHA256))
		}
		if info, err := s.store.StatBlob(cached.SHA256); err == nil {
			out.Present, out.Size = true, info.Size
			return false, nil
		}
		renewed = true
		return true, nil
	})
	if err != nil {
		return out, err
	}
	if out.Present {
		return out, s.recordHost(m)
	}
	if renewed {
		rec = cached
	}
	out.Size = size
	if haveCached && cached.SHA256 == sum {
		out.Present = true
	}
	if !haveCached || cached.SHA256 == "" || renewed {
		rec.SHA256, rec.Size, rec.Tree = sum, size, tree
		if !renewed {
			rec.FetchedAt = s.cfg.Now().UTC()
		}
		if err := s.store.PutMeta(key, &rec); err != nil {
			s.metrics.CacheWriteFailed()
			return out, fmt.Errorf("storing module record: %w", err)
		}
	}
	if err := s.recordHost(m); err != nil {
		return out, err
	}
	s.log.Info("module package imported", "module", m.String(), "version", in.Version, "sha256", sum, "size", size,
		"provenance", rec.Provenance.String())
	s.notFound.ForgetModule(m) // what the origin was last heard to lack of it
	return out, nil
}

// recordHost records m's host local-only unless it is an allowed origin.
// An import of a version present already records it too: one that
// stopped once the version's record was written, before its host was
// recorded, is completed by importing it again.
func (s *Modules) recordHost(m addrs.Module) error {
	if s.hosts.Allowed(m.Hostname) {
		return nil
	}
	return s.hosts.Record(m.Hostname)
}

// stageModule reads in's package into the scratch directory within the
// module limits, checks its sha256 and that it unpacks within them, and,
// when judge (given its sha256 and tree) says so, commits it to the blob
// store as part of imp. It returns the sha256, the tree
// (modsource.PackageTree) and the size, or judge's error.
func (s *Modules) stageModule(ctx context.Context, imp *lifetime.Import, m addrs.Module, in Imported, rec records.ModuleRecord,
	judge func(sum, tree string) (bool, error)) (string, string, int64, error) {
	body, size, err := in.Open(ctx)
	if err != nil {
		return "", "", 0, err
	}
	defer body.Close()
	limits := s.cfg.Limits
	max := modsource.MaxPackageBytes(limits)
	if size > max {
		return "", "", 0, modsource.PackageLimitError(fmt.Sprintf("the package is %d bytes, more than the %d allowed", size, max))
	}
	spool, err := os.CreateTemp(s.cfg.ScratchDir, scratch.Pattern(scratch.Module, "import", ".tar.gz"))
	if err != nil {
		return "", "", 0, err
	}
	defer func() { spool.Close(); os.Remove(spool.Name()) }()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(spool, h), io.LimitReader(body, max+1))
	if err != nil {
		return "", "", 0, fmt.Errorf("reading the package: %w", err)
	}
	if n > max {
		return "", "", 0, modsource.PackageLimitError(fmt.Sprintf("the package is larger than the %d bytes allowed", max))
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if in.SHA256 != "" && sum != in.SHA256 {
		return "", "", 0, s.refuseModule(m, in.Version, verify.ReasonChecksum, fmt.Sprintf("the package has sha256 %s, the import vouches for %s", sum, in.SHA256))
	}
	// It must unpack within the limits, as the clients unpack it.
	dir, err := os.MkdirTemp(s.cfg.ScratchDir, scratch.Pattern(scratch.Module, "check", ""))
	if err != nil {
		return "", "", 0, err
	}
	defer os.RemoveAll(dir)
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return "", "", 0, err
	}
	if err := modsource.Unpack(ctx, spool, dir, limits); err != nil {
		var le *modsource.LimitError
		if errors.As(err, &le) || ctx.Err() != nil {
			return "", "", 0, fmt.Errorf("module %s %s: %w", m, in.Version, err)
		}
		return "", "", 0, s.refuseModule(m, in.Version, verify.ReasonBadArchive, err.Error())
	}
	if rec.Subdir != "" && !strings.ContainsAny(rec.Subdir, "*?[") {
		if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rec.Subdir))); err != nil || !st.IsDir() {
			return "", "", 0, s.refuseModule(m, in.Version, verify.ReasonBadArchive, fmt.Sprintf("the package has no directory %q (the location's //SUBDIR)", rec.Subdir))
		}
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return "", "", 0, err
	}
	tree, err := modsource.PackageTree(ctx, spool, limits)
	if err != nil {
		return "", "", 0, fmt.Errorf("module %s %s: %w", m, in.Version, err)
	}
	if keep, err := judge(sum, tree); err != nil || !keep {
		return sum, tree, n, err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return "", "", 0, err
	}
	imp.Importing(sum) // an imported package is not fetched again
	if _, err := s.store.StatBlob(sum); err == nil {
		return sum, tree, n, nil
	}
	w, err := s.store.NewBlobWriter(sum)
	if err != nil {
		return "", "", 0, fmt.Errorf("staging module package: %w", err)
	}
	defer w.Close()
	if _, err := io.Copy(w, spool); err != nil {
		return "", "", 0, fmt.Errorf("staging module package: %w", err)
	}
	if _, err := w.Commit(""); err != nil {
		s.metrics.CacheWriteFailed()
		return "", "", 0, fmt.Errorf("storing module package: %w", err)
	}
	return sum, tree, n, nil
}

// refuseModule is an imported module version refused as an integrity
// failure (reason), logged and counted.
func (s *Modules) refuseModule(m addrs.Module, version string, reason verify.Reason, detail string) error {
	s.metrics.VerificationFailed(string(reason))
	s.log.Error("imported module package refused; nothing was cached", "module", m.String(), "version", version, "reason", string(reason), "detail", detail)
	return &verify.Error{Reason: reason, Detail: fmt.Sprintf("%s %s: %s", m, version, detail)}
}

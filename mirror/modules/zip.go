package modules

// Module packages as zips: what an OCI module artifact's one layer holds
// (OpenTofu's oci:// module sources unpack an archive/zip layer).
//
// A version's zip is made from its stored package (the normalized
// tar.gz, fetched once through OpenModule) by modsource.WriteZip, a
// deterministic function of the package's files, and stored as a blob by
// its sha256. Its digest and size are kept in a record of their own
// (records.ModuleZipRecord, key modzip/HOST/NS/NAME/SYSTEM/VERSION),
// written once and never replaced: the blob may be evicted, and remaking
// it must give the same bytes, or it is refused, so that a digest once
// handed out names the same bytes for as long as the record is kept.
// Every replica sharing a store makes the same bytes from the same
// package. The record goes with the version's (mirror/inventory).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/scratch"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// Zips is the module side as OCI artifacts: each module version's zip,
// and its image manifest (zipoci.go). Modules.Zips returns it. It makes
// a zip from the module side's packages (OpenModule) and asks its
// version lists and checks, but its method set is its own: what a
// caller needs of the module side itself it takes from the *Modules.
// Its methods are safe for concurrent use.
type Zips struct {
	mods *Modules
}

// Zips returns the module side as OCI artifacts.
func (s *Modules) Zips() *Zips { return &Zips{mods: s} }

// Zip is an opened module zip, read from the cache. Close it.
type Zip struct {
	Record  records.ModuleZipRecord
	ModTime time.Time
	// Source is Hit when the zip was cached, Miss when this call made it,
	// Coalesced when it waited for another call's.
	Source records.Source
	cachedBlob
}

// OpenModuleZip opens the zip of version of m: from the cache, or else
// made from its package (opened, and fetched when needed, as OpenModule
// does; one making per version, however many callers ask at once, on the
// engine's context) and stored, unless the package policy holds the
// version back (a zip made before is not served then). ctx bounds the
// caller's wait only. Errors: those of OpenModule, those of modsource.WriteZip (a package a
// zip cannot hold: modsource.ErrLinkLoop, *modsource.LimitError), and an
// integrity error matching ErrChanged when a zip made again does not
// give the bytes first recorded.
func (s *Zips) OpenModuleZip(ctx context.Context, m addrs.Module, version versions.Version) (*Zip, error) {
	if err := s.mods.checkPolicy(ctx, m, version); err != nil {
		return nil, err
	}
	key := records.ModuleZipKey(m, version)
	var rec records.ModuleZipRecord
	haveRec := false
	if ok, err := s.zipRecord(ctx, m, version, &rec); ok {
		haveRec = true
		if !s.packageHeld(rec) {
			// Judged with its package: made again of the package as the
			// module side serves it (fetched again, held to today's
			// rules), and served only when it gives the bytes recorded;
			// refused, and kept, when the package cannot be had.
			s.mods.log.Info("module zip's package is not cached; making the zip again of the package served", "module", m.String(), "version", version, "package", rec.Package)
		} else if z := s.openZipBlob(rec, records.Hit); z != nil {
			s.usePackage(rec)
			s.mods.life.Notifier().Used(records.ModuleRecordKey(m, version))
			s.mods.metrics.CacheLookup("module_zip", true)
			return z, nil
		}
	} else if err != nil {
		s.mods.log.Warn("reading module zip record", "module", m.String(), "version", version, "error", err)
	}
	s.mods.metrics.CacheLookup("module_zip", false)
	made, src, err := once(ctx, s.mods, key, "module_zip", "the module's zip",
		func(ctx context.Context) (*records.ModuleZipRecord, bool, error) {
			// Made by a caller whose making ended just before this one
			// began: its zip is cached, it is not made and stored again.
			var now records.ModuleZipRecord
			if ok, _ := s.zipRecord(ctx, m, version, &now); ok && s.packageHeld(now) {
				if _, err := s.mods.store.StatBlob(now.SHA256); err == nil {
					return &now, true, nil
				}
			}
			var first *records.ModuleZipRecord
			if haveRec {
				first = &rec
			}
			made, err := s.makeModuleZip(ctx, m, version, first)
			return made, false, err
		})
	if err != nil {
		return nil, err
	}
	if z := s.openZipBlob(made, src); z != nil {
		s.usePackage(made)
		return z, nil
	}
	return nil, fmt.Errorf("the zip of module %s %s was made but could not be stored in the cache", m, version)
}

// usePackage marks the package the zip rec was made of used now, once
// the zip is opened: a zip is served only with its package held
// (packageHeld), and reading the zip does not read the package, so that
// the cache's size limit, which evicts the blob least recently used,
// would otherwise take the package of a zip clients keep downloading
// before the zip itself, and the next download would fetch the package
// from its source again (and fail while the source is down). The zip,
// which is made again of the package held, goes first.
func (s *Zips) usePackage(rec records.ModuleZipRecord) {
	if b, err := s.mods.store.OpenBlob(rec.Package); err == nil {
		b.Close()
	}
}

// zipRecord reads the record of the zip of version of m into rec: the
// cache's, or else the shared tier's (kept in the cache from then on, so
// that a replica answers the digests another one handed out). ok is
// false when neither has one; err is for a cache that failed.
func (s *Zips) zipRecord(ctx context.Context, m addrs.Module, version versions.Version, rec *records.ModuleZipRecord) (ok bool, err error) {
	_, ok, err = s.readZipRecord(ctx, m, version, rec)
	if ok {
		ok = s.madeOfServed(ctx, m, version, *rec)
	}
	return ok, err
}

// packageHeld says the cache holds the package the zip rec records was
// made of: a zip is served with its package only (OpenModuleZip), so
// that what the module side serves of the version, and its rules, are
// what the zip is judged by. A zip whose package was evicted is made
// again of the package served (OpenModule: fetched again and held to
// today's rules, or refused) and checked against its record.
func (s *Zips) packageHeld(rec records.ModuleZipRecord) bool {
	_, err := s.mods.store.StatBlob(rec.Package)
	return err == nil
}

// madeOfServed says the zip rec records was made of the package the
// module side serves of version of m: false when the version's record or
// its package, as stored, no longer pass today's rules (a zip made of
// them before a rule was added), or when the package was made again since
// (after such a refusal). The zip is then made again of the package
// served (OpenModule, which refetches or refuses what it refuses), and
// its record replaced. A zip whose package the cache no longer holds is
// not served from its record alone: see packageHeld.
func (s *Zips) madeOfServed(ctx context.Context, m addrs.Module, version versions.Version, rec records.ModuleZipRecord) bool {
	mod, _, err := s.mods.recs.ModuleRecord(ctx, records.ModuleRecordKey(m, version))
	switch {
	case errors.Is(err, records.ErrModuleRecordRefused):
		return false
	case err != nil:
		return true
	case mod.SHA256 != rec.Package:
		// Made again since (after a refusal), or made again and not
		// fetched yet (the download answer replaced a refused record):
		// the zip is of a package the version's record no longer names.
		return false
	}
	return !errors.Is(s.mods.checkStoredPackage(ctx, rec.Package), ErrPackageRefused)
}

// readZipRecord is zipRecord, and says whether the cache holds a record
// under the zip's key (local: read from the cache, whatever its schema),
// so that a caller looking beyond the cache reads each key once.
func (s *Zips) readZipRecord(ctx context.Context, m addrs.Module, version versions.Version, rec *records.ModuleZipRecord) (local, ok bool, err error) {
	key := records.ModuleZipKey(m, version)
	var shared records.ModuleZipRecord
	_, src, err := s.mods.recs.Get(ctx, key, &shared)
	local = err == nil && src == records.Hit
	switch {
	case local && records.KnownSchema(shared.Schema):
		*rec = shared
		return true, true, nil
	case err != nil && !errors.Is(err, cache.ErrNotFound):
		return false, false, err
	case err != nil || local:
		return local, false, nil
	}
	// Another replica's.
	if !records.KnownSchema(shared.Schema) || !strings.EqualFold(shared.Module, m.String()) { // an earlier release's may name it as a client spelled it
		return false, false, nil
	}
	if v, err := addrs.ParseModuleVersion(shared.Version); err != nil || v != version {
		return false, false, nil
	}
	if err := s.mods.store.PutMeta(key, &shared); err != nil {
		s.mods.metrics.CacheWriteFailed()
		s.mods.log.Warn("storing module zip record from the shared store", "module", m.String(), "version", version, "error", err)
	}
	*rec = shared
	return false, true, nil
}

// openZipBlob opens rec's cached zip, nil when it is not cached.
func (s *Zips) openZipBlob(rec records.ModuleZipRecord, src records.Source) *Zip {
	b, ok := s.mods.openBlob(rec.SHA256)
	if !ok {
		return nil
	}
	return &Zip{Record: rec, ModTime: b.blob.Info().Created, Source: src, cachedBlob: b}
}

// makeModuleZip makes and stores the zip of version of m, checking it
// against first, the record of the zip first made, when there is one,
// and recording it otherwise, or when it was made of the package first
// recorded in other bytes.
func (s *Zips) makeModuleZip(ctx context.Context, m addrs.Module, version versions.Version, first *records.ModuleZipRecord) (*records.ModuleZipRecord, error) {
	pkg, err := s.mods.OpenModule(ctx, m, version)
	if err != nil {
		return nil, err
	}
	defer pkg.Close()
	// A package that could not be made a zip a moment ago is not
	// unpacked again (refusals).
	refusal := refusalKey(s.mods.cfg.Limits, "zip", pkg.SHA256)
	if err := s.mods.refused.get(refusal); err != nil {
		return nil, err
	}
	spool, err := os.CreateTemp(s.mods.cfg.ScratchDir, scratch.Pattern(scratch.Module, "", ".zip"))
	if err != nil {
		return nil, err
	}
	defer func() { spool.Close(); os.Remove(spool.Name()) }()
	h := sha256.New()
	if _, err := modsource.WriteZip(ctx, pkg.Content(), io.MultiWriter(spool, h), s.mods.cfg.ScratchDir, s.mods.cfg.Limits); err != nil {
		err = fmt.Errorf("module %s %s as a zip: %w", m, pkg.Record.Version, err)
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			// ctx is the engine's (once): only its shutdown (at the
			// deadline) cancels it. Not a fault, and said apart from one.
			s.mods.log.Info("module zip making stopped by shutdown; nothing was cached", "module", m.String(), "version", pkg.Record.Version, "error", err)
		case lasting(err):
			s.mods.log.Error("module package cannot be made a zip", "module", m.String(), "version", pkg.Record.Version, "error", err)
			s.mods.refused.note(refusal, err)
		default: // the scratch directory's disk, the engine's timeout
			s.mods.log.Error("making module zip failed; nothing was cached", "module", m.String(), "version", pkg.Record.Version, "error", err)
		}
		return nil, err
	}
	size, err := spool.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	rec := &records.ModuleZipRecord{Schema: records.Schema, Module: m.String(), Version: pkg.Record.Version,
		Package: pkg.SHA256, SHA256: hex.EncodeToString(h.Sum(nil)), Size: size}
	// A zip is judged by its bytes: the package it is made of may be the
	// one first recorded in other bytes (fetched again, compressed by
	// another Go release: see records.ModuleRecord.Tree), and then its
	// zip is the same.
	if first != nil && first.SHA256 != rec.SHA256 {
		detail := fmt.Sprintf("%s %s: zip sha256 %s of package %s, first made as %s of package %s", m, rec.Version, rec.SHA256, rec.Package, first.SHA256, first.Package)
		s.mods.metrics.VerificationFailed(string(verify.ReasonChecksum))
		s.mods.log.Error("module zip made again differs from the first; refused", "module", m.String(), "version", rec.Version, "detail", detail)
		return nil, &verify.Error{Reason: verify.ReasonChecksum, Detail: detail, Err: ErrChanged}
	}
	if err := s.mods.storeSpool(rec.SHA256, spool, "module zip"); err != nil {
		return nil, err
	}
	if first == nil || first.Package != rec.Package {
		key := records.ModuleZipKey(m, version)
		if err := s.mods.recs.Put(key, rec); err != nil {
			s.mods.metrics.CacheWriteFailed()
			return nil, fmt.Errorf("storing module zip record: %w", err)
		}
	}
	s.mods.log.Info("module zip made", "module", m.String(), "version", rec.Version, "sha256", rec.SHA256, "size", size)
	return rec, nil
}

// ModuleZipVersion returns the version of m whose zip has the sha256
// sha, as recorded: how a blob digest of a module's repository is
// resolved. A digest no zip of m was recorded with is not found
// (discovery.ErrNotFound is not used: the module itself may exist).
func (s *Zips) ModuleZipVersion(m addrs.Module, sha string) (version versions.Version, ok bool, err error) {
	err = s.moduleZipRecords(m, func(rec records.ModuleZipRecord, v versions.Version) bool {
		if rec.SHA256 == sha {
			version, ok = v, true
		}
		return ok
	})
	if err != nil {
		return versions.Version{}, false, err
	}
	return version, ok, nil
}

// moduleZipRecords calls fn with each zip record of m the cache holds,
// and its version, until it returns true. A record whose version does
// not parse is of no version a door asks for: it is passed over.
func (s *Zips) moduleZipRecords(m addrs.Module, fn func(records.ModuleZipRecord, versions.Version) bool) error {
	stop := errors.New("stop")
	err := s.mods.store.ScanMeta(records.ModuleZipPrefix(m), func(_ string, _ time.Time, raw json.RawMessage) error {
		var rec records.ModuleZipRecord
		if json.Unmarshal(raw, &rec) != nil || !records.KnownSchema(rec.Schema) {
			return nil
		}
		if v, err := addrs.ParseModuleVersion(rec.Version); err == nil && fn(rec, v) {
			return stop
		}
		return nil
	})
	if errors.Is(err, stop) {
		return nil
	}
	return err
}

package modules

import (
	"context"
	"errors"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// fetchRelocated is fetchModule of rec, the record of version of m, from
// the location the origin gives today when the one rec keeps no longer
// serves. A download location is not one for ever (a pre-signed URL
// expires, a repository moves): a client asks the origin for it before
// each install, and the record keeps the one the version was first asked
// with. So when the fetch from rec's location fails, and rec can be made
// again from its origin (fetchable), the origin is asked for the
// version's location again; one that differs (or now asks for, or no
// longer asks for, the registry's credential) and names the //SUBDIR the
// record keeps (which the download answers gave) is fetched from, the
// package held to the record as ever (fetchModule: the one first
// mirrored). Otherwise the first error is returned.
func (s *Modules) fetchRelocated(ctx context.Context, m addrs.Module, version versions.Version, rec records.ModuleRecord, replaces string) (*records.ModuleRecord, error) {
	if rec.RegistryCredentials && !originSaid(rec) {
		return s.fetchUnconfirmedPackageURL(ctx, m, version, rec, replaces)
	}
	got, err := s.fetchModule(ctx, m, version, rec, replaces, originSaid(rec))
	if err == nil || ctx.Err() != nil || errors.As(err, new(*TimeoutError)) || !s.fetchable(m, rec) {
		return got, err
	}
	dl, lerr := s.origin.ModuleLocation(ctx, m, rec.Version)
	if lerr != nil || rec.SameDownload(dl.Location, dl.Direct, dl.RegistryCredentials) {
		return nil, err
	}
	s.log.Warn("module package not fetched from the location its record keeps; the origin gives another, fetching from it",
		"module", m.String(), "version", rec.Version, "package", rec.Shown(), "now", redact.Location(dl.Location),
		"direct", dl.Direct, "registry_credentials", dl.RegistryCredentials, "error", err)
	if got, ok, ferr := s.fetchFromOrigins(ctx, m, version, rec, dl, replaces); ok {
		return got, ferr
	}
	return nil, err
}

// originSaid says that rec's location, and whether it is to be fetched
// with the registry's credential, are its origin's own download answer:
// a record made from that answer (by this mirror, or by a replica of the
// shared store, whose records the operator's key vouches for), one that
// asks for the credential made from an answer of the registry's own host
// (records.ModuleRecord.RegistryAnswered). An imported record's are the
// export's word, and those of a record of an earlier release that asks
// for the credential may be a modules.v1 service's on another host: they
// send the origin's token nowhere (fetchUnconfirmedPackageURL).
func originSaid(rec records.ModuleRecord) bool {
	return rec.Provenance == records.ProvenanceOrigin && (!rec.RegistryCredentials || rec.RegistryAnswered)
}

// fetchFromOrigins is fetchModule of rec, the record of version of m,
// from dl, the version's download answer that the origin gave just now
// (with the registry's credential where dl asks for it), when dl names
// the //SUBDIR the record keeps; the record then takes dl's location
// (keepLocation). ok is false, and nothing fetched, when dl does not
// parse or names another //SUBDIR.
func (s *Modules) fetchFromOrigins(ctx context.Context, m addrs.Module, version versions.Version, rec records.ModuleRecord,
	dl discovery.ModuleDownload, replaces string) (_ *records.ModuleRecord, ok bool, _ error) {
	addr, perr := records.ParseLocation(dl.Location, dl.Direct)
	if perr != nil || addr.Subdir != rec.Subdir {
		return nil, false, nil
	}
	moved := rec
	moved.SetDownload(dl.Location, dl.Direct, dl.RegistryCredentials)
	moved.RegistryAnswered = dl.RegistryCredentials // discovery checked its host
	moved.Kind, moved.Package = addr.Kind, addr.Package()
	got, err := s.fetchModule(ctx, m, version, moved, replaces, true)
	if err == nil && rec.SHA256 != "" && (!rec.SameDownload(dl.Location, dl.Direct, dl.RegistryCredentials) || rec.RegistryAnswered != moved.RegistryAnswered) {
		// fetchModule wrote no record (its package is the one the record
		// names): the record takes the location that served, and whether
		// the registry's own host asked for its credential.
		s.keepLocation(m, version, rec.Location, *got)
	}
	return got, true, err
}

// fetchUnconfirmedPackageURL is fetchRelocated of rec, a record whose
// location is a package URL to be fetched with the registry's credential
// (records.ModuleRecord.RegistryCredentials) but not on the origin's own
// word (originSaid): an imported record, or one of an earlier release
// that does not say the registry's own host answered. That it is, and
// where, is the export's word (or maybe a modules.v1 service's on
// another host), and the origin's token goes only where the origin
// itself says: the origin is asked for the
// version's download answer, and the package fetched from the location
// it gives, as it gives it (fetchFromOrigins), held to the record as
// ever. Where the origin gives none this mirror can fetch (it does not
// answer, or knows no such version), the record's location is fetched
// without the token.
func (s *Modules) fetchUnconfirmedPackageURL(ctx context.Context, m addrs.Module, version versions.Version, rec records.ModuleRecord, replaces string) (*records.ModuleRecord, error) {
	dl, lerr := s.origin.ModuleLocation(ctx, m, rec.Version)
	if lerr == nil {
		if got, ok, err := s.fetchFromOrigins(ctx, m, version, rec, dl, replaces); ok {
			return got, err
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	s.log.Warn("module record (imported, or of an earlier release) asks for the registry's credential, which goes only where the origin's own download answer says, and the origin gives no location for the version; fetching the record's location without it",
		"module", m.String(), "version", rec.Version, "package", rec.Shown(), "error", lerr)
	return s.fetchModule(ctx, m, version, rec, replaces, false)
}

// keepLocation stores the location (with whether it needs the registry's
// credential), kind and package of got, the record
// of version of m fetched from a location other than from, in the
// version's stored record, when it still keeps from and got's package:
// in turn with ImportModule, whose record is never written over. A
// failure to store is logged: the package was fetched all the same.
func (s *Modules) keepLocation(m addrs.Module, version versions.Version, from string, got records.ModuleRecord) {
	key := records.ModuleRecordKey(m, version)
	s.life.Imports().Lock()
	defer s.life.Imports().Unlock()
	var now records.ModuleRecord
	if _, err := s.store.GetMeta(key, &now); err != nil || now.Location != from || now.SHA256 != got.SHA256 {
		return
	}
	now.SetDownload(got.Location, got.Direct, got.RegistryCredentials)
	now.RegistryAnswered = got.RegistryAnswered
	now.Kind, now.Package = got.Kind, got.Package
	if err := s.store.PutMeta(key, now); err != nil {
		s.metrics.CacheWriteFailed()
		s.log.Warn("module record not updated with the location its package was fetched from; the next fetch asks the origin again",
			"module", m.String(), "version", got.Version, "error", err)
	}
}

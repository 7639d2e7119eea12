package mirror

// Module versions as OCI artifacts: one image manifest per version
// (package oci's ModuleManifest) over the version's zip (modulezip.go).
// A manifest is a pure function of the zip's record and the version, so
// it is kept by keeping that record: a digest once handed out resolves
// for as long as the record is, on every replica that made the same zip.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/oci"
)

// ModuleZipTitle is the file name of a module version's zip in its
// manifest (the layer's org.opencontainers.image.title, which oras pull
// saves it as): NAME-SYSTEM-VERSION.zip, the version canonical.
func ModuleZipTitle(m addrs.Module, version string) string {
	return m.Name + "-" + m.System + "-" + canonicalModuleVersion(version) + ".zip"
}

// moduleManifestOf builds the manifest of the zip rec records.
func moduleManifestOf(m addrs.Module, rec ModuleZipRecord) (oci.Document, error) {
	doc, err := oci.ModuleManifest(oci.Layer{SHA256: rec.SHA256, Size: rec.Size, Title: ModuleZipTitle(m, rec.Version)})
	if err != nil {
		return oci.Document{}, fmt.Errorf("module %s %s: %w", m, rec.Version, err)
	}
	return doc, nil
}

// ModuleManifest returns the image manifest of version of m: from the
// record of its zip, or, when there is none yet, once the zip is made
// (OpenModuleZip) of a version the module's version list names. Errors:
// those of ModuleVersions and OpenModuleZip; ErrVersionNotFound for a
// version the list lacks.
func (s *ModuleZips) ModuleManifest(ctx context.Context, m addrs.Module, version string) (oci.Document, error) {
	if err := s.CheckModuleOrigin(m); err != nil {
		return oci.Document{}, err
	}
	var rec ModuleZipRecord
	if ok, err := s.zipRecord(ctx, m, version, &rec); ok {
		s.e.notify.get().Used(moduleRecordKey(m, version))
		return moduleManifestOf(m, rec)
	} else if err != nil {
		s.log.Warn("reading module zip record", "module", m.String(), "version", version, "error", err)
	}
	// The version list first: it names the version as the origin spells
	// it ("v1.0.0" for a tag "1.0.0"), and a version it lacks is one the
	// repository lacks, not the module.
	list, _, err := s.ModuleVersions(ctx, m)
	if err != nil {
		return oci.Document{}, err
	}
	want := canonicalModuleVersion(version)
	if !slices.ContainsFunc(list.Versions, func(v string) bool { return canonicalModuleVersion(v) == want }) {
		return oci.Document{}, fmt.Errorf("%w: module %s %s", ErrVersionNotFound, m, version)
	}
	z, err := s.OpenModuleZip(ctx, m, version)
	if err != nil {
		return oci.Document{}, err
	}
	rec = z.Record
	z.Close()
	return moduleManifestOf(m, rec)
}

// moduleZipRecords calls fn with each zip record of m until it returns
// true.
func (s *ModuleZips) moduleZipRecords(m addrs.Module, fn func(ModuleZipRecord) bool) error {
	stop := errors.New("stop")
	err := s.store.ScanMeta(moduleZipPrefix(m), func(_ string, _ time.Time, raw json.RawMessage) error {
		var rec ModuleZipRecord
		if json.Unmarshal(raw, &rec) == nil && knownSchema(rec.Schema) && fn(rec) {
			return stop
		}
		return nil
	})
	if errors.Is(err, stop) {
		return nil
	}
	return err
}

// ModuleDocument returns the manifest of m's repository whose digest is
// d: one of a version whose zip is recorded. Errors:
// ErrDigestUnknown, discovery.ErrHostNotAllowed.
func (s *ModuleZips) ModuleDocument(ctx context.Context, m addrs.Module, d digest.Digest) (oci.Document, error) {
	if err := s.CheckModuleOrigin(m); err != nil {
		return oci.Document{}, err
	}
	var found oci.Document
	var ferr error
	err := s.moduleZipRecords(m, func(rec ModuleZipRecord) bool {
		doc, err := moduleManifestOf(m, rec)
		if err != nil {
			ferr = err
			return false
		}
		if doc.Digest == d {
			found = doc
			s.e.notify.get().Used(moduleRecordKey(m, rec.Version))
			return true
		}
		return false
	})
	switch {
	case err != nil:
		return oci.Document{}, err
	case found.Bytes != nil:
		return found, nil
	case ferr != nil:
		return oci.Document{}, ferr
	}
	if doc, ok := s.sharedModuleDocument(ctx, m, d); ok {
		return doc, nil
	}
	return oci.Document{}, fmt.Errorf("%w: %s in %s", ErrDigestUnknown, d, m)
}

// sharedModuleDocument looks for the manifest of digest d among the zip
// records the shared tier holds (sharedZipRecord).
func (s *ModuleZips) sharedModuleDocument(ctx context.Context, m addrs.Module, d digest.Digest) (oci.Document, bool) {
	var doc oci.Document
	_, ok := s.sharedZipRecord(ctx, m, func(rec ModuleZipRecord) bool {
		var err error
		doc, err = moduleManifestOf(m, rec)
		return err == nil && doc.Digest == d
	})
	return doc, ok
}

// maxSharedZipLookups bounds the shared store requests one digest lookup
// makes (sharedZipRecord): a digest no replica handed out, asked again
// and again, costs at most this many each time.
const maxSharedZipLookups = 16

// sharedZipRecord returns the first zip record match accepts among
// those the shared tier holds of the versions of m's cached version list
// that the cache has none of (another replica made their zips), newest
// first, at most maxSharedZipLookups of them, keeping those it reads: a
// record read is kept, and not asked for again.
func (s *ModuleZips) sharedZipRecord(ctx context.Context, m addrs.Module, match func(ModuleZipRecord) bool) (ModuleZipRecord, bool) {
	if s.cfg.Shared == nil {
		return ModuleZipRecord{}, false
	}
	var list ModuleVersionList
	if _, err := s.store.GetMeta(moduleVersionsKey(m), &list); err != nil {
		if _, ok := s.e.shared.getShared(ctx, moduleVersionsKey(m), &list); !ok {
			return ModuleZipRecord{}, false
		}
	}
	vs := slices.Clone(list.Versions)
	SortModuleVersions(vs)
	asked := 0
	for _, v := range vs {
		if ctx.Err() != nil || asked == maxSharedZipLookups {
			break
		}
		if _, err := s.store.GetMeta(moduleZipKey(m, v), &ModuleZipRecord{}); err == nil {
			continue // the cache's records were looked at already
		}
		asked++
		var rec ModuleZipRecord
		if ok, _ := s.zipRecord(ctx, m, v, &rec); ok && match(rec) {
			return rec, true
		}
	}
	return ModuleZipRecord{}, false
}

// ModuleBlob opens the zip of m's repository whose digest is d (made
// again from its package when its blob was evicted). Errors:
// ErrDigestUnknown, and those of OpenModuleZip.
func (s *ModuleZips) ModuleBlob(ctx context.Context, m addrs.Module, d digest.Digest) (*ModuleZip, error) {
	if d.Algorithm() != digest.SHA256 || d.Validate() != nil {
		return nil, fmt.Errorf("%w: %.80s in %s", ErrDigestUnknown, d, m)
	}
	version, ok, err := s.ModuleZipVersion(m, d.Encoded())
	if err != nil {
		return nil, err
	}
	if !ok {
		rec, found := s.sharedZipRecord(ctx, m, func(rec ModuleZipRecord) bool { return rec.SHA256 == d.Encoded() })
		if !found {
			return nil, fmt.Errorf("%w: %s in %s", ErrDigestUnknown, d, m)
		}
		version = rec.Version
	}
	return s.OpenModuleZip(ctx, m, version)
}

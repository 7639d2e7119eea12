package modules

// Module versions as OCI artifacts: one image manifest per version
// (package oci's ModuleManifest) over the version's zip (zip.go). A
// manifest is a pure function of the zip's record and the version, so it
// is kept by keeping that record: a digest once handed out resolves for
// as long as the record is, on every replica that made the same zip.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// ZipTitle is the file name of a module version's zip in its manifest
// (the layer's org.opencontainers.image.title, which oras pull saves it
// as): NAME-SYSTEM-VERSION.zip, the version canonical.
func ZipTitle(m addrs.Module, version string) string {
	return m.Name + "-" + m.System + "-" + records.CanonicalModuleVersion(version) + ".zip"
}

// moduleManifestOf builds the manifest of the zip rec records.
func moduleManifestOf(m addrs.Module, rec records.ModuleZipRecord) (oci.Document, error) {
	doc, err := oci.ModuleManifest(oci.Layer{SHA256: rec.SHA256, Size: rec.Size, Title: ZipTitle(m, rec.Version)})
	if err != nil {
		return oci.Document{}, fmt.Errorf("module %s %s: %w", m, rec.Version, err)
	}
	return doc, nil
}

// ModuleManifest returns the image manifest of version of m, unless the
// package policy holds the version back: from the record of its zip,
// or, when there is none yet, once the zip is made (OpenModuleZip) of a
// version the module's version list names. Errors:
// those of ModuleVersions and OpenModuleZip; records.ErrVersionNotFound
// for a version the list lacks.
func (s *Zips) ModuleManifest(ctx context.Context, m addrs.Module, version string) (oci.Document, error) {
	if err := s.CheckModuleOrigin(m); err != nil {
		return oci.Document{}, err
	}
	if err := s.checkPolicy(ctx, m, version); err != nil {
		return oci.Document{}, err
	}
	var rec records.ModuleZipRecord
	if ok, err := s.zipRecord(ctx, m, version, &rec); ok {
		s.life.Notifier().Used(records.ModuleRecordKey(m, version))
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
	want := records.CanonicalModuleVersion(version)
	if !slices.ContainsFunc(list.Versions, func(v string) bool { return records.CanonicalModuleVersion(v) == want }) {
		return oci.Document{}, fmt.Errorf("%w: module %s %s", records.ErrVersionNotFound, m, version)
	}
	z, err := s.OpenModuleZip(ctx, m, version)
	if err != nil {
		return oci.Document{}, err
	}
	rec = z.Record
	z.Close()
	return moduleManifestOf(m, rec)
}

// ModuleDocument returns the manifest of m's repository whose digest is
// d: one of a version whose zip is recorded and that the package policy
// lets through. Errors: records.ErrDigestUnknown,
// discovery.ErrHostNotAllowed, the policy's.
func (s *Zips) ModuleDocument(ctx context.Context, m addrs.Module, d digest.Digest) (oci.Document, error) {
	if err := s.CheckModuleOrigin(m); err != nil {
		return oci.Document{}, err
	}
	var found oci.Document
	var foundVersion string
	var ferr error
	err := s.moduleZipRecords(m, func(rec records.ModuleZipRecord) bool {
		doc, err := moduleManifestOf(m, rec)
		if err != nil {
			ferr = err
			return false
		}
		if doc.Digest == d {
			found, foundVersion = doc, rec.Version
			return true
		}
		return false
	})
	switch {
	case err != nil:
		return oci.Document{}, err
	case found.Bytes != nil:
		return s.served(ctx, m, foundVersion, found)
	case ferr != nil:
		return oci.Document{}, ferr
	}
	if doc, version, ok := s.sharedModuleDocument(ctx, m, d); ok {
		return s.served(ctx, m, version, doc)
	}
	return oci.Document{}, fmt.Errorf("%w: %s in %s", records.ErrDigestUnknown, d, m)
}

// served returns doc, the manifest of version of m, unless the package
// policy holds the version back: a digest handed out before a deny names
// a version refused since.
func (s *Zips) served(ctx context.Context, m addrs.Module, version string, doc oci.Document) (oci.Document, error) {
	if err := s.checkPolicy(ctx, m, version); err != nil {
		return oci.Document{}, err
	}
	s.life.Notifier().Used(records.ModuleRecordKey(m, version))
	return doc, nil
}

// sharedModuleDocument looks for the manifest of digest d among the zip
// records the shared tier holds (sharedZipRecord).
func (s *Zips) sharedModuleDocument(ctx context.Context, m addrs.Module, d digest.Digest) (oci.Document, string, bool) {
	var doc oci.Document
	rec, ok := s.sharedZipRecord(ctx, m, func(rec records.ModuleZipRecord) bool {
		var err error
		doc, err = moduleManifestOf(m, rec)
		return err == nil && doc.Digest == d
	})
	return doc, rec.Version, ok
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
func (s *Zips) sharedZipRecord(ctx context.Context, m addrs.Module, match func(records.ModuleZipRecord) bool) (records.ModuleZipRecord, bool) {
	var list records.ModuleVersionList
	if _, _, err := s.recs.Get(ctx, records.ModuleVersionsKey(m), &list); err != nil {
		return records.ModuleZipRecord{}, false
	}
	vs := slices.Clone(list.Versions)
	records.SortModuleVersions(vs)
	asked := 0
	for _, v := range vs {
		if ctx.Err() != nil || asked == maxSharedZipLookups {
			break
		}
		if _, err := s.store.GetMeta(records.ModuleZipKey(m, v), &records.ModuleZipRecord{}); err == nil {
			continue // the cache's records were looked at already
		}
		asked++
		var rec records.ModuleZipRecord
		if ok, _ := s.zipRecord(ctx, m, v, &rec); ok && match(rec) {
			return rec, true
		}
	}
	return records.ModuleZipRecord{}, false
}

// ModuleBlob opens the zip of m's repository whose digest is d (made
// again from its package when its blob was evicted), as the zip of a
// version the package policy lets through: two versions with the same
// files have one zip, served while either is allowed. Errors:
// records.ErrDigestUnknown, and those of OpenModuleZip (the policy's
// when it holds back every version of that zip).
func (s *Zips) ModuleBlob(ctx context.Context, m addrs.Module, d digest.Digest) (*Zip, error) {
	if d.Algorithm() != digest.SHA256 || d.Validate() != nil {
		return nil, fmt.Errorf("%w: %.80s in %s", records.ErrDigestUnknown, d, m)
	}
	if err := s.CheckModuleOrigin(m); err != nil {
		return nil, err
	}
	var vs []string
	err := s.moduleZipRecords(m, func(rec records.ModuleZipRecord) bool {
		if rec.SHA256 == d.Encoded() {
			vs = append(vs, rec.Version)
		}
		return len(vs) == maxSharedZipLookups
	})
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		rec, found := s.sharedZipRecord(ctx, m, func(rec records.ModuleZipRecord) bool { return rec.SHA256 == d.Encoded() })
		if !found {
			return nil, fmt.Errorf("%w: %s in %s", records.ErrDigestUnknown, d, m)
		}
		vs = append(vs, rec.Version)
	}
	records.SortModuleVersions(vs)
	var firstErr error
	for _, v := range vs {
		z, err := s.OpenModuleZip(ctx, m, v)
		if err == nil {
			return z, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if !errors.Is(err, gate.ErrPolicy) {
			break
		}
	}
	return nil, firstErr
}

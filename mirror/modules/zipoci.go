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
	"strings"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// ZipTitle is the file name of a module version's zip in its manifest
// (the layer's org.opencontainers.image.title, which oras pull saves it
// as): NAME-SYSTEM-VERSION.zip, the module in its normal form, the
// version canonical.
func ZipTitle(m addrs.Module, version versions.Version) string {
	return m.Name + "-" + m.System + "-" + version.String() + ".zip"
}

// moduleManifestOf builds the manifest of the zip rec records, of
// version v. Its title names the module as rec does: in its normal form
// (ZipTitle), or, for a zip an earlier release recorded of the module
// spelled in capitals, as it named it then, so that a manifest's digest
// once handed out names the same document for as long as the record is
// kept.
func moduleManifestOf(m addrs.Module, v versions.Version, rec records.ModuleZipRecord) (oci.Document, error) {
	title := ZipTitle(m, v)
	if parts := strings.Split(rec.Module, "/"); len(parts) == 4 && parts[2] != m.Name && strings.EqualFold(parts[2], m.Name) {
		title = parts[2] + "-" + m.System + "-" + v.String() + ".zip"
	}
	doc, err := oci.ModuleManifest(oci.Layer{SHA256: rec.SHA256, Size: rec.Size, Title: title})
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
func (s *Zips) ModuleManifest(ctx context.Context, m addrs.Module, version versions.Version) (oci.Document, error) {
	if err := s.mods.checkPolicy(ctx, m, version); err != nil {
		return oci.Document{}, err
	}
	var rec records.ModuleZipRecord
	ok, err := s.zipRecord(ctx, m, version, &rec)
	switch {
	case ok && s.packageHeld(rec):
		s.mods.life.Notifier().Used(records.ModuleRecordKey(m, version))
		return moduleManifestOf(m, version, rec)
	case ok:
		// Its package evicted: the manifest is handed out once the zip
		// is served again (OpenModuleZip, which judges it with its
		// package), as the blob it names would be.
	case err != nil:
		s.mods.log.Warn("reading module zip record", "module", m.String(), "version", version, "error", err)
		fallthrough
	default:
		if s.mods.storedRecord(records.ModuleRecordKey(m, version)) != nil {
			// A version the cache keeps a record of: OpenModuleZip says
			// why it is not served, if it is not (a sealed list leaves out
			// a version whose package today's rules refuse).
			break
		}
		// The version list first: it names the version as the origin
		// spells it ("v1.0.0" for a tag "1.0.0"), and a version it lacks
		// is one the repository lacks, not the module.
		list, _, err := s.mods.ModuleVersions(ctx, m)
		if err != nil {
			return oci.Document{}, err
		}
		if _, listed := list.OriginSpelling(version); !listed {
			return oci.Document{}, fmt.Errorf("%w: module %s %s", records.ErrVersionNotFound, m, version)
		}
	}
	z, err := s.OpenModuleZip(ctx, m, version)
	if err != nil {
		return oci.Document{}, err
	}
	rec = z.Record
	z.Close()
	return moduleManifestOf(m, version, rec)
}

// ModuleDocument returns the manifest of m's repository whose digest is
// d: one of a version whose zip is recorded, answered only as the
// version's manifest is (served: the package policy, and the zip judged
// with its package). Errors: records.ErrDigestUnknown, and those of
// ModuleManifest.
func (s *Zips) ModuleDocument(ctx context.Context, m addrs.Module, d digest.Digest) (oci.Document, error) {
	var found oci.Document
	var foundVersion versions.Version
	var ferr error
	err := s.moduleZipRecords(m, func(rec records.ModuleZipRecord, v versions.Version) bool {
		doc, err := moduleManifestOf(m, v, rec)
		if err != nil {
			ferr = err
			return false
		}
		if doc.Digest == d {
			found, foundVersion = doc, v
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

// served returns doc, the manifest of version of m found by its digest,
// as the manifest of the version is answered (ModuleManifest): unless the
// package policy holds the version back (a digest handed out before a
// deny names a version refused since), and judged with its zip's
// package, never from the zip's record alone: a zip whose package was
// evicted is made again of the package served, and refused as the
// package is (a sealed mirror, a package today's rules refuse). A
// version whose zip is made of another package now has another
// manifest: the digest asked for names none.
func (s *Zips) served(ctx context.Context, m addrs.Module, version versions.Version, doc oci.Document) (oci.Document, error) {
	now, err := s.ModuleManifest(ctx, m, version)
	if err != nil {
		return oci.Document{}, err
	}
	if now.Digest != doc.Digest {
		return oci.Document{}, fmt.Errorf("%w: %s in %s (the zip of %s is made of another package now)", records.ErrDigestUnknown, doc.Digest, m, version)
	}
	return now, nil
}

// sharedModuleDocument looks for the manifest of digest d among the zip
// records the shared tier holds (sharedZipRecord).
func (s *Zips) sharedModuleDocument(ctx context.Context, m addrs.Module, d digest.Digest) (oci.Document, versions.Version, bool) {
	var doc oci.Document
	v, ok := s.sharedZipRecord(ctx, m, func(rec records.ModuleZipRecord, v versions.Version) bool {
		var err error
		doc, err = moduleManifestOf(m, v, rec)
		return err == nil && doc.Digest == d
	})
	return doc, v, ok
}

// maxSharedZipLookups bounds the shared store requests one digest lookup
// makes (sharedZipRecord): a digest no replica handed out, asked again
// and again, costs at most this many each time.
const maxSharedZipLookups = 16

// sharedZipRecord returns the version of the first zip record match
// accepts among those the shared tier holds of the versions of m's
// cached version list that the cache has none of (another replica made
// their zips), newest first, at most maxSharedZipLookups of them, keeping
// those it reads: a record read is kept, and not asked for again.
func (s *Zips) sharedZipRecord(ctx context.Context, m addrs.Module, match func(records.ModuleZipRecord, versions.Version) bool) (versions.Version, bool) {
	var list records.ModuleVersionList
	if _, _, err := s.mods.recs.Get(ctx, records.ModuleVersionsKey(m), &list); err != nil {
		return versions.Version{}, false
	}
	asked := 0
	for _, v := range newestFirst(list.Versions) {
		if ctx.Err() != nil || asked == maxSharedZipLookups {
			break
		}
		var rec records.ModuleZipRecord
		local, ok, _ := s.readZipRecord(ctx, m, v, &rec)
		if local {
			continue // the cache's records were looked at already
		}
		asked++
		if ok && match(rec, v) {
			return v, true
		}
	}
	return versions.Version{}, false
}

// newestFirst parses the versions of a list as the origin spells them
// (those that do not parse left out: no door asks for them), newest
// first.
func newestFirst(raw []string) versions.List {
	vs := make(versions.List, 0, len(raw))
	for _, r := range raw {
		if v, err := addrs.ParseModuleVersion(r); err == nil {
			vs = append(vs, v)
		}
	}
	sortNewestFirst(vs)
	return vs
}

// sortNewestFirst sorts vs newest first, in place.
func sortNewestFirst(vs []versions.Version) {
	slices.SortStableFunc(vs, func(a, b versions.Version) int {
		switch {
		case a.GreaterThan(b):
			return -1
		case b.GreaterThan(a):
			return 1
		}
		return 0
	})
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
	var vs []versions.Version
	err := s.moduleZipRecords(m, func(rec records.ModuleZipRecord, v versions.Version) bool {
		if rec.SHA256 == d.Encoded() {
			vs = append(vs, v)
		}
		return len(vs) == maxSharedZipLookups
	})
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		v, found := s.sharedZipRecord(ctx, m, func(rec records.ModuleZipRecord, _ versions.Version) bool { return rec.SHA256 == d.Encoded() })
		if !found {
			return nil, fmt.Errorf("%w: %s in %s", records.ErrDigestUnknown, d, m)
		}
		vs = append(vs, v)
	}
	sortNewestFirst(vs)
	var firstErr error
	for _, v := range vs {
		z, err := s.OpenModuleZip(ctx, m, v)
		if err == nil && z.Record.SHA256 != d.Encoded() {
			// The version's zip was made again since (its package refused
			// by today's rules and fetched again): other bytes, which the
			// digest asked for does not name.
			z.Close()
			err = fmt.Errorf("%w: %s in %s (the zip of %s is made of another package now)", records.ErrDigestUnknown, d, m, v)
		}
		if err == nil {
			return z, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if !errors.Is(err, gate.ErrPolicy) && !errors.Is(err, records.ErrDigestUnknown) {
			break
		}
	}
	return nil, firstErr
}

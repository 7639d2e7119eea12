package airgap

// The OCI image layout export: what ExportOCILayout writes.
//
//	OUT/
//	    push.sh                      oras cp lines: every tag into a registry
//	    REPOSITORY/                  one OCI image layout per repository, its
//	        oci-layout               path the repository's name on the OCI
//	        index.json               front door (oci.Names); each tag an entry
//	        blobs/sha256/HEX         of index.json, named by the annotation
//	                                 org.opencontainers.image.ref.name
//
// A provider version is its tag's image index, each platform's image
// manifest, the empty config and the zips; a module version its image
// manifest, the empty config and its zip: the documents the OCI front
// door serves for them, with the same digests, built by the engine's
// OCI sides from the same records.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// Artifacts are the OCI documents of provider and module versions, and
// module zips, as the OCI front door serves them, behind the package
// policy, and its answer on what the cache holds (Served):
// *mirror/served.Packages.
type Artifacts interface {
	Served
	Index(ctx context.Context, p addrs.Provider, v versions.Version) (oci.Document, error)
	Manifest(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, error)
	ModuleManifest(ctx context.Context, m addrs.Module, version versions.Version) (oci.Document, error)
	ModuleBlob(ctx context.Context, m addrs.Module, d digest.Digest) (*modules.Zip, error)
}

// LayoutSummary counts what ExportOCILayout did.
type LayoutSummary struct {
	// Repositories are the layouts written to, Tags the tags written.
	Repositories int `json:"repositories"`
	Tags         int `json:"tags"`
	// Blobs were written, Bytes their size; BlobsPresent were there
	// already with the right digest.
	Blobs        int   `json:"blobs"`
	Bytes        int64 `json:"bytes"`
	BlobsPresent int   `json:"blobs_present"`
	// Packages are the layers among the blobs written (a provider's
	// archive for a platform, a module version's zip), PackageBytes
	// their size; PackagesPresent those that were there already. They
	// count what a bundle export counts, without the documents.
	Packages        int   `json:"packages"`
	PackageBytes    int64 `json:"package_bytes"`
	PackagesPresent int   `json:"packages_present"`
	// Partial counts the provider versions exported with an index of
	// fewer platforms than the front door's (whose digest differs), each
	// reported.
	Partial int `json:"partial,omitempty"`
	// Held counts the versions left out because the package policy in
	// effect refuses them (each reported).
	Held int `json:"held,omitempty"`
	// LongNames counts the versions left out because their repository's
	// name is longer than a registry takes (oci.MaxRegistryNameLen),
	// each reported: push.sh could not push them under the name the
	// front door serves them by.
	LongNames int `json:"long_names,omitempty"`
	// Failed counts the versions that failed, each reported.
	Failed int `json:"failed"`
	// Script is the path of push.sh.
	Script string `json:"script,omitempty"`
}

// PushScriptName is the file of the oras cp lines in an OCI layout export.
const PushScriptName = "push.sh"

// layoutTag is one tag of a repository's layout.
type layoutTag struct {
	tag  string
	desc ocispec.Descriptor
}

// ociLayoutExport is one export under way.
type ociLayoutExport struct {
	ctx    context.Context
	engine Engine
	arts   Artifacts
	names  oci.Names
	out    string
	dir    *outDir      // out, through which every file of it is read and written (outdir.go)
	files  *exportFiles // records what exportArchive wrote (not signed)
	sum    *LayoutSummary
	tags   map[string][]layoutTag // repository -> tags written
	// kept are the blobs of the layouts in out that this export read and
	// found of their digest, by path: their sizes. A provider platform
	// an earlier export wrote, kept in its tag, is read once, when it is
	// found (heldBlob), not again when its layer is written.
	kept map[string]int64
	// dropped are the tags of the versions the package policy refuses,
	// by repository: an earlier export into out may have tagged them,
	// and this one must not keep them (an export carries what the mirror
	// serves).
	dropped map[string][]string
}

// ExportOCILayout writes the cached provider versions sel selects and
// (when sel selects modules) the cached module versions, each under its
// repository's name (names) as an OCI image layout in out (see above),
// adding to what out holds already. A provider version whose every
// platform the front door's index names is cached and selected is
// written with that index; one with fewer is written with an index of
// those (package oci's ProviderIndex, so other bytes and another digest)
// and reported; a version with none is left out. The documents come
// from providers (the engine's OCI side) and the engine's module side,
// which makes a module version's zip from its cached package when it has
// not been made. Each version that fails is reported and counted, and
// the export goes on. It removes push.sh first, and writes it last: one
// oras cp line per tag; an export that stops before its end (the error)
// leaves none.
func ExportOCILayout(ctx context.Context, engine Engine, arts Artifacts, names oci.Names, sel Selection, out string, report func(string)) (LayoutSummary, error) {
	var sum LayoutSummary
	selected, err := selectChecked(ctx, engine, nil, sel, out)
	if err != nil {
		return sum, err
	}
	dir, err := openOutDir(out, false)
	if err != nil {
		return sum, err
	}
	defer dir.Close()
	dir.maxFileBytes = maxKeptBytes(engine.Config())
	out = dir.path
	if err := dir.removeStaleTempsReporting(report); err != nil {
		return sum, err
	}
	// An earlier export's push.sh goes first, and a new one is written
	// last: an export that stops before its end (interrupted, a write
	// that fails) leaves none, and the directory does not look finished.
	if err := dir.remove(filepath.Join(out, PushScriptName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return sum, err
	}
	x := &ociLayoutExport{ctx: ctx, engine: engine, arts: arts, names: names, out: out, dir: dir, files: &exportFiles{out: out, dir: dir, files: map[string]manifestFile{}, prior: map[string]manifestFile{}}, sum: &sum, tags: map[string][]layoutTag{}, kept: map[string]int64{}, dropped: map[string][]string{}}
	for _, cv := range selected {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		if err := storedProvider(ctx, arts, cv); x.refused(err, providerCarried(cv.Provider, cv.Version), report) {
			if p, v, perr := parseCached(cv); perr == nil {
				x.drop(names.Provider(p), v.String())
			}
			continue
		}
		if err := x.provider(sel, cv, report); err != nil {
			x.failed(err)
			report(fmt.Sprintf("%s %s: %v", cv.Provider, cv.Version, err))
		}
	}
	if sel.wantsModules() {
		cached, err := cachedModules(engine)
		if err != nil {
			return sum, err
		}
		for _, cm := range cached {
			if err := ctx.Err(); err != nil {
				return sum, err
			}
			if err := storedModule(ctx, arts, cm); x.refused(err, moduleCarried(cm.Module, cm.Version), report) {
				m, merr := addrs.ParseModule(cm.Module)
				v, verr := addrs.ParseModuleVersion(cm.Version)
				if merr == nil && verr == nil {
					x.drop(names.Module(m), v.String())
				}
				continue
			}
			if err := x.module(cm); err != nil {
				x.failed(err)
				report(fmt.Sprintf("module %s %s: %v", cm.Module, cm.Version, err))
			}
		}
	}
	if err := x.judgeEarlier(report); err != nil {
		return sum, err
	}
	repos := make([]string, 0, len(x.tags))
	for repo := range x.tags {
		repos = append(repos, repo)
	}
	for repo := range x.dropped {
		// A repository of refused versions alone is rewritten only when
		// an earlier export made it.
		if _, ok := x.tags[repo]; !ok && x.dir.exists(filepath.Join(x.out, filepath.FromSlash(repo), ocispec.ImageIndexFile)) {
			repos = append(repos, repo)
		}
	}
	slices.Sort(repos)
	for _, repo := range repos {
		if err := x.writeIndex(repo); err != nil {
			return sum, err
		}
		sum.Repositories++
	}
	script, err := x.writeScript(report)
	sum.Script = script
	return sum, err
}

// longNameError is a version left out because its repository's name is
// longer than a registry takes.
type longNameError struct{ repo string }

func (e *longNameError) Error() string {
	return fmt.Sprintf("not exported: its repository name (%s) is %d bytes, longer than the %d a registry takes; the mirror's OCI door serves it under that name",
		e.repo, len(e.repo), oci.MaxRegistryNameLen)
}

// pushable refuses a repository name longer than a registry takes: its
// versions are left out of the layouts, whose push.sh would stop at them,
// and untagged (drop) where an earlier export tagged them.
func pushable(repo string) error {
	if len(repo) > oci.MaxRegistryNameLen {
		return &longNameError{repo: repo}
	}
	return nil
}

// failed counts a version that was not exported: left out for its long
// name, or failed.
func (x *ociLayoutExport) failed(err error) {
	if long := (*longNameError)(nil); errors.As(err, &long) {
		x.sum.LongNames++
		return
	}
	x.sum.Failed++
}

// drop notes the tag of version of repo, which the package policy
// refuses or its layer cannot judge, or whose name no registry takes
// (pushable): writeIndex leaves it out of the repository's index.json,
// where an earlier export may have put it.
func (x *ociLayoutExport) drop(repo, version string) {
	if tag, ok := oci.Tag(version); ok {
		x.dropped[repo] = append(x.dropped[repo], tag)
	}
}

// judgeEarlier asks the package policy about every tag an earlier export
// into out wrote that this one neither wrote nor judged: a version the
// cache no longer holds (removed since, or never cached here, the earlier
// export made from another mirror's cache) stays tagged, and pushed by
// push.sh, only while the policy lets it through, as a cached one does.
// A layout whose name the repository prefixes do not give cannot be
// judged, and is reported.
func (x *ociLayoutExport) judgeEarlier(report func(string)) error {
	repos, err := layoutRepositories(x.dir)
	if err != nil {
		return err
	}
	for _, repo := range repos {
		if !oci.ValidRepository(repo) {
			continue // push.sh leaves it out
		}
		if err := x.ctx.Err(); err != nil {
			return err
		}
		parsed, perr := x.names.Parse(repo)
		seen := map[string]bool{}
		for _, t := range x.tags[repo] {
			seen[t.tag] = true
		}
		for _, tag := range x.dropped[repo] {
			seen[tag] = true
		}
		tags, err := layoutTags(x.dir, repo)
		if err != nil {
			return err
		}
		for _, tag := range tags {
			if seen[tag] {
				continue
			}
			if perr != nil {
				report(fmt.Sprintf("%s: a layout of an earlier export whose name these repository prefixes do not give: its tags are not judged by the package policy", repo))
				break
			}
			var c carried
			switch parsed.Kind {
			case oci.KindProvider:
				vs, ok := oci.ParseTag(tag)
				if !ok {
					continue // push.sh leaves it out
				}
				v, verr := addrs.ParseSemver(vs)
				if verr != nil {
					continue
				}
				c = providerCarried(parsed.Provider.String(), v.String())
			case oci.KindModule:
				v, ok := oci.ParseModuleTag(tag)
				if !ok {
					continue
				}
				c = moduleCarried(parsed.Module.String(), v.String())
			default:
				continue
			}
			if x.refused(c.stored(x.ctx, x.arts, nil), c, report) {
				// Refused, or not judged (reported as left out): the
				// layout carries what the mirror serves.
				x.dropped[repo] = append(x.dropped[repo], tag)
			}
		}
	}
	return nil
}

// layoutTags returns the tags of repo's index.json in out (none when it
// has none it reads).
func layoutTags(out *outDir, repo string) ([]string, error) {
	byTag, err := earlierIndex(out, filepath.Join(out.path, filepath.FromSlash(repo)))
	return slices.Sorted(maps.Keys(byTag)), err
}

// earlierIndex returns the manifests of the layout index.json in dir
// under out (written by an earlier export) by their tags: none when it
// has none it reads (no file, or not an index); an error only when the
// file cannot be read.
func earlierIndex(out *outDir, dir string) (map[string]ocispec.Descriptor, error) {
	byTag := map[string]ocispec.Descriptor{}
	b, err := out.readCapped(filepath.Join(dir, ocispec.ImageIndexFile), oci.MaxManifestSize)
	if errors.Is(err, os.ErrNotExist) {
		return byTag, nil
	}
	if err != nil {
		return nil, err
	}
	var idx ocispec.Index
	if json.Unmarshal(b, &idx) != nil {
		return byTag, nil
	}
	for _, d := range idx.Manifests {
		if tag := d.Annotations[ocispec.AnnotationRefName]; tag != "" {
			byTag[tag] = d
		}
	}
	return byTag, nil
}

// refused says whether the served layer's answer err on version c,
// cached or tagged by an earlier export, leaves it out: reported, counted
// and left out, as the bundle export does (leftOut).
func (x *ociLayoutExport) refused(err error, c carried, report func(string)) bool {
	var left ExportSummary
	if !leftOut(err, c.String(), report, &left) {
		return false
	}
	x.sum.Held += left.Held
	x.sum.Failed += left.Failed
	return true
}

// provider writes one provider version.
func (x *ociLayoutExport) provider(sel Selection, cv mirror.CachedVersion, report func(string)) error {
	p, v, err := parseCached(cv)
	if err != nil {
		return err
	}
	tag, ok := oci.Tag(v.String())
	if !ok {
		return fmt.Errorf("version %s makes no tag", v)
	}
	cached := map[string]bool{}
	for _, cp := range cv.Platforms {
		cached[cp.Platform] = cp.Cached && (len(sel.Platforms) == 0 || slices.Contains(sel.Platforms, cp.Platform))
	}
	repo := x.names.Provider(p)
	if err := pushable(repo); err != nil {
		x.drop(repo, v.String())
		return err
	}
	targets, left, index, err := x.doorTargets(repo, p, v, cached)
	if errors.Is(err, records.ErrOffline) {
		// A sealed cache (tfmirror export run alone) cannot learn the
		// sizes of the archives it does not hold, which the front door's
		// index states: the version is written with the platforms it
		// holds, their manifests as the front door makes them.
		targets, left, err = cachedTargets(p, v, cv, cached, func(sha string) (int64, bool) { return x.heldBlob(repo, sha) })
		index = nil
	}
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return nil // nothing of it selected and cached
	}
	if index == nil || len(left) > 0 {
		made, err := oci.ProviderIndex(targets)
		if err != nil {
			return err
		}
		index = &made
	}
	if len(left) > 0 {
		x.sum.Partial++
		slices.Sort(left)
		report(fmt.Sprintf("%s %s: exported without %s (not cached or not selected, nor in the layout already): its index there is not the front door's (digest %s)",
			p, v, strings.Join(left, ", "), index.Digest))
	}
	for _, t := range targets {
		if err := x.manifestWithLayer(repo, t.Manifest); err != nil {
			return fmt.Errorf("%s: %w", t.Platform, err)
		}
	}
	if err := x.blobBytes(repo, index.Digest, index.Bytes); err != nil {
		return err
	}
	x.tags[repo] = append(x.tags[repo], layoutTag{tag: tag, desc: index.Descriptor()})
	return nil
}

// doorTargets returns the front door's index of version v of p, with the
// manifests it names of the platforms cached (and selected) or whose
// manifest and archive repo's layout holds already (an earlier export
// wrote them: the tag keeps them), and the platforms it names that are
// neither.
func (x *ociLayoutExport) doorTargets(repo string, p addrs.Provider, v versions.Version, cached map[string]bool) (targets []oci.Target, left []string, _ *oci.Document, _ error) {
	index, err := x.arts.Index(x.ctx, p, v)
	if err != nil {
		return nil, nil, nil, err
	}
	var idx ocispec.Index
	if err := json.Unmarshal(index.Bytes, &idx); err != nil {
		return nil, nil, nil, err
	}
	for _, d := range idx.Manifests {
		if d.Platform == nil {
			return nil, nil, nil, fmt.Errorf("the index names a manifest without a platform")
		}
		pl := addrs.Platform{OS: d.Platform.OS, Arch: d.Platform.Architecture}
		if !cached[pl.String()] {
			if m, ok := x.heldManifest(repo, d.Digest); ok {
				targets = append(targets, oci.Target{Platform: pl, Manifest: m})
			} else {
				left = append(left, pl.String())
			}
			continue
		}
		m, err := x.arts.Manifest(x.ctx, p, d.Digest)
		if err != nil {
			return nil, nil, nil, err
		}
		targets = append(targets, oci.Target{Platform: pl, Manifest: m})
	}
	return targets, left, &index, nil
}

// cachedTargets returns the manifests of the platforms of version v of p
// that are cached (and selected), or whose archive the layout holds
// already (held: its size), made as the front door makes them, over each
// verified archive and its size, and the platforms that are neither: for
// a sealed cache, which cannot make the front door's index.
func cachedTargets(p addrs.Provider, v versions.Version, cv mirror.CachedVersion, cached map[string]bool, held func(sha string) (int64, bool)) (targets []oci.Target, left []string, _ error) {
	for _, cp := range cv.Platforms {
		if !cached[cp.Platform] || cp.Size <= 0 {
			size, ok := held(cp.Archive.SHA256)
			if !ok {
				left = append(left, cp.Platform)
				continue
			}
			cp.Size = size
		}
		pl, err := addrs.ParsePlatform(cp.Platform)
		if err != nil {
			return nil, nil, err
		}
		m, err := oci.ProviderTargetManifest(oci.Layer{SHA256: cp.Archive.SHA256, Size: cp.Size, Title: addrs.ArchiveName(p.Type, v.String(), cp.Platform)})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", cp.Platform, err)
		}
		targets = append(targets, oci.Target{Platform: pl, Manifest: m})
	}
	return targets, left, nil
}

// heldManifest returns the provider platform's image manifest of digest d
// that repo's layout holds, with its archive: what an earlier export
// wrote, each blob of its digest.
func (x *ociLayoutExport) heldManifest(repo string, d digest.Digest) (oci.Document, bool) {
	if d.Validate() != nil || d.Algorithm() != digest.SHA256 {
		return oci.Document{}, false
	}
	b, err := x.dir.readCapped(filepath.Join(x.out, filepath.FromSlash(repo), "blobs", "sha256", d.Encoded()), oci.MaxManifestSize)
	if err != nil {
		return oci.Document{}, false
	}
	m, err := oci.NewDocument(oci.MediaTypeManifest, b)
	if err != nil || m.Digest != d {
		return oci.Document{}, false
	}
	var man ocispec.Manifest
	if json.Unmarshal(b, &man) != nil || len(man.Layers) != 1 || man.Layers[0].Digest.Algorithm() != digest.SHA256 {
		return oci.Document{}, false
	}
	size, ok := x.heldBlob(repo, man.Layers[0].Digest.Encoded())
	return m, ok && size == man.Layers[0].Size
}

// heldBlob returns the size of the blob of sha256 sha that repo's layout
// holds, its bytes of that digest, noted in x.kept.
func (x *ociLayoutExport) heldBlob(repo, sha string) (int64, bool) {
	if !sha256hex.Valid(sha) {
		return 0, false
	}
	path := filepath.Join(x.out, filepath.FromSlash(repo), "blobs", "sha256", sha)
	if n, ok := x.kept[path]; ok {
		return n, true
	}
	got, n, err := x.dir.sha256Size(path)
	if err != nil || got != sha {
		return 0, false
	}
	x.kept[path] = n
	return n, true
}

// module writes one module version.
func (x *ociLayoutExport) module(cm modules.Cached) error {
	m, err := addrs.ParseModule(cm.Module)
	if err != nil {
		return err
	}
	pv, err := addrs.ParseModuleVersion(cm.Version)
	if err != nil {
		return fmt.Errorf("version %q is not a version a tag can name", cm.Version)
	}
	tag, ok := oci.Tag(pv.String())
	if !ok {
		return fmt.Errorf("version %s makes no tag", pv)
	}
	repo := x.names.Module(m)
	if err := pushable(repo); err != nil {
		x.drop(repo, pv.String())
		return err
	}
	doc, err := x.arts.ModuleManifest(x.ctx, m, pv)
	if err != nil {
		return err
	}
	if err := x.manifestWithLayer(repo, doc); err != nil {
		return err
	}
	x.tags[repo] = append(x.tags[repo], layoutTag{tag: tag, desc: doc.Descriptor()})
	return nil
}

// manifestWithLayer writes an image manifest, its empty config and its
// one layer (a provider's archive or a module's zip) into repo's layout.
func (x *ociLayoutExport) manifestWithLayer(repo string, doc oci.Document) error {
	var man ocispec.Manifest
	if err := json.Unmarshal(doc.Bytes, &man); err != nil {
		return err
	}
	if len(man.Layers) != 1 || man.Layers[0].Digest.Algorithm() != digest.SHA256 || man.Config.Digest != oci.EmptyConfig().Digest {
		return fmt.Errorf("manifest %s: not one of the front door's", doc.Digest)
	}
	layer := man.Layers[0].Digest
	path, err := x.blobPath(repo, layer)
	if err != nil {
		return err
	}
	var wrote bool
	var n int64
	switch man.ArtifactType {
	case oci.ArtifactTypeModulePackage:
		wrote, n, err = x.moduleZip(repo, path, layer)
	default:
		if size, ok := x.kept[path]; ok {
			// Found of its digest by this export (heldBlob): not read
			// again.
			x.files.add(path, size, layer.Encoded())
			break
		}
		wrote, n, err = exportArchive(x.engine, layer.Encoded(), path, x.files)
	}
	if err != nil {
		return err
	}
	x.count(wrote, n)
	if wrote {
		x.sum.Packages++
		x.sum.PackageBytes += n
	} else {
		x.sum.PackagesPresent++
	}
	if err := x.blobBytes(repo, man.Config.Digest, oci.EmptyConfigBlob()); err != nil {
		return err
	}
	return x.blobBytes(repo, doc.Digest, doc.Bytes)
}

// moduleZip writes the module zip of digest d of repo to path, unless it
// is there.
func (x *ociLayoutExport) moduleZip(repo, path string, d digest.Digest) (bool, int64, error) {
	if got, _, err := x.dir.sha256Size(path); err == nil && got == d.Encoded() {
		return false, 0, nil
	}
	parsed, err := x.names.Parse(repo)
	if err != nil {
		return false, 0, err
	}
	z, err := x.arts.ModuleBlob(x.ctx, parsed.Module, d)
	if err != nil {
		return false, 0, err
	}
	defer z.Close()
	n, err := x.writeBlob(path, d, z.Content())
	return err == nil, n, err
}

func (x *ociLayoutExport) count(wrote bool, n int64) {
	if wrote {
		x.sum.Blobs++
		x.sum.Bytes += n
	} else {
		x.sum.BlobsPresent++
	}
}

// blobPath is the path of blob d in repo's layout, its directory made.
func (x *ociLayoutExport) blobPath(repo string, d digest.Digest) (string, error) {
	if err := d.Validate(); err != nil {
		return "", err
	}
	dir := filepath.Join(x.out, filepath.FromSlash(repo), "blobs", string(d.Algorithm()))
	if err := x.dir.mkdirAll(dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, d.Encoded()), nil
}

// blobBytes writes the blob b of digest d into repo's layout, unless it
// is there.
func (x *ociLayoutExport) blobBytes(repo string, d digest.Digest, b []byte) error {
	path, err := x.blobPath(repo, d)
	if err != nil {
		return err
	}
	if have, err := x.dir.readCapped(path, int64(len(b))); err == nil && bytes.Equal(have, b) {
		x.count(false, 0)
		return nil
	}
	n, err := x.writeBlob(path, d, bytes.NewReader(b))
	if err == nil {
		x.count(true, n)
	}
	return err
}

// writeBlob writes r to path (mode 0644) through a temporary file,
// checking that it has digest d.
func (x *ociLayoutExport) writeBlob(path string, d digest.Digest, r io.Reader) (int64, error) {
	var n int64
	err := x.dir.write(path, 0o644, func(w io.Writer) error {
		v := d.Verifier()
		var err error
		if n, err = io.Copy(io.MultiWriter(w, v), r); err != nil {
			return err
		}
		if !v.Verified() {
			return fmt.Errorf("the bytes of blob %s do not have its digest", d)
		}
		return nil
	})
	return n, err
}

// writeIndex writes repo's oci-layout and index.json: the tags written
// by this export, and those of an earlier one not written again.
func (x *ociLayoutExport) writeIndex(repo string) error {
	dir := filepath.Join(x.out, filepath.FromSlash(repo))
	if _, err := x.dir.writeIfChanged(filepath.Join(dir, ocispec.ImageLayoutFile), []byte(`{"imageLayoutVersion":"`+ocispec.ImageLayoutVersion+`"}`), 0o644); err != nil {
		return err
	}
	byTag, err := earlierIndex(x.dir, dir)
	if err != nil {
		return err
	}
	for _, tag := range x.dropped[repo] {
		delete(byTag, tag)
	}
	for _, t := range x.tags[repo] {
		d := t.desc
		d.Annotations = map[string]string{ocispec.AnnotationRefName: t.tag}
		byTag[t.tag] = d
		x.sum.Tags++
	}
	tags := make([]string, 0, len(byTag))
	for tag := range byTag {
		tags = append(tags, tag)
	}
	slices.Sort(tags)
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}}
	for _, tag := range tags {
		idx.Manifests = append(idx.Manifests, byTag[tag])
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	_, err = x.dir.writeIfChanged(filepath.Join(dir, ocispec.ImageIndexFile), append(b, '\n'), 0o644)
	return err
}

// pushScriptHead is push.sh up to its lines: push REPOSITORY TAG copies
// a tag with oras cp, unless PREFIX/REPOSITORY is longer than a registry
// takes (the target's trailing slashes are not part of its PREFIX); a tag not pushed is reported and the next one pushed, and the
// script then ends with status 1. Without oras it stops at its first
// tag (a layout with none pushes nothing, and needs no oras). A target
// that is a URL (a scheme, a user and password) is refused, with status
// 2, before anything is pushed and without being repeated: oras would
// print it, password and all, for every tag. It goes to its own
// directory whatever CDPATH says.
var pushScriptHead = `#!/bin/sh
# Pushes this OCI image layout export into an OCI registry, a repository
# per layout, under the names the tfmirror OCI front door uses:
#   sh push.sh REGISTRY[/PREFIX]
# With oras (https://oras.land); give it credentials with oras login, or
# with --to-username and --to-password-stdin added to the oras cp line.
# A tag that is not pushed (oras fails, or PREFIX/REPOSITORY is longer
# than the ` + strconv.Itoa(oci.MaxRegistryNameLen) + ` bytes a registry takes) is reported, the others are
# pushed, and the script ends with status 1.
set -eu
LC_ALL=C
export LC_ALL
unset CDPATH
r="${1:?usage: sh push.sh REGISTRY[/PREFIX]}"
case "$r" in
*://* | *@* | -*)
	# Not repeated: it may hold a password.
	echo "push.sh: the target is REGISTRY[/PREFIX], a registry's host and a path, without a scheme (https://) or a user and password; give credentials with oras login REGISTRY" >&2
	exit 2 ;;
esac
while :; do case "$r" in */) r="${r%/}" ;; *) break ;; esac; done
case "$r" in */*) p="${r#*/}/" ;; *) p= ;; esac
cd -- "$(dirname -- "$0")"
failed=0
push() {
	if [ -z "${oras_found:-}" ]; then
		command -v oras >/dev/null || { echo "push.sh: oras not found (https://oras.land)" >&2; exit 1; }
		oras_found=1
	fi
	if [ $((${#p} + ${#1})) -gt ` + strconv.Itoa(oci.MaxRegistryNameLen) + ` ]; then
		echo "push.sh: $1:$2 not pushed: $p$1 is longer than the ` + strconv.Itoa(oci.MaxRegistryNameLen) + ` bytes a registry takes as a repository name" >&2
		failed=$((failed + 1))
	elif ! oras cp --from-oci-layout "$1:$2" "$r/$1:$2"; then
		echo "push.sh: $1:$2 not pushed" >&2
		failed=$((failed + 1))
	fi
}
`

// pushScriptTail ends push.sh.
const pushScriptTail = `if [ "$failed" -gt 0 ]; then
	echo "push.sh: $failed tags not pushed" >&2
	exit 1
fi
`

// writeScript writes push.sh: a push line per tag of every layout in out
// (those of earlier exports included), in order; a layout without an
// index.json has none, nor has one whose index.json is not an index
// (reported).
func (x *ociLayoutExport) writeScript(report func(string)) (string, error) {
	repos, err := layoutRepositories(x.dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(pushScriptHead)
	for _, repo := range repos {
		if !oci.ValidRepository(repo) {
			// Not a layout an export wrote (its name is put into a
			// shell line): left out.
			continue
		}
		idx, err := x.dir.readCapped(filepath.Join(x.out, filepath.FromSlash(repo), ocispec.ImageIndexFile), oci.MaxManifestSize)
		if errors.Is(err, os.ErrNotExist) {
			// An export killed, or out of space, between the layout's
			// oci-layout and its index.json: no tags to push, and no
			// reason to stop the other layouts' lines.
			continue
		}
		if err != nil {
			return "", err
		}
		var index ocispec.Index
		if err := json.Unmarshal(idx, &index); err != nil {
			// Cut short (a medium pulled out before the file reached
			// it) or not an export's: the other layouts' lines are
			// written all the same.
			report(fmt.Sprintf("%s: its %s is not an OCI index (%v): its tags are left out of %s; export its versions again, or remove the layout",
				repo, ocispec.ImageIndexFile, err, PushScriptName))
			continue
		}
		for _, d := range index.Manifests {
			tag := d.Annotations[ocispec.AnnotationRefName]
			if _, ok := oci.ParseTag(tag); !ok {
				continue
			}
			fmt.Fprintf(&b, "push '%s' '%s'\n", repo, tag)
		}
	}
	b.WriteString(pushScriptTail)
	path := filepath.Join(x.out, PushScriptName)
	// The layouts are on disk, under their names, before the script that
	// pushes them is; the script is, before the export says it is done
	// (outDir.syncDirs).
	if err := x.dir.syncDirs(); err != nil {
		return "", err
	}
	wrote, err := x.dir.writeIfChanged(path, []byte(b.String()), 0o755)
	if err == nil && !wrote {
		err = x.dir.chmod(path, 0o755)
	}
	if err == nil {
		err = x.dir.syncDirs()
	}
	return path, err
}

// layoutRepositories lists the repositories of the layouts under out:
// the directories holding an oci-layout file, as slash paths. A link in
// out is not followed.
func layoutRepositories(dir *outDir) ([]string, error) {
	var repos []string
	out := dir.path
	err := dir.walk(func(p string, d os.DirEntry) error {
		if d.IsDir() && d.Name() == "blobs" && p != out {
			if dir.exists(filepath.Join(filepath.Dir(p), ocispec.ImageLayoutFile)) {
				return filepath.SkipDir
			}
		}
		if d.Type().IsRegular() && d.Name() == ocispec.ImageLayoutFile {
			rel, err := filepath.Rel(out, filepath.Dir(p))
			if err != nil {
				return err
			}
			repos = append(repos, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(repos)
	return repos, err
}

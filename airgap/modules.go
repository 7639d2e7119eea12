package airgap

// Registry modules in exports and imports. Beside the providers, an
// export writes every cached module package it selects as the mirror
// serves it, with the record the mirror keeps of it:
//
//	modules/HOST/NAMESPACE/NAME/SYSTEM/VERSION.tar.gz   the package (a normalized tar.gz)
//	modules/HOST/NAMESPACE/NAME/SYSTEM/VERSION.json     its record: origin location, Git commit, sha256, size
//
// Both are listed in the signed manifest; modules have no publisher
// signature, so the exporting mirror's manifest is the only thing that
// vouches for them on import. A plain directory (no manifest) may hold
// local modules instead, imported with AllowUnsigned:
//
//	modules/HOST/NAMESPACE/NAME/SYSTEM/VERSION/         the module's files
//
// The provider side of an import skips the top directory "modules" (it
// is not read as a provider host), and neither a static network mirror
// nor a filesystem_mirror finds a provider package in it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/internal/scratch"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

const (
	// modulesDir is the top directory of an export's modules.
	modulesDir = "modules"
	// moduleFileFormat is the layout of a module's record file this
	// release writes.
	moduleFileFormat = 1
	// maxModuleFileBytes bounds a module's record file.
	maxModuleFileBytes = 64 << 10
)

// moduleFile is VERSION.json beside a module package in an export.
type moduleFile struct {
	Format  int    `json:"format"`
	Module  string `json:"module"`  // HOST/NAMESPACE/NAME/SYSTEM
	Version string `json:"version"` // as the origin spells it
	// Location is the origin's download location the package was
	// fetched from, without its secrets (package redact: no userinfo,
	// no query but ref, archive and depth), Commit the Git commit it
	// resolved to; both empty for a local module. An import needs of it
	// the kind of source and its //SUBDIR (the part the clients use),
	// which redaction keeps. Fetching from it again, should the package
	// leave the cache, works only where it needed no credentials.
	Location string `json:"location,omitempty"`
	Commit   string `json:"commit,omitempty"`
	// Direct says Location is a package URL, OpenTofu's direct download
	// answer's (records.ModuleRecord.Direct), not go-getter syntax;
	// RegistryCredentials, which implies it, that its origin said to
	// fetch it with the registry's credential
	// (records.ModuleRecord.RegistryCredentials); the credential is not
	// in the export. Absent in the files of earlier releases.
	Direct              bool `json:"direct,omitempty"`
	RegistryCredentials bool `json:"registry_credentials,omitempty"`
	// Local says the module has no origin (imported as a local module).
	Local  bool   `json:"local,omitempty"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// wantsModules reports whether sel selects modules: it does unless it
// names providers or versions (which select providers only).
func (sel Selection) wantsModules() bool {
	return len(sel.Providers) == 0 && len(sel.Versions) == 0
}

// safeVersion reports whether a module version can name files: letters,
// digits, dots, dashes, pluses and underscores, not starting with a dot.
func safeVersion(v string) bool {
	if v == "" || len(v) > 128 || v[0] == '.' {
		return false
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-+_", r)) {
			return false
		}
	}
	return true
}

// moduleDir is the directory of module m under top.
func moduleDir(top string, m addrs.Module) string {
	return filepath.Join(top, modulesDir, m.Hostname.ForDisplay(), m.Namespace, m.Name, m.System)
}

// exportModules writes every module version whose package is cached,
// with its record, into out (see the layout above) and records them in
// files. Each version that fails is reported and counted.
func exportModules(ctx context.Context, engine Engine, pkgs Served, out string, files *exportFiles, report func(string), sum *ExportSummary) error {
	cached, err := cachedModules(engine)
	if err != nil {
		return err
	}
	for _, cm := range cached {
		if err := ctx.Err(); err != nil {
			return err
		}
		left, err := files.judge(moduleCarried(cm.Module, cm.Record.Version), storedModule(ctx, pkgs, cm), report, sum)
		if err != nil {
			return err
		}
		if left {
			continue
		}
		if err := exportModule(ctx, engine, cm, out, files, sum); err != nil {
			sum.Failed++
			report(fmt.Sprintf("module %s %s: %v", cm.Module, cm.Version, err))
		}
	}
	return nil
}

// storedModule is the served layer's answer on the cached module
// version cm: nil when the package policy lets it be served.
func storedModule(ctx context.Context, pkgs Served, cm modules.Cached) error {
	m, err := addrs.ParseModule(cm.Module)
	if err != nil {
		return nil // not judged: exportModule reports it as failed
	}
	v, err := addrs.ParseModuleVersion(cm.Version)
	if err != nil {
		return err // no door serves it: left out
	}
	return pkgs.StoredModuleVersion(ctx, m, v)
}

// exportModule writes one module version's package, unless it is there
// with the right sha256, and its record.
func exportModule(ctx context.Context, engine Engine, cm modules.Cached, out string, files *exportFiles, sum *ExportSummary) error {
	m, err := addrs.ParseModule(cm.Module)
	if err != nil {
		return err
	}
	rec := cm.Record
	// Held to today's rules, as the doors hold them: a record or a
	// package kept before one of them was added is not carried.
	if cm.Refused != nil {
		return cm.Refused
	}
	if err := engine.Modules().CheckCachedPackage(ctx, rec); err != nil {
		return err
	}
	if !safeVersion(rec.Version) {
		return fmt.Errorf("version %q cannot name a file", rec.Version)
	}
	dir := moduleDir(out, m)
	if err := files.dir.mkdirAll(dir); err != nil {
		return err
	}
	wrote, n, err := exportArchive(engine, rec.SHA256, filepath.Join(dir, rec.Version+".tar.gz"), files)
	if err != nil {
		return err
	}
	if wrote {
		sum.Modules++
		sum.ModuleBytes += n
	} else {
		sum.ModulesPresent++
	}
	mf := moduleFile{Format: moduleFileFormat, Module: m.String(), Version: rec.Version, Location: redact.Location(rec.Location),
		Direct: rec.PackageURL(), RegistryCredentials: rec.RegistryCredentials, Commit: rec.Commit, Local: rec.Provenance == records.ProvenanceUnsigned, SHA256: rec.SHA256, Size: rec.Size}
	_, err = files.writeJSON(filepath.Join(dir, rec.Version+".json"), mf)
	return err
}

// hasModules reports whether the input in dir has a modules directory.
func hasModules(dir string) bool {
	info, err := os.Stat(filepath.Join(dir, modulesDir))
	return err == nil && info.IsDir()
}

// importModules imports every module version under dir's modules
// directory (see the layout above), each once a key of the operator's
// vouches for it, or as a local module with b.allowUnsigned. Each version
// refused is reported and counted.
func importModules(ctx context.Context, engine Engine, b *bundle, scratch string, report func(string), sum *ImportSummary) error {
	dirs, err := b.entriesAt(filepath.Join(b.dir, modulesDir), 4)
	if err != nil {
		return err
	}
	for _, mdir := range dirs {
		if !b.realDir(mdir) {
			continue
		}
		rel := b.rel(mdir)
		m, err := addrs.ParseModule(strings.TrimPrefix(rel, modulesDir+"/"))
		if err != nil {
			sum.Failed++
			report(fmt.Sprintf("%s: %v", b.shownPath(rel), err))
			continue
		}
		entries, err := b.readDir(mdir)
		if errors.Is(err, errTooManyEntries) {
			return err
		}
		if err != nil {
			b.reached[m.String()] = true
			sum.Failed++
			report(fmt.Sprintf("%s: %v", b.shownPath(rel), err))
			continue
		}
		packed, unpacked := map[string]bool{}, map[string]bool{}
		for _, e := range entries {
			name := e.Name()
			switch {
			case e.IsDir():
				unpacked[name] = true
			case strings.HasSuffix(name, ".json"):
				packed[strings.TrimSuffix(name, ".json")] = true
			case strings.HasSuffix(name, ".tar.gz"):
				packed[strings.TrimSuffix(name, ".tar.gz")] = true
			default:
				sum.Ignored++
			}
		}
		for _, version := range slices.Sorted(maps.Keys(packed)) {
			if err := ctx.Err(); err != nil {
				return err
			}
			b.reached[moduleCarried(m.String(), version).String()] = true
			if err := importModulePackage(ctx, engine, b, m, mdir, version, sum); err != nil {
				if err := ctx.Err(); err != nil {
					return err // interrupted: nothing was refused
				}
				sum.Failed++
				report(fmt.Sprintf("module %s %s refused: %v", m, version, err))
			}
		}
		for _, version := range slices.Sorted(maps.Keys(unpacked)) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := importLocalModule(ctx, engine, b, m, filepath.Join(mdir, version), version, scratch, sum); err != nil {
				if err := ctx.Err(); err != nil {
					return err // interrupted: nothing was refused
				}
				sum.Failed++
				report(fmt.Sprintf("module %s %s refused: %v", m, version, err))
			}
		}
	}
	return nil
}

// importModulePackage imports the package VERSION.tar.gz of m in dir
// with its record VERSION.json, once the input's manifest, signed by a
// trusted export key, lists both with the bytes found: modules have no
// publisher signature, and nothing in the input vouches for itself.
func importModulePackage(ctx context.Context, engine Engine, b *bundle, m addrs.Module, dir, version string, sum *ImportSummary) error {
	jsonPath, pkgPath := filepath.Join(dir, version+".json"), filepath.Join(dir, version+".tar.gz")
	if b.manifest == nil {
		why := b.why
		if !b.hasManifest {
			why = fmt.Sprintf("%s has no signed manifest %s", b.shown, manifestName)
		}
		return fmt.Errorf("no trusted key vouches for it: %s; a module package is imported only when the exporting mirror's manifest, signed by a key of --trusted-export-keys, covers it (modules have no publisher signature); a local module is imported with --allow-unsigned from a directory without manifest, as %s holding its files",
			why, b.shownPath(b.rel(filepath.Join(dir, "VERSION"))))
	}
	if !safeVersion(version) {
		return fmt.Errorf("%s: version %q cannot name a file", b.shownPath(b.rel(dir)), version)
	}
	for _, p := range []string{jsonPath, pkgPath} {
		if info, err := os.Lstat(p); err != nil || !info.Mode().IsRegular() {
			return fmt.Errorf("%s is missing or not a regular file (a module version is its package VERSION.tar.gz and its record VERSION.json)", b.shownPath(b.rel(p)))
		}
	}
	vf := &versionFiles{b: b, read: map[string]manifestFile{}, zips: map[string]int64{}}
	data, err := vf.readFile(jsonPath, maxModuleFileBytes)
	if err != nil {
		return fmt.Errorf("%s: %w", b.shownPath(b.rel(jsonPath)), err)
	}
	info, err := os.Lstat(pkgPath)
	if err != nil {
		return err
	}
	pkgRel := b.rel(pkgPath)
	vf.zips[pkgRel] = info.Size()
	shas, err := b.covers(vf, b.rel(jsonPath), pkgRel)
	if err != nil {
		return fmt.Errorf("no trusted key vouches for it: %w", err)
	}
	var mf moduleFile
	if err := json.Unmarshal(data, &mf); err != nil {
		return fmt.Errorf("%s: %w", b.shownPath(b.rel(jsonPath)), err)
	}
	switch {
	case mf.Format != moduleFileFormat:
		return fmt.Errorf("%s: format %d, this release reads %d", b.shownPath(b.rel(jsonPath)), mf.Format, moduleFileFormat)
	case mf.Module != m.String() || mf.Version != version:
		return fmt.Errorf("%s is of module %s %s", b.shownPath(b.rel(jsonPath)), mf.Module, mf.Version)
	case mf.SHA256 != shas[pkgRel]:
		return fmt.Errorf("%s gives sha256 %s, the manifest %s", b.shownPath(b.rel(jsonPath)), mf.SHA256, shas[pkgRel])
	}
	res, err := engine.Modules().ImportModule(ctx, modules.Imported{Module: m, Version: version, Location: mf.Location,
		Direct: mf.Direct, RegistryCredentials: mf.RegistryCredentials, Commit: mf.Commit, Local: mf.Local, SHA256: shas[pkgRel], Open: openFile(b.open, pkgPath)})
	if err != nil {
		return fmt.Errorf("%s: %w", b.shownPath(pkgRel), err)
	}
	countModule(res, sum)
	return nil
}

// importLocalModule packs the module files in dir and imports them as
// version of the local module m, when the input is a plain directory
// (no manifest) and b.allowUnsigned.
func importLocalModule(ctx context.Context, engine Engine, b *bundle, m addrs.Module, dir, version, scratchDir string, sum *ImportSummary) error {
	shown := b.shownPath(b.rel(dir))
	switch {
	case b.hasManifest:
		return fmt.Errorf("%s is a directory of module files in an export with a manifest; exports carry module packages (VERSION.tar.gz), and local modules are imported from a directory without manifest", shown)
	case !b.allowUnsigned:
		return fmt.Errorf("%s holds a local module's files, which nothing signs; to accept it as a local module, import with --allow-unsigned", shown)
	}
	if _, err := addrs.ParseModuleVersion(version); err != nil || !safeVersion(version) {
		return fmt.Errorf("%s: the directory's name %q is not a version", shown, version)
	}
	tmp, err := os.CreateTemp(scratchDir, scratch.Pattern(scratch.LocalModule, "", ".tar.gz"))
	if err != nil {
		return err
	}
	defer func() { tmp.Close(); os.Remove(tmp.Name()) }()
	// Read through the input's own root: nothing outside it is packed,
	// whatever a link in it (or one made while it is read) points to.
	top, err := os.OpenRoot(b.dir)
	if err != nil {
		return err
	}
	defer top.Close()
	root, err := top.OpenRoot(filepath.FromSlash(b.rel(dir)))
	if err != nil {
		return fmt.Errorf("%s: %w", shown, err)
	}
	defer root.Close()
	if _, err := modsource.PackRoot(ctx, root, scratchDir, tmp, engine.Config().ModuleLimits); err != nil {
		return fmt.Errorf("%s: %w", shown, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	res, err := engine.Modules().ImportModule(ctx, modules.Imported{Module: m, Version: version, Local: true, Open: openFile(inputfile.Open, tmp.Name())})
	if err != nil {
		return fmt.Errorf("%s: %w", shown, err)
	}
	countModule(res, sum)
	return nil
}

func countModule(res modules.ImportOutcome, sum *ImportSummary) {
	if res.Present {
		sum.ModulesPresent++
		return
	}
	sum.Modules++
	sum.ModuleBytes += res.Size
}

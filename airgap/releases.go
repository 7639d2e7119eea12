package airgap

// Terraform and OpenTofu CLI releases in exports and imports. Beside the
// providers and modules, an export writes every CLI version the cache
// holds (a verified SHA256SUMS and at least one of its archives), as the
// publisher names its files, with the record of what the version is:
//
//	releases/PUBLISHER/PRODUCT/VERSION/PRODUCT_VERSION_SHA256SUMS       as the publisher signed it
//	releases/PUBLISHER/PRODUCT/VERSION/PRODUCT_VERSION_SHA256SUMS.sig   its signature (OpenTofu: .gpgsig)
//	releases/PUBLISHER/PRODUCT/VERSION/PRODUCT_VERSION_OS_ARCH.zip      each archive cached
//	releases/PUBLISHER/PRODUCT/VERSION/release.json                     the record (releaseFile)
//
// All are listed in the signed manifest, whose "releases" section (a
// format of its own, manifestReleases) names the versions. An import
// takes a version only when both anchors of the importing mirror vouch
// for it: the manifest, signed by a trusted export key, lists every file
// of it with the bytes found; and its SHA256SUMS verifies with the
// publisher keys the importing mirror's releases side is configured
// with (package releases, which checks each archive against it as the
// pull-through path does). A key in the bundle is never trusted.
//
// A tfmirror older than this section reads the top directory "releases"
// as a provider host, finds no provider package under it, and counts its
// version directories among the entries ignored: it imports the
// providers and modules of the bundle and leaves the CLI versions out.

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
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/releases"
)

const (
	// releasesDir is the top directory of an export's CLI releases.
	releasesDir = "releases"
	// releaseFileName is a version's record.
	releaseFileName = "release.json"
	// releaseFileFormat is the layout of the record this release writes,
	// and releasesFormat that of the manifest's releases section.
	releaseFileFormat = 1
	releasesFormat    = 1
	// maxReleaseFileBytes bounds a version's record, and
	// maxPassedThroughBytes a file passed through (as the door bounds it).
	maxReleaseFileBytes   = 64 << 10
	maxPassedThroughBytes = 64 << 10
)

// CLIReleases is the CLI releases side as export and import use it
// (*releases.Releases): the versions the cache holds, and the import of
// one, verified with the publisher keys it is configured with.
type CLIReleases interface {
	Held(fn func(releases.HeldVersion) error) error
	Import(ctx context.Context, in releases.Imported) (releases.ImportOutcome, error)
}

// CLISide is the CLI releases side of a mirror, which Export and Import
// are handed beside its engine: an export carries CLI versions, and an
// import takes them, only with one; without it (nil) an export carries
// none and an import refuses the CLI versions of its input. ServedCLI is
// that side behind the package policy, which an export asks what it may
// carry and an import what it stored that is held back.
type CLISide interface {
	CLIReleases() CLIReleases
	ServedCLI() ServedCLI
}

// ServedCLI is the package policy in front of the CLI releases as the
// exports and imports ask it (*mirror/served.Releases): whether a CLI
// version the cache holds may be served now, and, when not, the
// *gate.PolicyError saying why.
type ServedCLI interface {
	StoredVersion(pub releases.Publisher, product, version string) error
}

// releaseFile is release.json, beside a CLI version's files in an export.
type releaseFile struct {
	Format    int    `json:"format"`
	Publisher string `json:"publisher"`
	Product   string `json:"product"`
	Version   string `json:"version"`
	// Sums and Signature are the file names of its SHA256SUMS and of
	// the signature the exporting mirror verified it with.
	Sums      string `json:"sums"`
	Signature string `json:"signature"`
	// Archives are the file names of the archives exported.
	Archives []string `json:"archives"`
	// Files is OpenTofu's list of the version's files, as the exporting
	// mirror's version list had it.
	Files []string `json:"files,omitempty"`
	// PassedThrough are the file names of the files the exporting mirror
	// passed through as the origin sent them and kept (OpenTofu's cosign
	// .sig and .pem), which nothing but its manifest vouches for.
	PassedThrough []string `json:"passed_through,omitempty"`
}

// manifestReleases is the manifest's section on CLI versions.
type manifestReleases struct {
	Format   int               `json:"format"`
	Versions []manifestRelease `json:"versions"`
}

type manifestRelease struct {
	Publisher string `json:"publisher"`
	Product   string `json:"product"`
	Version   string `json:"version"`
}

// dir is the version's directory, relative to the export's top, with slashes.
func (mr manifestRelease) dir() string {
	return releasesDir + "/" + mr.Publisher + "/" + mr.Product + "/" + mr.Version
}

func (mr manifestRelease) String() string {
	return "cli " + releases.Address(releases.Publisher(mr.Publisher), mr.Product) + " " + mr.Version
}

// valid reports whether mr names a version that can name a directory:
// a publisher served, a product name and a version in its canonical
// spelling.
func (mr manifestRelease) valid() bool {
	if mr.Publisher != string(releases.HashiCorp) && mr.Publisher != string(releases.OpenTofu) {
		return false
	}
	if mr.Product == "" || len(mr.Product) > 64 || strings.Trim(mr.Product, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return false
	}
	_, err := releases.CanonicalVersion(mr.Version)
	return err == nil && safeVersion(mr.Version)
}

// releasesSection is the manifest's releases section for its files: each
// version whose record it lists; nil when none.
func releasesSection(files []manifestFile) *manifestReleases {
	var sec manifestReleases
	for _, f := range files {
		parts := strings.Split(f.Path, "/")
		if len(parts) != 5 || parts[0] != releasesDir || parts[4] != releaseFileName {
			continue
		}
		mr := manifestRelease{Publisher: parts[1], Product: parts[2], Version: parts[3]}
		if mr.valid() {
			sec.Versions = append(sec.Versions, mr)
		}
	}
	if len(sec.Versions) == 0 {
		return nil
	}
	sec.Format = releasesFormat
	return &sec
}

// wantsCLI reports whether sel selects the CLI version: every one when it
// names neither providers nor versions (as for modules); otherwise the
// ones whose address (the one the package policy names it by,
// releases.hashicorp.com/hashicorp/terraform) it names, of the versions
// it names, if any.
func (sel Selection) wantsCLI(pub releases.Publisher, product, version string) bool {
	if len(sel.Providers) == 0 {
		return len(sel.Versions) == 0
	}
	addr := releases.Address(pub, product)
	if !slices.ContainsFunc(sel.Providers, func(p addrs.Provider) bool { return p.String() == addr }) {
		return false
	}
	return len(sel.Versions) == 0 || slices.Contains(sel.Versions, version)
}

// exportReleases writes the CLI versions sel selects that the cache
// holds, each with the archives of sel's platforms, into out (see the
// layout above) and records them in files. Each version that fails is
// reported and counted; one the package policy refuses is left out.
func exportReleases(ctx context.Context, cli CLIReleases, pol ServedCLI, engine Engine, sel Selection, out string, files *exportFiles, report func(string), sum *ExportSummary) error {
	err := cli.Held(func(h releases.HeldVersion) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		mr := manifestRelease{Publisher: string(h.Publisher), Product: h.Product, Version: h.Version}
		if !sel.wantsCLI(h.Publisher, h.Product, h.Version) {
			return nil
		}
		if h.Err != nil {
			sum.Failed++
			report(fmt.Sprintf("%s: %v", mr, h.Err))
			return nil
		}
		if left, err := files.judge(cliCarried(mr), storedCLI(pol, mr), report, sum); left || err != nil {
			return err
		}
		if err := exportRelease(engine, sel, h, mr, out, files, sum); err != nil {
			sum.Failed++
			report(fmt.Sprintf("%s: %v", mr, err))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the cached CLI releases: %w", err)
	}
	return nil
}

// exportRelease writes one CLI version: its archives of sel's platforms
// (none: nothing is written), its SHA256SUMS, signature and record.
func exportRelease(engine Engine, sel Selection, h releases.HeldVersion, mr manifestRelease, out string, files *exportFiles, sum *ExportSummary) error {
	if !mr.valid() {
		return errors.New("cannot name a directory")
	}
	s := h.Sums
	var builds []releases.Build
	for _, b := range h.Cached {
		if len(sel.Platforms) == 0 || slices.Contains(sel.Platforms, b.OS+"_"+b.Arch) {
			builds = append(builds, b)
		}
	}
	if len(builds) == 0 {
		return nil
	}
	dir := filepath.Join(out, filepath.FromSlash(mr.dir()))
	if err := files.dir.mkdirAll(dir); err != nil {
		return err
	}
	sumsName := releases.SumsName(s.Publisher, s.Product, s.Version)
	rf := releaseFile{Format: releaseFileFormat, Publisher: mr.Publisher, Product: mr.Product, Version: mr.Version,
		Sums: sumsName, Signature: sumsName + ".sig", Files: h.Listed.Files}
	if s.Publisher == releases.OpenTofu {
		rf.Signature = sumsName + ".gpgsig"
	}
	var failed error
	wroteAny := false
	for _, b := range builds {
		wrote, n, err := exportArchive(engine, b.SHA256, filepath.Join(dir, b.Filename), files)
		switch {
		case err != nil:
			failed = errors.Join(failed, fmt.Errorf("%s: %w", b.Filename, err))
			continue
		case wrote:
			sum.CLIArchives++
			sum.CLIBytes += n
			wroteAny = true
		default:
			sum.CLIPresent++
		}
		rf.Archives = append(rf.Archives, b.Filename)
	}
	if len(rf.Archives) == 0 {
		return failed
	}
	keepEarlier(dir, s, &rf, files)
	if _, err := files.writeFile(filepath.Join(dir, rf.Sums), s.Document); err != nil {
		return errors.Join(failed, err)
	}
	if _, err := files.writeFile(filepath.Join(dir, rf.Signature), s.Signature); err != nil {
		return errors.Join(failed, err)
	}
	for _, name := range slices.Sorted(maps.Keys(h.PassedThrough)) {
		if !plainName(name) || name == rf.Sums || name == rf.Signature || slices.Contains(rf.PassedThrough, name) {
			continue
		}
		if _, err := files.writeFile(filepath.Join(dir, name), h.PassedThrough[name]); err != nil {
			return errors.Join(failed, err)
		}
		rf.PassedThrough = append(rf.PassedThrough, name)
	}
	if _, err := files.writeJSON(filepath.Join(dir, releaseFileName), rf); err != nil {
		return errors.Join(failed, err)
	}
	if wroteAny {
		sum.Versions = append(sum.Versions, releases.Address(s.Publisher, s.Product)+" "+s.Version)
	}
	return failed
}

// keepEarlier adds to rf the archives and files passed through that the
// record of an earlier export into dir lists, when that export's manifest,
// signed with the same key, vouches for the record, and each is still
// there: an archive with the sha256 s gives it, a file passed through as
// that manifest lists it. An incremental export that selects fewer
// platforms so keeps covering what earlier ones wrote, as it does for
// providers.
func keepEarlier(dir string, s *releases.Sums, rf *releaseFile, files *exportFiles) {
	data, err := files.readVouched(filepath.Join(dir, releaseFileName), maxReleaseFileBytes)
	if err != nil {
		return
	}
	var old releaseFile
	if json.Unmarshal(data, &old) != nil || old.Format != releaseFileFormat || old.Version != rf.Version || old.Product != rf.Product || old.Publisher != rf.Publisher {
		return
	}
	for _, name := range old.Archives {
		sha := s.SHA256(name)
		if !plainName(name) || sha == "" || slices.Contains(rf.Archives, name) {
			continue
		}
		path := filepath.Join(dir, name)
		if got, n, err := files.dir.sha256Size(path); err == nil && got == sha {
			files.add(path, n, got)
			rf.Archives = append(rf.Archives, name)
		}
	}
	slices.Sort(rf.Archives)
	for _, name := range old.PassedThrough {
		if !plainName(name) || name == rf.Sums || name == rf.Signature || slices.Contains(rf.Archives, name) {
			continue
		}
		path := filepath.Join(dir, name)
		if data, err := files.readVouched(path, maxPassedThroughBytes); err == nil {
			files.addData(path, data)
			rf.PassedThrough = append(rf.PassedThrough, name)
		}
	}
}

// importReleases imports every CLI version under the input's releases
// directory, each once both anchors vouch for it (see the top of this
// file). Each version refused is reported and counted.
func importReleases(ctx context.Context, engine Engine, side CLISide, b *bundle, report func(string), sum *ImportSummary) error {
	dirs, err := b.entriesAt(filepath.Join(b.dir, releasesDir), 3)
	if err != nil {
		return err
	}
	var cli CLIReleases
	var pol ServedCLI
	if side != nil {
		cli, pol = side.CLIReleases(), side.ServedCLI()
	}
	listed := map[string]manifestRelease{}
	if b.releases != nil {
		for _, mr := range b.releases.Versions {
			listed[mr.dir()] = mr
		}
	}
	for _, dir := range dirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		rel := b.rel(dir)
		mr, ok := listed[rel]
		delete(listed, rel)
		if info, err := os.Lstat(dir); err != nil || !info.IsDir() {
			if !ok {
				sum.Ignored++
				continue
			}
			sum.Failed++
			report(fmt.Sprintf("%s refused: %s is not a directory", mr, b.shownPath(rel)))
			continue
		}
		what := "cli " + strings.TrimPrefix(rel, releasesDir+"/")
		if parts := strings.Split(rel, "/"); len(parts) == 4 {
			if named := (manifestRelease{Publisher: parts[1], Product: parts[2], Version: parts[3]}); named.valid() {
				what = named.String()
			}
		}
		var err error
		switch {
		case b.manifest == nil:
			why := b.why
			if !b.hasManifest {
				why = fmt.Sprintf("%s has no signed manifest %s", b.shown, manifestName)
			}
			err = fmt.Errorf("no trusted key vouches for it: %s; a CLI version is imported only from a bundle whose manifest a key of --trusted-export-keys signed, and only when its SHA256SUMS also verifies with the publisher's key this mirror is configured with", why)
		case b.releasesErr != nil:
			err = b.releasesErr
		case !ok:
			err = fmt.Errorf("%s is not a version the releases section of the manifest %s lists", b.shownPath(rel), b.shownPath(manifestName))
		case !within(b.dir, dir):
			err = fmt.Errorf("%s leads outside %s", b.shownPath(rel), b.shown)
		case cli == nil:
			err = errors.New("this tfmirror has no CLI releases side to import it into")
		default:
			err = importRelease(ctx, cli, pol, b, mr, dir, report, sum)
		}
		if err != nil && ctx.Err() != nil {
			return ctx.Err() // interrupted: nothing was refused
		}
		if err != nil {
			sum.Failed++
			report(fmt.Sprintf("%s refused: %v", what, err))
		}
	}
	if b.manifest != nil && b.releasesErr == nil {
		for _, rel := range slices.Sorted(maps.Keys(listed)) {
			sum.Failed++
			report(fmt.Sprintf("%s refused: %s is listed in the manifest %s but missing", listed[rel], b.shownPath(rel), b.shownPath(manifestName)))
		}
	}
	return nil
}

// within reports whether path, its links followed, is inside root.
func within(root, path string) bool {
	r, err := filepath.EvalSymlinks(root)
	if err != nil {
		return false
	}
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(r, p)
	return err == nil && filepath.IsLocal(rel)
}

// importRelease imports one CLI version from dir, once the manifest
// covers every file of it with the bytes found.
func importRelease(ctx context.Context, cli CLIReleases, pol ServedCLI, b *bundle, mr manifestRelease, dir string, report func(string), sum *ImportSummary) error {
	vf := &versionFiles{b: b, read: map[string]manifestFile{}, zips: map[string]int64{}}
	recPath := filepath.Join(dir, releaseFileName)
	data, err := vf.readFile(recPath, maxReleaseFileBytes)
	if err != nil {
		return fmt.Errorf("%s: %w", b.shownPath(b.rel(recPath)), err)
	}
	var rf releaseFile
	if err := json.Unmarshal(data, &rf); err != nil {
		return fmt.Errorf("%s: %w", b.shownPath(b.rel(recPath)), err)
	}
	switch {
	case rf.Format != releaseFileFormat:
		return fmt.Errorf("%s: format %d, this release reads %d", b.shownPath(b.rel(recPath)), rf.Format, releaseFileFormat)
	case rf.Publisher != mr.Publisher || rf.Product != mr.Product || rf.Version != mr.Version:
		return fmt.Errorf("%s is of %s %s %s", b.shownPath(b.rel(recPath)), rf.Publisher, rf.Product, rf.Version)
	}
	// Nothing the record names is read before the signed manifest is
	// known to list it, once: the record is not vouched for until then,
	// and what it names is held in memory.
	named := map[string]bool{}
	for _, name := range append(append([]string{rf.Sums, rf.Signature}, rf.Archives...), rf.PassedThrough...) {
		rel := b.rel(filepath.Join(dir, name))
		switch _, listed := b.manifest[rel]; {
		case !plainName(name):
			return fmt.Errorf("%s names the file %q, which is not in its directory", b.shownPath(b.rel(recPath)), name)
		case named[name]:
			return fmt.Errorf("%s names the file %q twice", b.shownPath(b.rel(recPath)), name)
		case !listed:
			return fmt.Errorf("%s is not in the manifest %s (signed by the trusted export key %s)", b.shownPath(rel), b.shownPath(manifestName), b.signer)
		}
		named[name] = true
	}
	doc, err := vf.readFile(filepath.Join(dir, rf.Sums), maxSumsBytes)
	if err != nil {
		return err
	}
	sig, err := vf.readFile(filepath.Join(dir, rf.Signature), maxSignatureBytes)
	if err != nil {
		return err
	}
	var passed map[string][]byte
	for _, name := range rf.PassedThrough {
		data, err := vf.readFile(filepath.Join(dir, name), maxPassedThroughBytes)
		if err != nil {
			return err
		}
		if passed == nil {
			passed = map[string][]byte{}
		}
		passed[name] = data
	}
	for _, name := range rf.Archives {
		path := filepath.Join(dir, name)
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s is %s; an import reads regular files only", b.shownPath(b.rel(path)), inputfile.Kind(info.Mode()))
		}
		vf.zips[b.rel(path)] = info.Size()
	}
	shas, err := b.covers(vf, mr.dir()+"/", "")
	if err != nil {
		return fmt.Errorf("no trusted key vouches for it: %w", err)
	}
	in := releases.Imported{Publisher: releases.Publisher(rf.Publisher), Product: rf.Product, Version: rf.Version,
		Document: doc, Signature: sig, Files: rf.Files, PassedThrough: passed}
	for _, name := range rf.Archives {
		path := filepath.Join(dir, name)
		in.Archives = append(in.Archives, releases.ImportedArchive{Filename: name, SHA256: shas[b.rel(path)], Open: openFile(b.open, path)})
	}
	res, err := cli.Import(ctx, in)
	var ierr *releases.ImportError
	if errors.As(err, &ierr) {
		return fmt.Errorf("%s: %w", b.shownPath(b.rel(filepath.Join(dir, ierr.File))), ierr.Err)
	}
	if err != nil {
		return err
	}
	sum.CLIArchives += res.Archives
	sum.CLIBytes += res.Bytes
	sum.CLIPresent += res.Present
	if res.Archives > 0 {
		sum.Versions = append(sum.Versions, releases.Address(in.Publisher, in.Product)+" "+in.Version)
	}
	// Stored whatever the policy says; the policy decides what is served.
	var pe *gate.PolicyError
	switch err := storedCLI(pol, mr); {
	case errors.As(err, &pe):
		v := pe.Verdict
		sum.CLIHeld++
		report(fmt.Sprintf("%s: imported, and held back by the package policy until it allows it (%s: %s): %s",
			mr, v.Rule, v.Detail, v.Message()))
	case err != nil:
		report(fmt.Sprintf("%s: imported, and the package policy could not judge it: %v", mr, err))
	}
	return nil
}

// plainName reports whether name names a file in its directory.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && filepath.IsLocal(name)
}

// checkReleasesSection reads the manifest's releases section: nil when
// it has none, an error when its format is not one this release reads.
func checkReleasesSection(sec *manifestReleases) error {
	if sec == nil || sec.Format == releasesFormat {
		return nil
	}
	return fmt.Errorf("the releases section of the bundle's manifest has format %d, and this tfmirror reads %d: import it with a tfmirror as new as the one that exported it", sec.Format, releasesFormat)
}

// hasReleases reports whether the input in dir has a releases directory.
func hasReleases(dir string) bool {
	info, err := os.Stat(filepath.Join(dir, releasesDir))
	return err == nil && info.IsDir()
}

// storedCLI is the served layer's answer on the CLI version mr the cache
// holds: nil when the package policy lets it be served.
func storedCLI(pol ServedCLI, mr manifestRelease) error {
	if pol == nil {
		return errors.New("no package policy layer in front of the CLI releases")
	}
	return pol.StoredVersion(releases.Publisher(mr.Publisher), mr.Product, mr.Version)
}

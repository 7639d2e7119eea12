package airgap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/internal/jsonbound"
	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// ImportSummary counts what Import did, in packages (one version, one
// platform).
type ImportSummary struct {
	// Imported packages were added to the cache, Bytes their size;
	// Present ones were there already.
	Imported int   `json:"imported"`
	Bytes    int64 `json:"bytes"`
	Present  int   `json:"present"`
	// Modules are the module packages added to the cache, ModuleBytes
	// their size; ModulesPresent those there already.
	Modules        int   `json:"modules,omitempty"`
	ModuleBytes    int64 `json:"module_bytes,omitempty"`
	ModulesPresent int   `json:"modules_present,omitempty"`
	// CLIArchives are the CLI release archives added to the cache,
	// CLIBytes their size; CLIPresent those there already. CLIHeld counts
	// the CLI versions imported that the package policy holds back now
	// (each reported): stored, and not served until it allows them.
	CLIArchives int   `json:"cli_archives,omitempty"`
	CLIBytes    int64 `json:"cli_bytes,omitempty"`
	CLIPresent  int   `json:"cli_present,omitempty"`
	CLIHeld     int   `json:"cli_held,omitempty"`
	// Failed counts the versions (or provider directories) refused, each
	// reported, of providers, modules and CLI releases; Ignored the
	// entries of the input that are not imported.
	Failed  int `json:"failed"`
	Ignored int `json:"ignored"`
	// Versions are the provider versions it added packages of,
	// "HOST/NAMESPACE/TYPE VERSION", and the CLI versions it added
	// archives of, by the address the package policy names them by, for
	// the audit log.
	Versions []string `json:"versions,omitempty"`
}

// stored says the import stored packages, or found them stored (their
// records written again).
func (s ImportSummary) stored() bool {
	return s.Imported+s.Present+s.Modules+s.ModulesPresent+s.CLIArchives+s.CLIPresent > 0
}

// ImportOptions are how Import reads its input.
type ImportOptions struct {
	// Trust is what vouches for a version: without any key, nothing
	// but (with AllowUnsigned) local builds is imported.
	Trust Trust
	// AllowUnsigned also imports packages without the origin's signed
	// evidence from an input without manifest (a plain directory of
	// local builds), checked against VERSION.json's h1: hashes where
	// present.
	AllowUnsigned bool
	// Shown is the input as the user named it, for messages; default the
	// path Import was given.
	Shown string
	// ScratchDir is where a tar file is unpacked, in a directory of its
	// own that is removed when the import ends (and by RemoveScratch if
	// the process did not get to it); default os.TempDir().
	ScratchDir string
	// MaxFileBytes bounds each file of a tar file; default 1 GiB.
	MaxFileBytes int64
	// MaxEntries bounds the entries of a tar file, and the provider
	// directories and files of a directory import; default
	// DefaultMaxEntries.
	MaxEntries int
	// CLI is the CLI releases side the CLI versions of the input are
	// imported into; nil: they are refused, each reported.
	CLI CLISide
}

// Import loads the export at in (a directory, or a tar file, compressed
// or not) into engine's cache through engine.AirGap().Import, which verifies
// every package as if it came from its origin, once a key of
// opts.Trust vouches for its version (see importVersion). Each version
// refused is passed to report (one line, naming the file at fault and the
// key it would need) and counted, and the import goes on; the error is
// for what stops it.
func Import(ctx context.Context, engine Engine, in string, opts ImportOptions, report func(string)) (ImportSummary, error) {
	var sum ImportSummary
	report = boundedReport(report)
	if opts.Shown == "" {
		opts.Shown = in
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = 1 << 30
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	info, err := os.Stat(in)
	if err != nil {
		return sum, err
	}
	dir := in
	if !info.IsDir() {
		// Unpacked beside the cache, within the room above its disk
		// reserve; a tar file refused leaves nothing behind.
		tmp, err := newScratch(opts.ScratchDir)
		if err != nil {
			return sum, err
		}
		defer os.RemoveAll(tmp)
		lim := unpackLimits{maxFileBytes: opts.MaxFileBytes, maxEntries: opts.MaxEntries, space: diskSpace(engine.AirGap().DiskHeadroom, tmp)}
		if err := untar(ctx, in, tmp, lim); err != nil {
			if ctx.Err() != nil {
				return sum, ctx.Err() // interrupted: nothing was refused
			}
			return sum, fmt.Errorf("%s refused: %w", opts.Shown, err)
		}
		dir = exportWithin(tmp)
	}
	b := openBundle(dir, opts)
	defer b.close()
	err = importDir(ctx, engine, b, report, &sum)
	if err == nil {
		err = importModules(ctx, engine, b, opts.ScratchDir, report, &sum)
	}
	if err == nil {
		err = importReleases(ctx, engine, opts.CLI, b, report, &sum)
	}
	if err == nil {
		b.refuseUnreached(report, &sum)
	}
	// What it stored is on disk before it says it is done (or was
	// interrupted): the medium it came on may be taken away then.
	if !sum.stored() {
		return sum, err
	}
	if serr := engine.AirGap().Sync(); serr != nil && err == nil {
		err = fmt.Errorf("making what was imported durable: %w", serr)
	}
	return sum, err
}

// maxReportBytes bounds one line an import reports. A refusal quotes
// what the input says before any key vouches for it (the provider an
// evidence file names, a package's file name, os, arch and shasum),
// which only the file's bound (16 MiB) bounds, and every line is kept
// until the import ends, then logged and answered whole.
const maxReportBytes = 8 << 10

// boundedReport is report with each line cut to maxReportBytes.
func boundedReport(report func(string)) func(string) {
	return func(line string) { report(logbound.Cut(line, maxReportBytes)) }
}

// exportWithin is the directory of the export that the tar file unpacked
// in dir holds: dir, or its one directory when that is all it holds and
// holds an export's manifest (a tar made of the export's directory, `tar
// czf b.tgz OUT`, rather than of its contents, `tar -C OUT`), whose
// paths are the export's own. The unpacked tree is the import's own
// (internal/safetree wrote it: no link).
func exportWithin(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || !entries[0].IsDir() {
		return dir
	}
	sub := filepath.Join(dir, entries[0].Name())
	if info, err := os.Lstat(filepath.Join(sub, manifestName)); err == nil && info.Mode().IsRegular() {
		return sub
	}
	return dir
}

// bundle is an import's input as its trust anchors see it.
type bundle struct {
	dir, shown    string
	trust         Trust
	allowUnsigned bool
	// manifest is the input's manifest, by path, when a trusted export
	// key signed it (signer); nil otherwise, and why says why.
	manifest map[string]manifestFile
	signer   string
	why      string
	// listed are the manifest's paths, sorted (bundle.listedUnder).
	listed []string
	// releases is the manifest's releases section; releasesErr says why
	// it cannot be read (a format this release does not read).
	releases    *manifestReleases
	releasesErr error
	// hasManifest says the input has a manifest or its signature: it is
	// an export, not a plain directory.
	hasManifest bool
	// maxEntries bounds the entries of the input looked at (the tar file
	// it was unpacked from had as many at most); entriesLeft are those
	// still to look at.
	maxEntries, entriesLeft int
	// root is dir, through which every file and directory of the input
	// is read (bundle.open, bundle.readDir): no link or "..", there
	// before the import or made while it runs, leads a read out of it.
	// rootErr says why dir could not be opened as one.
	root    *os.Root
	rootErr error
	// reached are the provider and module versions the import looked
	// at, by carried.String(), and the providers and modules whose
	// directory it refused whole, by address (refuseUnreached).
	reached map[string]bool
}

// openBundle reads the manifest of the input in dir, if any. The caller
// closes it.
func openBundle(dir string, opts ImportOptions) *bundle {
	b := &bundle{dir: dir, shown: opts.Shown, trust: opts.Trust, allowUnsigned: opts.AllowUnsigned, hasManifest: true,
		maxEntries: opts.MaxEntries, entriesLeft: opts.MaxEntries, reached: map[string]bool{}}
	b.root, b.rootErr = os.OpenRoot(dir)
	m, err := readManifest(dir, opts.Trust.ExportKeys)
	var merr *manifestError
	switch {
	case err == nil:
		b.manifest, b.signer = map[string]manifestFile{}, m.Signer
		b.releases, b.releasesErr = m.Releases, checkReleasesSection(m.Releases)
		for _, f := range m.Files {
			b.manifest[f.Path] = f
		}
	case errors.Is(err, errNoManifest):
		b.hasManifest = false
		b.why = fmt.Sprintf("%s has no signed manifest %s (a bundle made by tfmirror 1.x, an export into a directory interrupted before it signed its manifest (export again), or a plain directory): from it, only versions whose SHA256SUMS is signed by a key pinned for their namespace are imported (--trusted-publisher-keys)",
			b.shown, manifestName)
	case errors.As(err, &merr):
		b.why = fmt.Sprintf("the manifest %s %s", filepath.Join(b.shown, manifestName), merr.Msg)
	default:
		b.why = fmt.Sprintf("the manifest %s: %v", filepath.Join(b.shown, manifestName), err)
	}
	return b
}

// importDir imports every provider version in dir (laid out as export and
// `terraform providers mirror` write it). Names in messages are given
// under shown, the directory or tar file the user named.
func importDir(ctx context.Context, engine Engine, b *bundle, report func(string), sum *ImportSummary) error {
	dir, shown := b.dir, b.shown
	providerDirs, err := b.entriesAt(dir, 3, modulesDir, releasesDir) // see importModules and importReleases
	if err != nil {
		return err
	}
	found := false
	for _, pdir := range providerDirs {
		if !b.realDir(pdir) {
			continue
		}
		rel, _ := filepath.Rel(dir, pdir)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if parts[0] == modulesDir || parts[0] == releasesDir {
			continue // see importModules and importReleases
		}
		p, err := addrs.ParseProvider(strings.Join(parts, "/"))
		if err != nil {
			sum.Failed++
			report(fmt.Sprintf("%s: %v", filepath.Join(shown, rel), err))
			continue
		}
		versions, ignored, misnamed, err := scanProviderDir(b, pdir, p.Type)
		if errors.Is(err, errTooManyEntries) {
			return err
		}
		if err != nil {
			b.reached[p.String()] = true
			sum.Failed++
			report(fmt.Sprintf("%s: %v", filepath.Join(shown, rel), err))
			continue
		}
		sum.Ignored += ignored + len(misnamed)
		for _, name := range misnamed {
			report(fmt.Sprintf("%s: not named as a package of %s (terraform-provider-%s_VERSION_OS_ARCH.zip); ignored",
				filepath.Join(shown, rel, name), p, p.Type))
		}
		for _, version := range slices.Sorted(maps.Keys(versions)) {
			found = true
			if err := ctx.Err(); err != nil {
				return err
			}
			b.reached[providerCarried(p.String(), version).String()] = true
			if err := importVersion(ctx, engine, b, p, pdir, version, versions[version], sum); err != nil {
				if err := ctx.Err(); err != nil {
					return err // interrupted: nothing was refused
				}
				sum.Failed++
				report(fmt.Sprintf("%s %s refused: %v", p, version, err))
			}
		}
	}
	// An empty bundle, the export of an empty cache, signed by a trusted
	// key and listing nothing, is no mistake: there is nothing to import.
	emptyExport := b.manifest != nil && len(b.manifest) == 0
	if !found && !hasModules(dir) && !hasReleases(dir) && !emptyExport {
		if b.hasManifest && b.manifest == nil {
			// An export's manifest no trusted key vouches for: say why,
			// the key, rather than send the operator after the bundle.
			return fmt.Errorf("%s holds no provider packages (HOST/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip), and is no empty export a trusted key signed: %s", shown, b.why)
		}
		return fmt.Errorf("%s holds no provider packages (HOST/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip)", shown)
	}
	return nil
}

// refuseUnreached refuses, reporting each and counting it as failed, the
// provider and module versions whose files the signed manifest lists and
// that the import did not look at: the input lacks them (removed, or lost
// in a copy cut short), or holds them where an import does not read
// (under a link). A signed manifest says what the export holds: a version
// it lists is imported or refused, never left out in silence.
// (importReleases does the same for the CLI versions its section lists.)
// The file named is the first of the version's that the input lacks.
func (b *bundle) refuseUnreached(report func(string), sum *ImportSummary) {
	var order []carried
	named := map[string]string{} // by carried.String(): the file named
	for _, rel := range slices.Sorted(maps.Keys(b.manifest)) {
		c, ok := carriedBy(rel)
		if !ok || c.kind == carriedCLI || b.reached[c.address] || b.reached[c.String()] {
			continue
		}
		prev, seen := named[c.String()]
		switch {
		case !seen:
			order = append(order, c)
			named[c.String()] = rel
		case b.present(prev) && !b.present(rel):
			named[c.String()] = rel
		}
	}
	for _, c := range order {
		sum.Failed++
		report(fmt.Sprintf("%s refused: %s is listed in the manifest %s (signed by the trusted export key %s) but missing",
			c, b.shownPath(named[c.String()]), b.shownPath(manifestName), b.signer))
	}
}

// present reports whether the input holds an entry at rel (relative to
// its top, with slashes), as its root finds it.
func (b *bundle) present(rel string) bool {
	if b.rootErr != nil {
		return false
	}
	_, err := b.root.Lstat(filepath.FromSlash(rel))
	return err == nil
}

// errTooManyEntries is the error of an input with more entries than an
// import looks at (ImportOptions.MaxEntries).
var errTooManyEntries = errors.New("too many entries")

// take takes n entries looked at from the input's budget, failing with
// errTooManyEntries past it.
func (b *bundle) take(n int) error {
	if b.entriesLeft -= n; b.entriesLeft < 0 {
		return fmt.Errorf("%s holds more than %d entries (directories and files), the most an import takes: %w", b.shown, b.maxEntries, errTooManyEntries)
	}
	return nil
}

// entriesAt returns the paths of the entries depth levels below base
// (sorted; what they are is the caller's to check), reading each
// directory on the way through readDir, so that no more entries are read
// than the input's budget takes; links, and the names in skip at the
// first level, are not descended into.
func (b *bundle) entriesAt(base string, depth int, skip ...string) ([]string, error) {
	level := []string{base}
	for d := range depth {
		var next []string
		for _, dir := range level {
			entries, err := b.readDir(dir)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				if (e.IsDir() || d == depth-1) && !(d == 0 && slices.Contains(skip, e.Name())) {
					next = append(next, filepath.Join(dir, e.Name()))
				}
			}
		}
		level = next
	}
	slices.Sort(level)
	return level, nil
}

// close closes the input's root.
func (b *bundle) close() {
	if b.root != nil {
		b.root.Close()
	}
}

// inRoot returns path (in b.dir) as a name in b.root.
func (b *bundle) inRoot(path string) (string, error) {
	if b.rootErr != nil {
		return "", b.rootErr
	}
	rel, err := filepath.Rel(b.dir, path)
	if err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s is not in the input %s", path, b.dir)
	}
	return rel, nil
}

// open opens the regular file at path (in b.dir) through b.root, as
// inputfile.OpenIn does: never a link, never a FIFO that would block, and
// nothing outside the input whatever the directories above it became.
func (b *bundle) open(path string) (*os.File, fs.FileInfo, error) {
	rel, err := b.inRoot(path)
	if err != nil {
		return nil, nil, err
	}
	return inputfile.OpenIn(b.root, rel)
}

// readCapped reads the file at path (in b.dir) as b.open opens it,
// failing when it is larger than limit.
func (b *bundle) readCapped(path string, limit int64) ([]byte, error) {
	return readOpened(b.open, path, limit)
}

// readDir returns the entries of dir (unsorted), taken from the input's
// budget: past it, without reading the rest, errTooManyEntries. A link or
// anything else but a directory at dir is refused, and nothing outside
// the input is listed (inputfile.OpenDirIn).
func (b *bundle) readDir(dir string) ([]os.DirEntry, error) {
	rel, err := b.inRoot(dir)
	if err != nil {
		return nil, err
	}
	f, err := inputfile.OpenDirIn(b.root, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(max(b.entriesLeft, 0) + 1)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return entries, b.take(len(entries))
}

// scanProviderDir returns the packed archives in dir by version (as
// named) and platform, how many directories it ignored (unpacked
// layouts), and the names of the zips it ignored for not being named as
// packages of typ (another provider's, copied into the wrong directory).
// An entry named as an archive that is not a regular file (a link, a
// FIFO) is returned too, for importVersion to refuse by name.
func scanProviderDir(b *bundle, dir, typ string) (_ map[string]map[string]string, ignored int, misnamed []string, _ error) {
	entries, err := b.readDir(dir)
	if err != nil {
		return nil, 0, nil, err
	}
	out := map[string]map[string]string{}
	for _, e := range entries {
		version, pl, err := addrs.ParseArchiveName(typ, e.Name())
		switch {
		case err == nil && !e.IsDir():
			if out[version] == nil {
				out[version] = map[string]string{}
			}
			out[version][pl.String()] = e.Name()
		case e.IsDir():
			ignored++ // unpacked layouts are not imported
		case strings.HasSuffix(strings.ToLower(e.Name()), ".zip"):
			misnamed = append(misnamed, e.Name())
		}
	}
	return out, ignored, misnamed, nil
}

// versionFiles are the files of one version that an import read or
// found, by path relative to the input's top.
type versionFiles struct {
	b *bundle
	// read are the files read whole; zips the archives, by size.
	read map[string]manifestFile
	zips map[string]int64
}

// readFile reads the file at path (in b.dir) with limit, and records it.
func (vf *versionFiles) readFile(path string, limit int64) ([]byte, error) {
	data, err := vf.b.readCapped(path, limit)
	if err != nil {
		return nil, err
	}
	rel := vf.b.rel(path)
	sum := sha256.Sum256(data)
	vf.read[rel] = manifestFile{Path: rel, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	return data, nil
}

// realDir reports whether path (in b.dir) is a directory reached from
// b.dir through directories only: a link to a directory, or a directory
// under one, is not read, wherever it points (a directory import reads
// nothing outside the input; a tar file's has no links).
func (b *bundle) realDir(path string) bool {
	rel, err := filepath.Rel(b.dir, path)
	if err != nil || !filepath.IsLocal(rel) {
		return false
	}
	p := b.dir
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		if info, err := os.Lstat(p); err != nil || !info.IsDir() {
			return false
		}
	}
	return true
}

// rel is path (in b.dir) relative to b.dir, with slashes.
func (b *bundle) rel(path string) string {
	rel, err := filepath.Rel(b.dir, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(rel)
}

// shownPath is rel (relative to b.dir) as the user named the input.
func (b *bundle) shownPath(rel string) string { return filepath.Join(b.shown, filepath.FromSlash(rel)) }

// covers checks that the signed manifest lists every file of the version
// (prefix: its files' common path prefix, versionJSON its VERSION.json)
// with the bytes read, and the archives with their sizes; and that every
// file of the version the manifest lists is there. It returns the
// manifest's sha256 of each archive, which the engine then requires.
func (b *bundle) covers(vf *versionFiles, prefix, versionJSON string) (map[string]string, error) {
	where := fmt.Sprintf("the manifest %s (signed by the trusted export key %s)", b.shownPath(manifestName), b.signer)
	shas := map[string]string{}
	for _, rel := range slices.Sorted(maps.Keys(vf.zips)) {
		want, ok := b.manifest[rel]
		switch {
		case !ok:
			return nil, fmt.Errorf("%s is not in %s", b.shownPath(rel), where)
		case want.Size != vf.zips[rel]:
			return nil, fmt.Errorf("%s differs from %s: %d bytes, the manifest says %d", b.shownPath(rel), where, vf.zips[rel], want.Size)
		}
		shas[rel] = want.SHA256
	}
	for _, rel := range slices.Sorted(maps.Keys(vf.read)) {
		got := vf.read[rel]
		want, ok := b.manifest[rel]
		switch {
		case !ok:
			return nil, fmt.Errorf("%s is not in %s", b.shownPath(rel), where)
		case want.Size != got.Size || want.SHA256 != got.SHA256:
			return nil, fmt.Errorf("%s differs from %s: sha256 %s, %d bytes; the manifest says %s, %d bytes",
				b.shownPath(rel), where, got.SHA256, got.Size, want.SHA256, want.Size)
		}
	}
	under := b.listedUnder(prefix)
	if _, ok := b.manifest[versionJSON]; ok && !strings.HasPrefix(versionJSON, prefix) {
		under = append(under, versionJSON)
	}
	for _, rel := range under {
		if _, ok := vf.read[rel]; ok {
			continue
		}
		if _, ok := vf.zips[rel]; ok {
			continue
		}
		return nil, fmt.Errorf("%s is listed in %s but missing", b.shownPath(rel), where)
	}
	return shas, nil
}

// listedUnder returns the paths the manifest lists that begin with
// prefix, sorted: a version's files, found in the manifest's paths sorted
// once, so that checking every version of a large export against it
// takes the files of each, not the manifest whole again.
func (b *bundle) listedUnder(prefix string) []string {
	if b.listed == nil {
		b.listed = slices.Sorted(maps.Keys(b.manifest))
	}
	i, _ := slices.BinarySearch(b.listed, prefix)
	j := i
	for j < len(b.listed) && strings.HasPrefix(b.listed[j], prefix) {
		j++
	}
	return slices.Clone(b.listed[i:j])
}

// publisherVouches checks every SHA256SUMS document of a signed version
// of p against the keys pinned for p's namespace.
func (b *bundle) publisherVouches(p addrs.Provider, dir string, ef *evidenceFile, docs []records.SumsDocument) error {
	ns := Namespace{Host: p.Hostname, Name: p.Namespace}
	keys := b.trust.PublisherKeys[ns]
	if len(docs) == 0 {
		return fmt.Errorf("its evidence lists no SHA256SUMS document")
	}
	for i, doc := range docs {
		path := b.shownPath(b.rel(filepath.Join(dir, ef.Documents[i].File)))
		issuer := signatureIssuer(doc.Signature)
		if len(keys) == 0 {
			return fmt.Errorf("%s is signed by key %s, and no publisher key is pinned for %s (--trusted-publisher-keys)", path, orUnknown(issuer), ns)
		}
		if _, err := checkDetached(keys, doc.Content, doc.Signature); err != nil {
			if issuer != "" && hasKeyID(keys, issuer) {
				return fmt.Errorf("%s does not verify with the key %s pinned for %s: %s", path, issuer, ns, signatureRefusal(keys, issuer, err))
			}
			return fmt.Errorf("%s is signed by key %s, which is not among the keys pinned for %s (--trusted-publisher-keys)", path, orUnknown(issuer), ns)
		}
	}
	return nil
}

// importVersion imports one version of p from dir, with its evidence file
// when there is one, once one of the operator's keys vouches for it:
//
//   - the input's manifest, signed by a trusted export key, lists every
//     file of the version with the bytes found (signed or not); or else
//   - the version is signed, and a key pinned for p's namespace signed
//     every one of its SHA256SUMS documents; or else
//   - the input has no manifest (a plain directory), the version has no
//     signature, and b.allowUnsigned: a local build, checked against
//     VERSION.json's h1: hashes where present.
//
// Nothing in the input vouches for itself: the signing keys in an
// evidence file are checked against, never trusted. A key vouches for
// what it signed only: the plugin protocols of the evidence file, which
// no publisher signs, are taken under the manifest (or with a local
// build), never on a publisher key alone. A version no key vouches for is
// refused whole, saying why each anchor does not.
func importVersion(ctx context.Context, engine Engine, b *bundle, p addrs.Provider, dir, version string, zips map[string]string, sum *ImportSummary) error {
	v, err := addrs.ParseSemver(version)
	if err != nil {
		return err
	}
	shown := b.shownPath(b.rel(dir))
	vf := &versionFiles{b: b, read: map[string]manifestFile{}, zips: map[string]int64{}}
	in := imports.Imported{Provider: p, Version: v}
	var paths []string // per package, as shown
	evPath := filepath.Join(dir, evidenceName(p.Type, version))
	mine := func(ef *evidenceFile) error {
		if ef.Provider != p.String() || ef.Version != version {
			return fmt.Errorf("%s is of %s %s", filepath.Join(shown, filepath.Base(evPath)), ef.Provider, ef.Version)
		}
		return nil
	}
	ef, docs, err := readEvidence(dir, evPath, mine, vf.readFile)
	switch {
	case errors.Is(err, os.ErrNotExist) && !fileExists(evPath):
		ef = nil
	case err != nil:
		return err
	}
	versionJSON := filepath.Join(dir, version+".json")
	hashes, err := versionHashes(versionJSON, vf.readFile)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(shown, version+".json"), err)
	}
	for _, pl := range slices.Sorted(maps.Keys(zips)) {
		info, err := os.Lstat(filepath.Join(dir, zips[pl]))
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s is %s; an import reads regular files only", filepath.Join(shown, zips[pl]), inputfile.Kind(info.Mode()))
		}
		vf.zips[b.rel(filepath.Join(dir, zips[pl]))] = info.Size()
	}
	signed := ef != nil && !ef.Unsigned

	// What vouches for it.
	var why []string
	var shas map[string]string // by path, the manifest's, when it vouches
	if b.manifest != nil {
		prefix := b.rel(filepath.Join(dir, "terraform-provider-"+p.Type+"_"+version+"_"))
		if shas, err = b.covers(vf, prefix, b.rel(versionJSON)); err != nil {
			why = append(why, err.Error())
		}
	} else {
		why = append(why, b.why)
	}
	if shas == nil {
		switch {
		case signed:
			if err := b.publisherVouches(p, dir, ef, docs); err != nil {
				why = append(why, err.Error())
			} else {
				why = nil
			}
		case b.hasManifest:
			why = append(why, "the version has no signature, and only the exporting mirror's manifest can vouch for it (--allow-unsigned is for plain directories of local builds)")
		case !b.allowUnsigned && ef == nil:
			why = append(why, fmt.Sprintf("%s has no evidence file %s (the origin's signed SHA256SUMS); to accept it without signature as a local build, import with --allow-unsigned",
				shown, evidenceName(p.Type, version)))
		case !b.allowUnsigned:
			why = append(why, fmt.Sprintf("%s says the version was imported without signature; to accept it so, import with --allow-unsigned", filepath.Join(shown, filepath.Base(evPath))))
		default:
			why = nil // a local build, accepted with --allow-unsigned
		}
		if len(why) > 0 {
			return fmt.Errorf("no trusted key vouches for it: %s", strings.Join(why, "; and "))
		}
	}

	// The protocols of the evidence file are vouched for by the manifest
	// that lists it, never by a publisher's signature, which covers the
	// SHA256SUMS only: on that path the version is listed without them
	// (which the clients take as unknown, not as incompatible). A local
	// build is taken as the directory gives it.
	protocols := shas != nil || !signed
	for _, pl := range slices.Sorted(maps.Keys(zips)) {
		path := filepath.Join(dir, zips[pl])
		pkg := imports.Package{Platform: pl, Filename: zips[pl], H1: hashes[pl], Open: openFile(b.open, path), Document: -1,
			SHA256: shas[b.rel(path)]}
		if ef != nil {
			epkg, ok := ef.Packages[pl]
			if !ok {
				return fmt.Errorf("%s has no entry for %s", filepath.Join(shown, filepath.Base(evPath)), zips[pl])
			}
			pkg.Filename, pkg.DownloadURL = epkg.Filename, epkg.DownloadURL
			pkg.OS, pkg.Arch, pkg.Shasum, pkg.Document = epkg.OS, epkg.Arch, epkg.Shasum, epkg.Document
			if protocols {
				pkg.Packages, pkg.Protocols = epkg.Packages, epkg.Protocols
				for _, proto := range epkg.Protocols {
					if !slices.Contains(in.Protocols, proto) {
						in.Protocols = append(in.Protocols, proto)
					}
				}
			} else {
				pkg.Packages = checkablePackages(epkg.Packages, zips)
			}
		}
		in.Packages = append(in.Packages, pkg)
		paths = append(paths, filepath.Join(shown, zips[pl]))
	}
	if signed {
		in.Documents = docs
	} else {
		in.Unsigned = true
	}
	res, err := engine.AirGap().Import(ctx, in)
	var ierr *imports.Error
	if errors.As(err, &ierr) {
		switch {
		case ierr.Document >= 0 && ef != nil && ierr.Document < len(ef.Documents):
			d := ef.Documents[ierr.Document]
			return fmt.Errorf("%s (signature %s): %w", filepath.Join(shown, d.File), filepath.Join(shown, d.SignatureFile), err)
		case ierr.Package >= 0 && ierr.Package < len(paths):
			return fmt.Errorf("%s: %w", paths[ierr.Package], err)
		}
	}
	if err != nil {
		return err
	}
	added := false
	for _, out := range res.Packages {
		if out.Present {
			sum.Present++
		} else {
			sum.Imported++
			sum.Bytes += out.Size
			added = true
		}
	}
	if added {
		sum.Versions = append(sum.Versions, p.String()+" "+v.String())
	}
	return nil
}

// checkablePackages is pkgs (OpenTofu's "packages" of an evidence file)
// as a publisher's key alone vouches for them: the zh: hashes, which the
// engine checks against the signed SHA256SUMS, and the h1: hashes of the
// platforms this import carries the archives of (zips), which it checks
// against those archives once cached. An h1: of another platform, which
// no signature covers and nothing here can check, is left out, as the
// protocols are: OpenTofu writes every h1: the answer gives into the
// lock file.
func checkablePackages(pkgs map[string]registryjson.PackageHashes, zips map[string]string) map[string]registryjson.PackageHashes {
	if pkgs == nil {
		return nil
	}
	out := make(map[string]registryjson.PackageHashes, len(pkgs))
	for pl, h := range pkgs {
		if _, ok := zips[pl]; ok {
			out[pl] = h
			continue
		}
		h.Hashes = slices.DeleteFunc(slices.Clone(h.Hashes), func(hash string) bool { return !strings.HasPrefix(hash, "zh:") })
		out[pl] = h
	}
	return out
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// openFile returns an ImportedPackage.Open for path: the regular file
// open finds there when it is opened, whatever was listed there before.
// The input's files are opened by bundle.open (never a link, never a FIFO
// that would block, nothing outside the input), the import's own (a
// local module it packed) by inputfile.Open.
func openFile(open opener, path string) func(context.Context) (io.ReadCloser, int64, error) {
	return func(context.Context) (io.ReadCloser, int64, error) {
		f, info, err := open(path)
		if err != nil {
			return nil, 0, err
		}
		return f, info.Size(), nil
	}
}

// versionHashes returns the h1: hash of each platform that the
// VERSION.json at path lists, if it exists.
func versionHashes(path string, read func(string, int64) ([]byte, error)) (map[string]string, error) {
	out := map[string]string{}
	data, err := read(path, maxEvidenceBytes)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	var doc mirrorVersion
	if err := jsonbound.Unmarshal(data, &doc, jsonbound.Limits{}); err != nil {
		return nil, err
	}
	for pl, a := range doc.Archives {
		for _, h := range a.Hashes {
			if strings.HasPrefix(h, "h1:") {
				out[pl] = h
				break
			}
		}
	}
	return out, nil
}

package airgap

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/dirsync"
	"github.com/tfmirror/tfmirror/v2/internal/jsonbound"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// Selection is what Export writes: empty lists select everything.
type Selection struct {
	Providers []addrs.Provider
	Versions  []string // canonical
	Platforms []string // os_arch
}

func (sel Selection) wants(cv mirror.CachedVersion) bool {
	if len(sel.Versions) > 0 && !slices.Contains(sel.Versions, cv.Version) {
		return false
	}
	if len(sel.Providers) == 0 {
		return true
	}
	return slices.ContainsFunc(sel.Providers, func(p addrs.Provider) bool { return p.String() == cv.Provider })
}

// ExportSummary counts what Export did, in packages (one version, one
// platform).
type ExportSummary struct {
	// Written packages were written, Bytes their size; Present ones were
	// in the export already with the right sha256.
	Written int   `json:"written"`
	Bytes   int64 `json:"bytes"`
	Present int   `json:"present"`
	// Modules are the module packages written, ModuleBytes their
	// size; ModulesPresent those in the export already.
	Modules        int   `json:"modules,omitempty"`
	ModuleBytes    int64 `json:"module_bytes,omitempty"`
	ModulesPresent int   `json:"modules_present,omitempty"`
	// CLIArchives are the CLI release archives written, CLIBytes their
	// size; CLIPresent those in the export already.
	CLIArchives int   `json:"cli_archives,omitempty"`
	CLIBytes    int64 `json:"cli_bytes,omitempty"`
	CLIPresent  int   `json:"cli_present,omitempty"`
	// Failed counts the versions that failed (each reported), of
	// providers, modules and CLI releases.
	Failed int `json:"failed"`
	// Signer is the fingerprint of the export key that signed the
	// manifest.
	Signer string `json:"signer,omitempty"`
	// Unlisted counts the files in the output that the manifest leaves
	// out (each reported): neither written nor checked by this export,
	// nor listed by an earlier one's manifest signed with the same key.
	Unlisted int `json:"unlisted,omitempty"`
	// Versions are the provider versions it wrote packages of,
	// "HOST/NAMESPACE/TYPE VERSION", and the CLI versions it wrote
	// archives of, by the address the package policy names them by
	// ("releases.hashicorp.com/hashicorp/terraform 1.6.0"), for the
	// audit log.
	Versions []string `json:"versions,omitempty"`
	// Held counts the versions (of providers, modules and CLI releases) left out
	// because the package policy in effect refuses them (each reported):
	// cached ones, and those an earlier export into the same directory
	// wrote, whether the cache still holds them or not (carried.go).
	Held int `json:"held,omitempty"`
}

// Served is the package policy in front of the engine as the exports ask
// it (*mirror/served.Packages): whether a provider or module version the
// cache holds may be served now, and, when not, the *gate.PolicyError
// saying why. An export carries only what it lets through, so that what
// an export carries is what the mirror serves.
type Served interface {
	StoredVersion(ctx context.Context, p addrs.Provider, v versions.Version) error
	StoredModuleVersion(ctx context.Context, m addrs.Module, v versions.Version) error
}

// Export writes the cached packages sel selects that pkgs (the package
// policy in front of engine) lets be served, with their evidence, the
// cached module packages (see exportModules) and, with cli (nil: none),
// the cached CLI releases (see exportReleases), to
// out: a directory, or (IsTarName) one tar file; and the manifest of
// every file there, signed by key (see writeManifest). Into the directory
// of an earlier export it adds to what is there, and judges every version
// whose files that export's manifest (signed with the same key) lists as
// it judges a cached one, whether the cache still holds it or not: one
// the policy refuses, or that its layer cannot judge, is left out,
// reported and withdrawn from out (judgeCarried); one it lets through is
// kept. Each version that fails is passed to report (one line, naming
// it) and counted, and the export goes on; so is each file the manifest
// leaves out. The error is for what stops it: an *UnmatchedSelectionError
// (checkSelection), before anything is written, when sel names what the
// cache does not hold; the context's error when it is interrupted, and
// then, into a tar file, nothing is left under out's name nor beside it.
func Export(ctx context.Context, engine Engine, pkgs Served, cli CLISide, sel Selection, out string, key *ExportKey, report func(string)) (ExportSummary, error) {
	var sum ExportSummary
	if pkgs == nil {
		return sum, errors.New("no package policy layer to ask what may be exported")
	}
	if key == nil {
		return sum, errors.New("no export key to sign the export's manifest with")
	}
	sum.Signer = key.Fingerprint()
	selected, err := selectChecked(ctx, engine, cli, sel, out)
	if err != nil {
		return sum, err
	}
	if IsTarName(out) {
		err = exportTar(ctx, engine, pkgs, cli, sel, selected, out, key, report, &sum)
	} else {
		err = exportDir(ctx, engine, pkgs, cli, sel, selected, out, false, key, report, &sum)
	}
	return sum, err
}

// exportTar exports into a temporary directory beside out, then writes
// it as one tar file (gzip-compressed for .tar.gz and .tgz), synced, and
// renames it to out.
func exportTar(ctx context.Context, engine Engine, pkgs Served, cli CLISide, sel Selection, selected []mirror.CachedVersion, out string, key *ExportKey, report func(string), sum *ExportSummary) error {
	if err := removeStaleTarTemps(filepath.Dir(out), report); err != nil {
		return err
	}
	tmp, lock, err := makeTarTemp(filepath.Dir(out))
	if err != nil {
		return err
	}
	defer lock.Close() // once the directory is removed
	defer os.RemoveAll(tmp)
	if err := exportDir(ctx, engine, pkgs, cli, sel, selected, tmp, true, key, report, sum); err != nil {
		return err
	}
	f, err := os.OpenFile(tmp+".tar", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var w io.Writer = f
	var zw *gzip.Writer
	if !strings.HasSuffix(out, ".tar") {
		zw = gzip.NewWriter(f)
		w = zw
	}
	tw := tar.NewWriter(w)
	err = filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == tmp {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err // interrupted: nothing takes out's name
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(tmp, path)
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, ctxReader{ctx, src})
		return err
	})
	if err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return fmt.Errorf("writing %s: %w", out, err)
		}
	}
	// The mode of a directory export's files (outDir.write), not the
	// temporary file's own 0600: the bundle is read on the other side of
	// the gap, often by another user.
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	// Synced before it takes out's name, so that a power loss after the
	// export said it was done leaves the whole file, not an empty one.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := os.Rename(f.Name(), out); err != nil {
		return err
	}
	// Its name is on disk too before the export says it is done: a
	// medium pulled out at once holds it under out's name, not under
	// its temporary one (or out an earlier export's).
	if err := syncDir(filepath.Dir(out)); err != nil {
		return fmt.Errorf("syncing %s: %w", filepath.Dir(out), err)
	}
	return nil
}

// syncDir makes the names in the directory dir durable; a var, for tests.
var syncDir = dirsync.Sync

// ctxReader reads r until ctx is done: a large archive copied into the
// tar file stops at an interrupt.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// listCached lists the cached versions of providers (of every provider,
// when it names none). Named providers are listed each on its own, so
// that exporting one costs what it holds, not what the whole cache does.
func listCached(engine Engine, providers []addrs.Provider) ([]mirror.CachedVersion, error) {
	var listed []mirror.CachedVersion
	collect := func(cv mirror.CachedVersion) error {
		listed = append(listed, cv)
		return nil
	}
	prefixes := []string{""}
	if len(providers) > 0 {
		prefixes = nil
		for _, p := range providers {
			if pre := p.String() + "/"; !slices.Contains(prefixes, pre) {
				prefixes = append(prefixes, pre)
			}
		}
	}
	for _, pre := range prefixes {
		if err := engine.ListCachedAfter(pre, "", collect); err != nil {
			return nil, fmt.Errorf("listing the cache: %w", err)
		}
	}
	return listed, nil
}

// cachedModules lists the module versions whose package is cached, and
// those whose record today's rules refuse (modules.Cached.Refused), which
// an export reports as failed rather than leave out unsaid.
func cachedModules(engine Engine) ([]modules.Cached, error) {
	var cached []modules.Cached
	err := engine.Modules().ListCachedModules(func(cm modules.Cached) error {
		if cm.Cached || cm.Refused != nil {
			cached = append(cached, cm)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the cached modules: %w", err)
	}
	return cached, nil
}

// exportDir writes the selected cached packages into the directory out,
// with their evidence, judges the versions an earlier export into out
// wrote that it has not (judgeCarried), then writes index.json and
// VERSION.json of every provider in out, as `terraform providers mirror`
// does, and last the manifest signed by key. Every file of out is read
// and written through one root (outdir.go): nothing outside out, and no
// link in it. It holds out's lock while it runs, unless locked says its
// caller does (openOutDir).
func exportDir(ctx context.Context, engine Engine, pkgs Served, side CLISide, sel Selection, selected []mirror.CachedVersion, out string, locked bool, key *ExportKey, report func(string), sum *ExportSummary) error {
	dir, err := openOutDir(out, locked)
	if err != nil {
		return err
	}
	defer dir.Close()
	dir.maxFileBytes = maxKeptBytes(engine.Config())
	out = dir.path
	if err := dir.removeStaleTempsReporting(report); err != nil {
		return err
	}
	files := newExportFiles(dir, key)
	for _, cv := range selected {
		if err := ctx.Err(); err != nil {
			return err
		}
		left, err := files.judge(providerCarried(cv.Provider, cv.Version), storedProvider(ctx, pkgs, cv), report, sum)
		if err != nil {
			return err
		}
		if left {
			continue
		}
		if err := exportVersion(engine, sel, cv, out, files, sum); err != nil {
			sum.Failed++
			report(fmt.Sprintf("%s %s: %v", cv.Provider, cv.Version, err))
		}
	}
	if sel.wantsModules() {
		if err := exportModules(ctx, engine, pkgs, out, files, report, sum); err != nil {
			return err
		}
	}
	var cli ServedCLI
	if side != nil {
		cli = side.ServedCLI()
		if err := exportReleases(ctx, side.CLIReleases(), cli, engine, sel, out, files, report, sum); err != nil {
			return err
		}
	}
	if err := judgeCarried(ctx, pkgs, cli, files, report, sum); err != nil {
		return err
	}
	if err := writeIndexes(files, report); err != nil {
		return err
	}
	unlisted, err := writeManifest(key, files)
	if err != nil {
		return fmt.Errorf("writing the manifest: %w", err)
	}
	// A version with a file the manifest leaves out is one an import
	// refuses: it failed, once, whatever else of it was written.
	unvouched := map[string]bool{}
	for _, rel := range unlisted {
		sum.Unlisted++
		report(fmt.Sprintf("%s: left out of the signed manifest (neither written nor checked by this export, nor listed by an earlier export signed with this key); an import refuses what it belongs to",
			filepath.Join(out, filepath.FromSlash(rel))))
		if c, ok := carriedBy(rel); ok && !unvouched[c.String()] {
			unvouched[c.String()] = true
			sum.Failed++
			report(fmt.Sprintf("%s: failed: a file of it is left out of the signed manifest, and an import refuses it", c))
		}
	}
	return nil
}

// storedProvider is the served layer's answer on the cached provider
// version cv: nil when the package policy lets it be served.
func storedProvider(ctx context.Context, pkgs Served, cv mirror.CachedVersion) error {
	p, v, err := parseCached(cv)
	if err != nil {
		return nil // not judged: exportVersion reports it as failed
	}
	return pkgs.StoredVersion(ctx, p, v)
}

// leftOut says whether the served layer's answer err on a cached version
// (what: its address and version) leaves it out of the export: a version
// the package policy refuses now (err a *gate.PolicyError) is reported
// and counted as held, and one the layer could not judge as failed; what
// an export carries is what the mirror serves.
func leftOut(err error, what string, report func(string), sum *ExportSummary) bool {
	if err == nil {
		return false
	}
	var pe *gate.PolicyError
	if !errors.As(err, &pe) {
		sum.Failed++
		report(fmt.Sprintf("%s: left out, the package policy could not judge it: %v", what, err))
		return true
	}
	v := pe.Verdict
	sum.Held++
	report(fmt.Sprintf("%s: left out, held back by the package policy (%s: %s): %s", what, v.Rule, v.Detail, v.Message()))
	return true
}

// parseCached parses the provider address and version of cv.
func parseCached(cv mirror.CachedVersion) (addrs.Provider, versions.Version, error) {
	p, err := addrs.ParseProvider(cv.Provider)
	if err != nil {
		return p, versions.Version{}, err
	}
	v, err := addrs.ParseSemver(cv.Version)
	return p, v, err
}

// exportVersion writes the cached archives of one version that sel
// selects, skipping those present with the right sha256, and its
// evidence.
func exportVersion(engine Engine, sel Selection, cv mirror.CachedVersion, out string, files *exportFiles, sum *ExportSummary) error {
	p, v, err := parseCached(cv)
	if err != nil {
		return err
	}
	ev, err := engine.AirGap().Stored(p, v)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type)
	if err := files.dir.mkdirAll(dir); err != nil {
		return err
	}
	cached := map[string]bool{}
	for _, cp := range cv.Platforms {
		cached[cp.Platform] = cp.Cached
	}
	var exported []records.PlatformEvidence
	var failed error
	written := sum.Written
	for _, pe := range ev.Platforms {
		if len(sel.Platforms) > 0 && !slices.Contains(sel.Platforms, pe.Platform) || !cached[pe.Platform] {
			continue
		}
		path := filepath.Join(dir, addrs.ArchiveName(p.Type, ev.Version, pe.Platform))
		wrote, n, err := exportArchive(engine, pe.SHA256, path, files)
		switch {
		case err != nil:
			failed = errors.Join(failed, fmt.Errorf("%s: %w", path, err))
			continue
		case wrote:
			sum.Written++
			sum.Bytes += n
		default:
			sum.Present++
		}
		exported = append(exported, pe)
	}
	if len(exported) > 0 {
		if err := writeEvidence(dir, p, ev, exported, files); err != nil {
			failed = errors.Join(failed, err)
		}
	}
	if sum.Written > written {
		sum.Versions = append(sum.Versions, p.String()+" "+ev.Version)
	}
	return failed
}

// exportArchive writes the cached archive sha to path (mode 0644) unless
// path is a regular file with those bytes already, and records it in
// files; it reports whether it wrote, and how many bytes.
func exportArchive(engine Engine, sha, path string, files *exportFiles) (bool, int64, error) {
	if got, n, err := files.dir.sha256Size(path); err == nil && got == sha {
		files.add(path, n, sha)
		return false, 0, nil
	}
	arc, err := engine.AirGap().OpenStored(sha)
	if err != nil {
		return false, 0, err
	}
	defer arc.Close()
	var n int64
	err = files.dir.write(path, 0o644, func(w io.Writer) error {
		h := sha256.New()
		var err error
		if n, err = io.Copy(io.MultiWriter(w, h), arc); err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != sha {
			return fmt.Errorf("the cached archive has sha256 %s, want %s", got, sha)
		}
		return nil
	})
	if err != nil {
		return false, 0, err
	}
	files.add(path, n, sha)
	return true, n, nil
}

// writeEvidence writes the evidence of the exported platforms of ev into
// dir, keeping the platforms an earlier export wrote there whose archives
// are still present, when that export's manifest, signed with the same
// key, vouches for its evidence; it records what it wrote and kept in
// files.
func writeEvidence(dir string, p addrs.Provider, ev *records.Evidence, exported []records.PlatformEvidence, files *exportFiles) error {
	unsigned := ev.Provenance == records.ProvenanceUnsigned
	docs := slices.Clone(ev.Documents)
	pkgs := map[string]evidencePackage{}
	for _, pe := range exported {
		pkgs[pe.Platform] = evidencePackage{Filename: pe.Filename, DownloadURL: pe.DownloadURL, Protocols: pe.Protocols,
			OS: pe.OS, Arch: pe.Arch, Shasum: pe.Shasum, SHA256: pe.SHA256, Packages: pe.Packages, Document: pe.Document}
	}
	path := filepath.Join(dir, evidenceName(p.Type, ev.Version))
	mine := func(ef *evidenceFile) error {
		if ef.Provider != p.String() || ef.Version != ev.Version {
			return fmt.Errorf("%s is of %s %s", path, ef.Provider, ef.Version)
		}
		return nil
	}
	if old, oldDocs, err := readEvidence(dir, path, mine, files.readVouched); err == nil && old.Unsigned == unsigned {
		for pl, pkg := range old.Packages {
			if _, ok := pkgs[pl]; ok {
				continue
			}
			zip := filepath.Join(dir, addrs.ArchiveName(p.Type, ev.Version, pl))
			got, n, err := files.dir.sha256Size(zip)
			if err != nil || got != pkg.SHA256 {
				continue
			}
			files.add(zip, n, got)
			if !unsigned {
				doc := oldDocs[pkg.Document]
				i := slices.IndexFunc(docs, func(d records.SumsDocument) bool {
					return string(d.Content) == string(doc.Content) && string(d.Signature) == string(doc.Signature) && slices.Equal(d.SigningKeys, doc.SigningKeys)
				})
				if i < 0 {
					docs = append(docs, doc)
					i = len(docs) - 1
				}
				pkg.Document = i
			}
			pkgs[pl] = pkg
		}
	}
	ef := evidenceFile{Format: evidenceFormat, Provider: p.String(), Version: ev.Version, Unsigned: unsigned, Packages: pkgs}
	for i, doc := range docs {
		docName, sigName := sumsNames(p.Type, ev.Version, i)
		if _, err := files.writeFile(filepath.Join(dir, docName), doc.Content); err != nil {
			return err
		}
		if _, err := files.writeFile(filepath.Join(dir, sigName), doc.Signature); err != nil {
			return err
		}
		ef.Documents = append(ef.Documents, evidenceDocument{File: docName, SignatureFile: sigName, URL: doc.URL,
			SignatureURL: doc.SignatureURL, SigningKeys: doc.SigningKeys})
	}
	_, err := files.writeJSON(path, ef)
	return err
}

// Bounds on the files of a version that are read whole, as the origin
// path bounds them: an evidence file (or VERSION.json) holds the package
// metadata of every platform, each of which the origin client takes up to
// 16 MiB of (discovery.Config.MaxDocumentBytes's default); a SHA256SUMS
// document and its signature as the engine fetches them.
const (
	maxEvidenceBytes = 16 << 20
	// maxEvidenceDocuments bounds the SHA256SUMS documents of one
	// version's evidence, each read (up to maxSumsBytes) and kept: a
	// version has one per distinct SHA256SUMS its platforms' packages
	// named, usually one, never more than its platforms.
	maxEvidenceDocuments = 64
	maxSumsBytes         = records.MaxSumsBytes
)

// readEvidence reads an evidence file and the documents it names (from
// dir), each through read. What the file says is a stranger's until a key
// vouches for it, so what it makes the reader read is bounded by what
// the input holds: mine, given the file, says whether it is the evidence
// of the version asked for (an error when not), before any document is
// read; a document or signature must then be a file of that version
// (named as sumsNames names them, terraform-provider-TYPE_VERSION_...,
// which no other version's name begins with), and each file is read
// once however often it is named. Without that, the files of one
// version, named again by every version of a bundle, were read again for
// each, a bundle of a few MiB making an import read terabytes.
func readEvidence(dir, path string, mine func(*evidenceFile) error, read func(path string, limit int64) ([]byte, error)) (*evidenceFile, []records.SumsDocument, error) {
	data, err := read(path, maxEvidenceBytes)
	if err != nil {
		return nil, nil, err
	}
	var ef evidenceFile
	if err := jsonbound.Unmarshal(data, &ef, jsonbound.Limits{}); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if ef.Format != evidenceFormat {
		return nil, nil, fmt.Errorf("%s: evidence format %d, this release reads %d", path, ef.Format, evidenceFormat)
	}
	if len(ef.Documents) > maxEvidenceDocuments {
		return nil, nil, fmt.Errorf("%s: %d SHA256SUMS documents, more than the %d a version may have", path, len(ef.Documents), maxEvidenceDocuments)
	}
	if err := mine(&ef); err != nil {
		return nil, nil, err
	}
	p, err := addrs.ParseProvider(ef.Provider)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	prefix := "terraform-provider-" + p.Type + "_" + ef.Version + "_"
	files := map[string][]byte{} // read so far, by name
	readOnce := func(name string, limit int64) ([]byte, error) {
		if data, ok := files[name]; ok {
			if int64(len(data)) > limit {
				return nil, fmt.Errorf("%s is larger than the %d bytes allowed", filepath.Join(dir, name), limit)
			}
			return data, nil
		}
		data, err := read(filepath.Join(dir, name), limit)
		if err == nil {
			files[name] = data
		}
		return data, err
	}
	docs := make([]records.SumsDocument, len(ef.Documents))
	for i, d := range ef.Documents {
		if !filepath.IsLocal(d.File) || !filepath.IsLocal(d.SignatureFile) || strings.ContainsRune(d.File+d.SignatureFile, '/') {
			return nil, nil, fmt.Errorf("%s: document %d names a file outside its directory", path, i)
		}
		if !strings.HasPrefix(d.File, prefix) || !strings.HasPrefix(d.SignatureFile, prefix) {
			return nil, nil, fmt.Errorf("%s: document %d names a file that is not of %s %s (%s...)", path, i, ef.Provider, ef.Version, prefix)
		}
		content, err := readOnce(d.File, maxSumsBytes)
		if err != nil {
			return nil, nil, err
		}
		sig, err := readOnce(d.SignatureFile, maxSignatureBytes)
		if err != nil {
			return nil, nil, err
		}
		docs[i] = records.SumsDocument{URL: d.URL, SignatureURL: d.SignatureURL, Content: content, Signature: sig, SigningKeys: d.SigningKeys}
	}
	for pl, pkg := range ef.Packages {
		if !ef.Unsigned && (pkg.Document < 0 || pkg.Document >= len(docs)) {
			return nil, nil, fmt.Errorf("%s: package %s refers to document %d, which it does not list", path, pl, pkg.Document)
		}
	}
	return &ef, docs, nil
}

// mirrorIndex and mirrorVersion are index.json and VERSION.json as
// `terraform providers mirror` writes them.
type mirrorIndex struct {
	Versions map[string]struct{} `json:"versions"`
}

type mirrorVersion struct {
	Archives map[string]mirrorArchive `json:"archives"`
}

type mirrorArchive struct {
	Hashes []string `json:"hashes,omitempty"`
	URL    string   `json:"url"`
}

// writeIndexes writes index.json and every VERSION.json of each provider
// directory (HOST/NAMESPACE/TYPE) in files' directory from the packed
// archives there, as `terraform providers mirror` does after every run,
// and records them in files. A link in the way of a provider directory,
// or in place of an archive, is passed over (outdir.go); so is a file
// named as an archive that the signed manifest does not list
// (exportFiles.vouched: a stray one in a carried directory, which no
// export wrote), unread, or that is no readable zip, said through report:
// the signed manifest leaves it out too, and it fails only what it
// belongs to.
func writeIndexes(files *exportFiles, report func(string)) error {
	dirs, err := providerDirs(files.dir)
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		typ := filepath.Base(dir)
		entries, err := files.dir.readDir(dir)
		if err != nil {
			return err
		}
		byVersion := map[string]map[string]mirrorArchive{}
		for _, e := range entries {
			version, pl, err := addrs.ParseArchiveName(typ, e.Name())
			if err != nil || !e.Type().IsRegular() {
				continue
			}
			v, err := addrs.ParseSemver(version)
			if err != nil {
				continue
			}
			// Only what the signed manifest lists is read: a stray zip
			// (carried back, whatever its size or what it unpacks to) is
			// not, nor indexed.
			if !files.vouched(filepath.Join(dir, e.Name())) {
				report(fmt.Sprintf("%s: left out of the mirror's index: neither written nor checked by this export, nor listed with these bytes by an earlier export signed with this key", filepath.Join(dir, e.Name())))
				continue
			}
			f, info, err := files.dir.open(filepath.Join(dir, e.Name()))
			if err != nil {
				return err
			}
			h1, err := verify.H1(f, info.Size())
			f.Close()
			if errors.Is(err, verify.ErrIntegrity) {
				report(fmt.Sprintf("%s: left out of the mirror's index: %v", filepath.Join(dir, e.Name()), err))
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, e.Name()), err)
			}
			if byVersion[v.String()] == nil {
				byVersion[v.String()] = map[string]mirrorArchive{}
			}
			byVersion[v.String()][pl.String()] = mirrorArchive{Hashes: []string{h1}, URL: e.Name()}
		}
		if len(byVersion) == 0 {
			continue
		}
		index := mirrorIndex{Versions: map[string]struct{}{}}
		for version, archives := range byVersion {
			index.Versions[version] = struct{}{}
			if _, err := files.writeJSON(filepath.Join(dir, version+".json"), mirrorVersion{Archives: archives}); err != nil {
				return err
			}
		}
		if _, err := files.writeJSON(filepath.Join(dir, "index.json"), index); err != nil {
			return err
		}
	}
	return nil
}

// providerDirs lists the directories three levels under dir's top
// (HOST/NAMESPACE/TYPE, and whatever else is that deep), in order, each
// reached through directories only: a link on the way is passed over.
func providerDirs(dir *outDir) ([]string, error) {
	dirs := []string{dir.path}
	for range 3 {
		var next []string
		for _, d := range dirs {
			entries, err := dir.readDir(d)
			if err != nil {
				continue // an unreadable directory holds no provider: passed over
			}
			for _, e := range entries {
				if e.IsDir() {
					next = append(next, filepath.Join(d, e.Name()))
				}
			}
		}
		dirs = next
	}
	return dirs, nil
}

package airgap

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// The manifest of an export lists every file of it that the exporting
// mirror wrote or checked (path, size, sha256), and the exporting
// mirror's key signs it: with that key trusted, an import takes a
// version whose every file the manifest lists with those bytes as the
// exporting mirror had it, and refuses any other. It lies at the
// export's top, where neither a static network mirror nor a
// filesystem_mirror looks.
const (
	manifestName    = "tfmirror-manifest.json"
	manifestSigName = manifestName + ".sig"
	// manifestFormat is the layout of the manifest this release writes.
	manifestFormat = 1
	// maxManifestBytes bounds a manifest (some 200 bytes per file).
	maxManifestBytes = 64 << 20
	// maxSignatureBytes bounds a detached signature, as the origin path does.
	maxSignatureBytes = records.MaxSignatureBytes
)

// manifest is tfmirror-manifest.json.
type manifest struct {
	Format int `json:"format"`
	// Signer is the fingerprint of the export key whose signature lies
	// beside the manifest, for people; the signature decides.
	Signer string         `json:"signer"`
	Files  []manifestFile `json:"files"`
	// Releases names the CLI versions among Files (releases.go), in a
	// format of its own; absent from manifests without any (and from
	// those of earlier releases, which read the top directory releases
	// as a provider host with no packages, and so leave it out).
	Releases *manifestReleases `json:"releases,omitempty"`
}

// manifestFile is one file of an export: Path relative to its top, with
// slashes.
type manifestFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// exportFiles records the files an export wrote or checked, by path
// relative to its top, for its manifest. Every file of out is read and
// written through dir (outdir.go).
type exportFiles struct {
	out   string
	dir   *outDir
	files map[string]manifestFile
	// prior are the files that the manifest an earlier export into out
	// signed with the same key lists.
	prior map[string]manifestFile
	// judged are the versions this export asked the package policy
	// about, by carried.String (exportFiles.judge).
	judged map[string]bool
}

// newExportFiles starts the record of an export into dir by key.
func newExportFiles(dir *outDir, key *ExportKey) *exportFiles {
	ef := &exportFiles{out: dir.path, dir: dir, files: map[string]manifestFile{}, prior: map[string]manifestFile{}, judged: map[string]bool{}}
	if m, err := readManifestWith(dir.readCapped, dir.path, key.keyring()); err == nil {
		for _, f := range m.Files {
			ef.prior[f.Path] = f
		}
	}
	return ef
}

// withdraw removes the regular files of dir (under out) whose names
// match, and forgets them from the earlier export's manifest: the files
// an earlier export into out wrote of a version the package policy
// refuses now, or cannot judge (carried.go), which this export must
// neither carry nor sign again (an export carries what the mirror
// serves). A dir that does not exist holds nothing to withdraw; one
// reached through a link in out is refused (outDir): what the link leads
// to is not the export's to remove.
func (ef *exportFiles) withdraw(dir string, match func(name string) bool) error {
	entries, err := ef.dir.readDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !match(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := ef.dir.remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		delete(ef.prior, ef.rel(path))
		delete(ef.files, ef.rel(path))
	}
	return nil
}

// withdrawIndex withdraws index.json of the provider of type typ whose
// directory is dir when no archive of any version is left there (it is
// written again from those that are, writeIndexes).
func (ef *exportFiles) withdrawIndex(dir, typ string) error {
	entries, err := ef.dir.readDir(dir)
	if err != nil {
		return nil // nothing left to withdraw
	}
	for _, e := range entries {
		if _, _, err := addrs.ParseArchiveName(typ, e.Name()); err == nil {
			return nil // index.json lists that archive
		}
	}
	return ef.withdraw(dir, func(name string) bool { return name == "index.json" })
}

// rel is path relative to out, with slashes.
func (ef *exportFiles) rel(path string) string {
	rel, err := filepath.Rel(ef.out, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(rel)
}

// readVouched reads the file at path when the earlier export's manifest
// lists it with its bytes, and fails otherwise.
func (ef *exportFiles) readVouched(path string, limit int64) ([]byte, error) {
	f, ok := ef.prior[ef.rel(path)]
	if !ok {
		return nil, fmt.Errorf("%s is not in the manifest of an earlier export by this key", path)
	}
	data, err := ef.dir.readCapped(path, limit)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != f.Size || hex.EncodeToString(sum[:]) != f.SHA256 {
		return nil, fmt.Errorf("%s differs from the manifest of an earlier export by this key", path)
	}
	return data, nil
}

// vouched says the manifest will list the file at path: this export
// wrote or checked it, or the manifest of an earlier export with the
// same key lists it with the bytes it holds (then recorded as checked).
func (ef *exportFiles) vouched(path string) bool {
	rel := ef.rel(path)
	if _, ok := ef.files[rel]; ok {
		return true
	}
	f, ok := ef.prior[rel]
	if !ok {
		return false
	}
	if sha, n, err := ef.dir.sha256Size(path); err != nil || sha != f.SHA256 || n != f.Size {
		return false
	}
	ef.add(path, f.Size, f.SHA256)
	return true
}

// add records the file at path (under out) as having size bytes of sha256 sha.
func (ef *exportFiles) add(path string, size int64, sha string) {
	rel := ef.rel(path)
	ef.files[rel] = manifestFile{Path: rel, Size: size, SHA256: sha}
}

// addData records the file at path as holding data.
func (ef *exportFiles) addData(path string, data []byte) {
	sum := sha256.Sum256(data)
	ef.add(path, int64(len(data)), hex.EncodeToString(sum[:]))
}

// writeFile writes data to path (mode 0644) unless it holds data
// already (see outDir.writeIfChanged), and records it.
func (ef *exportFiles) writeFile(path string, data []byte) (bool, error) {
	wrote, err := ef.dir.writeIfChanged(path, data, 0o644)
	if err == nil {
		ef.addData(path, data)
	}
	return wrote, err
}

// writeJSON writes v as `terraform providers mirror` writes its
// documents (json.MarshalIndent with two spaces, no trailing newline),
// unless path holds those bytes already, and records it. It reports
// whether it wrote.
func (ef *exportFiles) writeJSON(path string, v any) (bool, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return false, err
	}
	return ef.writeFile(path, data)
}

// writeManifest writes the manifest of the export in ef's directory, out,
// and its signature by key: every file recorded in ef, and every other file in
// out that the manifest an earlier export signed with the same key lists
// with the same size and sha256 (an incremental export keeps covering
// what earlier ones wrote). Other files are left out, and returned (paths
// relative to out): an import refuses the versions they belong to.
func writeManifest(key *ExportKey, ef *exportFiles) ([]string, error) {
	prior, out := ef.prior, ef.out
	m := manifest{Format: manifestFormat, Signer: key.Fingerprint(), Files: []manifestFile{}}
	var unlisted []string
	err := ef.dir.walk(func(path string, d fs.DirEntry) error {
		rel := ef.rel(path)
		if d.IsDir() || rel == manifestName || rel == manifestSigName {
			return nil
		}
		if f, ok := ef.files[rel]; ok {
			m.Files = append(m.Files, f)
			return nil
		}
		if f, ok := prior[rel]; ok && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil && info.Size() == f.Size {
				if sha, _, err := ef.dir.sha256Size(path); err == nil && sha == f.SHA256 {
					m.Files = append(m.Files, f)
					return nil
				}
			}
		}
		unlisted = append(unlisted, rel)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(m.Files, func(a, b manifestFile) int { return strings.Compare(a.Path, b.Path) })
	m.Releases = releasesSection(m.Files)
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	sig, err := key.sign(data)
	if err != nil {
		return nil, fmt.Errorf("signing the manifest: %w", err)
	}
	// An earlier export's signature goes first: beside the new manifest
	// it would read, at an import, as a manifest changed after it was
	// signed, and refuse the whole bundle so. An export killed between
	// the two writes leaves a manifest without signature, which an
	// import says to export again.
	if err := ef.dir.remove(filepath.Join(out, manifestSigName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	// Every file the manifest names is on disk, under its name, before
	// the manifest is; the manifest is, before the export says it is
	// done (outDir.syncDirs).
	if err := ef.dir.syncDirs(); err != nil {
		return nil, err
	}
	if _, err := ef.dir.writeIfChanged(filepath.Join(out, manifestName), data, 0o644); err != nil {
		return nil, err
	}
	if err := beforeSignature(); err != nil {
		return nil, err
	}
	if _, err := ef.dir.writeIfChanged(filepath.Join(out, manifestSigName), sig, 0o644); err != nil {
		return nil, err
	}
	if err := ef.dir.syncDirs(); err != nil {
		return nil, err
	}
	return unlisted, nil
}

// beforeSignature is called between the writes of an export's manifest
// and of its signature; a var, for tests (an export killed there).
var beforeSignature = func() error { return nil }

// errNoManifest is readManifest's error for a directory without manifest.
var errNoManifest = errors.New("no manifest")

// manifestError is a manifest that vouches for nothing, and why.
type manifestError struct {
	// Signer is the key ID of the key that signed it, when known.
	Signer string
	Msg    string
}

func (e *manifestError) Error() string { return e.Msg }

// readManifest reads the manifest in dir and checks its signature with
// keyring. Errors: errNoManifest (wrapped) when dir has neither manifest
// nor signature; a *manifestError, whose message names no file, when it
// vouches for nothing; errors reading it.
func readManifest(dir string, keyring openpgp.EntityList) (*manifest, error) {
	return readManifestWith(readCapped, dir, keyring)
}

// readManifestWith is readManifest, reading the manifest and its
// signature with read (an export's through its outDir).
func readManifestWith(read func(path string, limit int64) ([]byte, error), dir string, keyring openpgp.EntityList) (*manifest, error) {
	data, derr := read(filepath.Join(dir, manifestName), maxManifestBytes)
	sig, serr := read(filepath.Join(dir, manifestSigName), maxSignatureBytes)
	switch {
	case errors.Is(derr, os.ErrNotExist) && errors.Is(serr, os.ErrNotExist):
		return nil, fmt.Errorf("%w in %s", errNoManifest, dir)
	case errors.Is(derr, os.ErrNotExist):
		return nil, &manifestError{Msg: "is missing, but its signature " + manifestSigName + " is there"}
	case errors.Is(serr, os.ErrNotExist):
		return nil, &manifestError{Msg: "has no signature " + manifestSigName + " beside it (an export into the directory interrupted before it signed its manifest: export again)"}
	case derr != nil:
		return nil, derr
	case serr != nil:
		return nil, serr
	}
	issuer := signatureIssuer(sig)
	if len(keyring) == 0 {
		return nil, &manifestError{Signer: issuer, Msg: fmt.Sprintf("is signed by key %s, and no export key is trusted (--trusted-export-keys)", orUnknown(issuer))}
	}
	if _, err := checkDetached(keyring, data, sig); err != nil {
		if issuer != "" && hasKeyID(keyring, issuer) {
			return nil, &manifestError{Signer: issuer, Msg: fmt.Sprintf("does not verify with the trusted export key %s: %s", issuer, signatureRefusal(keyring, issuer, err))}
		}
		return nil, &manifestError{Signer: issuer, Msg: fmt.Sprintf("is signed by key %s, which is not among the trusted export keys (--trusted-export-keys)", orUnknown(issuer))}
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, &manifestError{Signer: issuer, Msg: fmt.Sprintf("is signed by the trusted export key %s but does not parse: %v", issuer, err)}
	}
	if m.Format != manifestFormat {
		return nil, &manifestError{Signer: issuer, Msg: fmt.Sprintf("has format %d, this release reads %d", m.Format, manifestFormat)}
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) || strings.Contains(f.Path, `\`) || seen[f.Path] || f.Size < 0 || !sha256hex.Valid(f.SHA256) {
			return nil, &manifestError{Signer: issuer, Msg: fmt.Sprintf("is signed by the trusted export key %s but has a malformed entry %q", issuer, f.Path)}
		}
		seen[f.Path] = true
	}
	if m.Releases != nil && m.Releases.Format == releasesFormat {
		for _, mr := range m.Releases.Versions {
			if !mr.valid() {
				return nil, &manifestError{Signer: issuer, Msg: fmt.Sprintf("is signed by the trusted export key %s but its releases section has a malformed entry %q", issuer, mr.dir())}
			}
		}
	}
	m.Signer = issuer
	return &m, nil
}

func orUnknown(id string) string {
	if id == "" {
		return "(unknown: the signature does not parse)"
	}
	return id
}

// readCapped reads the file at path, failing when it is larger than limit
// or not a regular file (a link, which could lead anywhere, a FIFO, which
// would never end, a device), as inputfile.Open opens it.
func readCapped(path string, limit int64) ([]byte, error) {
	return readOpened(inputfile.Open, path, limit)
}

// opener opens the regular file at path for reading (inputfile.Open, or
// bundle.open for the input's files).
type opener func(path string) (*os.File, fs.FileInfo, error)

// readOpened reads the file at path as open opens it, failing when it is
// larger than limit.
func readOpened(open opener, path string, limit int64) ([]byte, error) {
	f, _, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAllCapped(f, path, limit)
}

// readAllCapped reads f, the file at path, failing when it is larger
// than limit.
func readAllCapped(f *os.File, path string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than the %d bytes allowed", path, limit)
	}
	return data, nil
}

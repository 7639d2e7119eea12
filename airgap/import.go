package airgap

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/discovery"
	pullthrough "github.com/tfmirror/tfmirror/mirror"
)

// ImportSummary counts what Import did, in packages (one version, one
// platform).
type ImportSummary struct {
	// Imported packages were added to the cache, Bytes their size;
	// Present ones were there already.
	Imported int   `json:"imported"`
	Bytes    int64 `json:"bytes"`
	Present  int   `json:"present"`
	// Failed counts the versions (or provider directories) refused, each
	// reported; Ignored the entries of the input that are not imported.
	Failed  int `json:"failed"`
	Ignored int `json:"ignored"`
}

// ImportOptions are how Import reads its input.
type ImportOptions struct {
	// AllowUnsigned also imports packages without the origin's signed
	// evidence, checked against VERSION.json's h1: hashes where present.
	AllowUnsigned bool
	// Shown is the input as the user named it, for messages; default the
	// path Import was given.
	Shown string
	// ScratchDir is where a tar file is unpacked; default os.TempDir().
	ScratchDir string
	// MaxFileBytes bounds each file of a tar file; default 1 GiB.
	MaxFileBytes int64
}

// Import loads the export at in (a directory, or a tar file, compressed
// or not) into engine's cache through engine.Import, which verifies
// every package as if it came from its origin. Each version refused is
// passed to report (one line, naming the file at fault) and counted, and
// the import goes on; the error is for what stops it.
func Import(ctx context.Context, engine *pullthrough.Engine, in string, opts ImportOptions, report func(string)) (ImportSummary, error) {
	var sum ImportSummary
	if opts.Shown == "" {
		opts.Shown = in
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = 1 << 30
	}
	info, err := os.Stat(in)
	if err != nil {
		return sum, err
	}
	dir := in
	if !info.IsDir() {
		tmp, err := os.MkdirTemp(opts.ScratchDir, "import-*")
		if err != nil {
			return sum, err
		}
		defer os.RemoveAll(tmp)
		if err := untar(in, tmp, opts.MaxFileBytes); err != nil {
			return sum, fmt.Errorf("%s: %w", opts.Shown, err)
		}
		dir = tmp
	}
	err = importDir(ctx, engine, dir, opts.Shown, opts.AllowUnsigned, report, &sum)
	return sum, err
}

// untar unpacks the tar file path (gzip-compressed or not) into dir:
// regular files and directories only, every name inside dir, no file
// larger than limit.
func untar(path, dir string, limit int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if !filepath.IsLocal(name) {
			return fmt.Errorf("entry %q is outside the archive's directory", hdr.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if hdr.Size > limit {
				return fmt.Errorf("entry %q is larger than the %d bytes allowed", hdr.Name, limit)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, io.LimitReader(tr, limit))
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q is not a regular file or directory", hdr.Name)
		}
	}
}

// importDir imports every provider version in dir (laid out as export and
// `terraform providers mirror` write it). Names in messages are given
// under shown, the directory or tar file the user named.
func importDir(ctx context.Context, engine *pullthrough.Engine, dir, shown string, allowUnsigned bool, report func(string), sum *ImportSummary) error {
	providerDirs, err := filepath.Glob(filepath.Join(dir, "*", "*", "*"))
	if err != nil {
		return err
	}
	found := false
	for _, pdir := range providerDirs {
		if info, err := os.Stat(pdir); err != nil || !info.IsDir() {
			continue
		}
		rel, _ := filepath.Rel(dir, pdir)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		p, err := ParseProvider(strings.Join(parts, "/"))
		if err != nil {
			sum.Failed++
			report(fmt.Sprintf("%s: %v", filepath.Join(shown, rel), err))
			continue
		}
		versions, ignored, err := scanProviderDir(pdir, p.Type)
		if err != nil {
			sum.Failed++
			report(fmt.Sprintf("%s: %v", filepath.Join(shown, rel), err))
			continue
		}
		sum.Ignored += ignored
		for _, version := range slices.Sorted(maps.Keys(versions)) {
			found = true
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := importVersion(ctx, engine, p, pdir, filepath.Join(shown, rel), version, versions[version], allowUnsigned, sum); err != nil {
				sum.Failed++
				report(fmt.Sprintf("%s %s refused: %v", p, version, err))
			}
		}
	}
	if !found {
		return fmt.Errorf("%s holds no provider packages (HOST/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip)", shown)
	}
	return nil
}

// scanProviderDir returns the packed archives in dir by version (as
// named) and platform, and how many other entries it ignored.
func scanProviderDir(dir, typ string) (map[string]map[string]string, int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	out := map[string]map[string]string{}
	ignored := 0
	for _, e := range entries {
		version, platform, ok := parsePackedName(typ, e.Name())
		switch {
		case ok && e.Type().IsRegular():
			if out[version] == nil {
				out[version] = map[string]string{}
			}
			out[version][platform] = e.Name()
		case e.IsDir():
			ignored++ // unpacked layouts are not imported
		}
	}
	return out, ignored, nil
}

// importVersion imports one version: with its evidence file when there
// is one, else (with allowUnsigned only) without signature, checked
// against VERSION.json's h1: hashes where present.
func importVersion(ctx context.Context, engine *pullthrough.Engine, p discovery.Provider, dir, shown, version string, zips map[string]string, allowUnsigned bool, sum *ImportSummary) error {
	v, err := pullthrough.ParseSemver(version)
	if err != nil {
		return err
	}
	in := pullthrough.Imported{Provider: p, Version: v}
	var paths []string // per package, as shown
	evPath := filepath.Join(dir, evidenceName(p.Type, version))
	ef, docs, err := readEvidence(dir, evPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if !allowUnsigned {
			return fmt.Errorf("%s has no evidence file %s (the origin's signed SHA256SUMS); to accept it without signature, import with --allow-unsigned",
				shown, evidenceName(p.Type, version))
		}
		ef = nil
	case err != nil:
		return err
	case ef.Provider != p.String() || ef.Version != version:
		return fmt.Errorf("%s is of %s %s", filepath.Join(shown, filepath.Base(evPath)), ef.Provider, ef.Version)
	case ef.Unsigned && !allowUnsigned:
		return fmt.Errorf("%s says the version was imported without signature; to accept it so, import with --allow-unsigned", filepath.Join(shown, filepath.Base(evPath)))
	}
	hashes, err := versionHashes(filepath.Join(dir, version+".json"))
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(shown, version+".json"), err)
	}
	for _, pl := range slices.Sorted(maps.Keys(zips)) {
		path := filepath.Join(dir, zips[pl])
		pkg := pullthrough.ImportedPackage{Platform: pl, Filename: zips[pl], H1: hashes[pl], Open: openFile(path), Document: -1}
		if ef != nil {
			epkg, ok := ef.Packages[pl]
			if !ok {
				return fmt.Errorf("%s has no entry for %s", filepath.Join(shown, filepath.Base(evPath)), zips[pl])
			}
			pkg.Filename, pkg.DownloadURL, pkg.Protocols = epkg.Filename, epkg.DownloadURL, epkg.Protocols
			pkg.OS, pkg.Arch, pkg.Shasum, pkg.Document = epkg.OS, epkg.Arch, epkg.Shasum, epkg.Document
			pkg.Packages = epkg.Packages
			for _, proto := range epkg.Protocols {
				if !slices.Contains(in.Protocols, proto) {
					in.Protocols = append(in.Protocols, proto)
				}
			}
		}
		in.Packages = append(in.Packages, pkg)
		paths = append(paths, filepath.Join(shown, zips[pl]))
	}
	if ef != nil && !ef.Unsigned {
		in.Documents = docs
	} else {
		in.Unsigned = true
	}
	res, err := engine.Import(ctx, in)
	var ierr *pullthrough.ImportError
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
	for _, out := range res.Packages {
		if out.Present {
			sum.Present++
		} else {
			sum.Imported++
			sum.Bytes += out.Size
		}
	}
	return nil
}

// openFile returns an ImportedPackage.Open for path.
func openFile(path string) func(context.Context) (io.ReadCloser, int64, error) {
	return func(context.Context) (io.ReadCloser, int64, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, err
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		return f, info.Size(), nil
	}
}

// versionHashes returns the h1: hash of each platform that the
// VERSION.json at path lists, if it exists.
func versionHashes(path string) (map[string]string, error) {
	out := map[string]string{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	var doc mirrorVersion
	if err := json.Unmarshal(data, &doc); err != nil {
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

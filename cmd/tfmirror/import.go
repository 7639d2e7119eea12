package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
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

const importUsage = "tfmirror import [--data-dir DIR] [--allow-unsigned] IN"

// importSummary counts what import did.
type importSummary struct {
	imported, present, failed, ignored int
	bytes                              int64
}

// runImport is `tfmirror import`.
func runImport(args []string, stdout, stderr io.Writer) int {
	var allowUnsigned bool
	cfg, rest, err := parseCacheCommandFlags("import", args, os.LookupEnv, stderr, importUsage, func(fs *flag.FlagSet) {
		fs.BoolVar(&allowUnsigned, "allow-unsigned", false, "also import packages without the origin's signed evidence (a `terraform providers mirror` directory, in-house builds): checked against the h1: hashes of VERSION.json where present and recorded as imported without signature")
	})
	if errors.Is(err, errHelp) {
		return 0
	}
	if err == nil && len(rest) != 1 {
		err = fmt.Errorf("want one IN (a directory, or a tar file), got %d arguments", len(rest))
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror import: %v\nUsage: %s\n", err, importUsage)
		return 2
	}
	logger, err := newLogger("text", cfg.LogLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror import: %v\n", err)
		return 2
	}
	in := rest[0]
	info, err := os.Stat(in)
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror import: %v\n", err)
		return 1
	}
	parts, err := openCacheEngine(cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror import: %v\n", err)
		return 1
	}
	defer closeEngine(parts, stderr)

	dir := in
	if !info.IsDir() {
		// Unpacked into the data directory: it is where the space is.
		tmp, err := os.MkdirTemp(cfg.DataDir, "import-*")
		if err != nil {
			fmt.Fprintf(stderr, "tfmirror import: %v\n", err)
			return 1
		}
		defer os.RemoveAll(tmp)
		if err := untar(in, tmp, cfg.MaxArchiveBytes); err != nil {
			fmt.Fprintf(stderr, "tfmirror import: %s: %v\n", in, err)
			return 1
		}
		dir = tmp
	}
	var sum importSummary
	err = importDir(context.Background(), parts.engine, dir, in, allowUnsigned, stderr, &sum)
	fmt.Fprintf(stdout, "imported %d packages (%d bytes), %d already present, %d failed, %d files ignored\n",
		sum.imported, sum.bytes, sum.present, sum.failed, sum.ignored)
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror import: %v\n", err)
		return 1
	}
	if sum.failed > 0 {
		return 1
	}
	return 0
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
func importDir(ctx context.Context, engine *pullthrough.Engine, dir, shown string, allowUnsigned bool, stderr io.Writer, sum *importSummary) error {
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
		p, err := parseProviderAddress(strings.Join(parts, "/"))
		if err != nil {
			sum.failed++
			fmt.Fprintf(stderr, "tfmirror import: %s: %v\n", filepath.Join(shown, rel), err)
			continue
		}
		versions, ignored, err := scanProviderDir(pdir, p.Type)
		if err != nil {
			sum.failed++
			fmt.Fprintf(stderr, "tfmirror import: %s: %v\n", filepath.Join(shown, rel), err)
			continue
		}
		sum.ignored += ignored
		for _, version := range slices.Sorted(maps.Keys(versions)) {
			found = true
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := importVersion(ctx, engine, p, pdir, filepath.Join(shown, rel), version, versions[version], allowUnsigned, sum); err != nil {
				sum.failed++
				fmt.Fprintf(stderr, "tfmirror import: %s %s refused: %v\n", p, version, err)
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
func importVersion(ctx context.Context, engine *pullthrough.Engine, p discovery.Provider, dir, shown, version string, zips map[string]string, allowUnsigned bool, sum *importSummary) error {
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
			sum.present++
		} else {
			sum.imported++
			sum.bytes += out.Size
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

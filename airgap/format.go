package main

// The directory format export writes and import reads: the layout of
// `terraform providers mirror` (packed zips, index.json, VERSION.json),
// plus evidence files beside the zips under names that neither a static
// network mirror nor a filesystem_mirror looks at (they do not end in
// .zip).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/tfmirror/tfmirror/discovery/registryjson"
	pullthrough "github.com/tfmirror/tfmirror/mirror"
)

// evidenceFormat is the layout of the evidence file this release writes.
const evidenceFormat = 1

// evidenceFile is one version's evidence file,
// terraform-provider-TYPE_VERSION_evidence.json.
type evidenceFile struct {
	Format   int    `json:"format"`
	Provider string `json:"provider"`
	Version  string `json:"version"`
	// Unsigned says the version was imported without signature: it has
	// no documents, and importing it needs --allow-unsigned.
	Unsigned  bool                       `json:"unsigned,omitempty"`
	Documents []evidenceDocument         `json:"documents,omitempty"`
	Packages  map[string]evidencePackage `json:"packages"`
}

// evidenceDocument is one SHA256SUMS document, kept in File with its
// signature in SignatureFile (both beside the evidence file).
type evidenceDocument struct {
	File          string                      `json:"file"`
	SignatureFile string                      `json:"signature_file"`
	URL           string                      `json:"url"`
	SignatureURL  string                      `json:"signature_url"`
	SigningKeys   []registryjson.GPGPublicKey `json:"signing_keys"`
}

// evidencePackage is the origin's package metadata of one platform.
type evidencePackage struct {
	// Filename is the origin's, as SHA256SUMS lists it.
	Filename    string   `json:"filename"`
	DownloadURL string   `json:"download_url,omitempty"`
	Protocols   []string `json:"protocols,omitempty"`
	OS          string   `json:"os,omitempty"`
	Arch        string   `json:"arch,omitempty"`
	Shasum      string   `json:"shasum,omitempty"`
	SHA256      string   `json:"sha256"`
	Document    int      `json:"document"`
}

// packedName is the name `terraform providers mirror` gives an archive.
func packedName(typ, version, platform string) string {
	return "terraform-provider-" + typ + "_" + version + "_" + platform + ".zip"
}

func evidenceName(typ, version string) string {
	return "terraform-provider-" + typ + "_" + version + "_evidence.json"
}

// sumsNames are the file names of a version's document i and its signature.
func sumsNames(typ, version string, i int) (doc, sig string) {
	doc = "terraform-provider-" + typ + "_" + version + "_SHA256SUMS"
	if i > 0 {
		doc += fmt.Sprintf(".%d", i)
	}
	return doc, doc + ".sig"
}

// parsePackedName parses terraform-provider-TYPE_VERSION_OS_ARCH.zip.
func parsePackedName(typ, name string) (version, platform string, ok bool) {
	rest, ok := strings.CutPrefix(name, "terraform-provider-"+typ+"_")
	if !ok {
		return "", "", false
	}
	rest, ok = strings.CutSuffix(rest, ".zip")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '_')
	if i < 0 {
		return "", "", false
	}
	j := strings.LastIndexByte(rest[:i], '_')
	if j <= 0 {
		return "", "", false
	}
	version, platform = rest[:j], rest[j+1:]
	if _, err := pullthrough.ParsePlatform(platform); err != nil {
		return "", "", false
	}
	return version, platform, true
}

// isTarName reports whether path names a tar archive by its suffix.
func isTarName(path string) bool {
	for _, suffix := range []string{".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(path, suffix) {
			return true
		}
	}
	return false
}

// parseCacheCommandFlags parses the flags a subcommand on the data
// directory shares with serve (--data-dir, --log-level, --log-format;
// each also from its TFMIRROR_ variable) besides its own, added by own,
// and returns the serve configuration with serve's defaults for the rest.
func parseCacheCommandFlags(name string, args []string, lookupEnv func(string) (string, bool), out io.Writer, usage string, own func(*flag.FlagSet)) (serveConfig, []string, error) {
	fs := flag.NewFlagSet("tfmirror "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	dataDir := fs.String("data-dir", "./tfmirror-data", "directory of the cache (as for serve)")
	logLevel := fs.String("log-level", "warn", "log level: debug, info, warn or error")
	own(fs)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return serveConfig{}, nil, errHelp
		}
		return serveConfig{}, nil, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var serveArgs []string
	for _, f := range []struct{ name, value string }{{"data-dir", *dataDir}, {"log-level", *logLevel}} {
		if given[f.name] {
			serveArgs = append(serveArgs, "--"+f.name, f.value)
		}
	}
	cfg, err := parseServeFlags(serveArgs, lookupEnv, io.Discard)
	if err != nil {
		return serveConfig{}, nil, err
	}
	if !given["log-level"] {
		if _, ok := lookupEnv(envName("log-level")); !ok {
			cfg.LogLevel = *logLevel
		}
	}
	return cfg, fs.Args(), nil
}

// openCacheEngine opens the engine on cfg's data directory for a
// subcommand: sealed (it never contacts an origin). A data directory that
// a running serve holds fails with a message naming the lock.
func openCacheEngine(cfg serveConfig, logger *slog.Logger) (*engineParts, error) {
	cfg.Offline = true
	parts, err := openEngine(cfg, logger, overrides{}, nil)
	if err != nil && strings.Contains(err.Error(), "Cannot acquire directory lock") {
		return nil, fmt.Errorf("the data directory %s is in use by a running tfmirror (its cache lock %s is held): stop it, or run this on a data directory no server uses",
			cfg.DataDir, filepath.Join(cfg.DataDir, "cache", "LOCK"))
	}
	return parts, err
}

// closeEngine shuts the engine down and closes the cache.
func closeEngine(parts *engineParts, stderr io.Writer) {
	if err := parts.shutdown(context.Background()); err != nil {
		fmt.Fprintf(stderr, "tfmirror: %v\n", err)
	}
}

// writeJSONFile writes v as `terraform providers mirror` writes its
// documents (json.MarshalIndent with two spaces, no trailing newline),
// unless path holds those bytes already. It reports whether it wrote.
func writeJSONFile(path string, v any) (bool, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return false, err
	}
	return writeFileIfChanged(path, data)
}

// writeFileIfChanged writes data to path through a temporary file, unless
// path holds data already. It reports whether it wrote.
func writeFileIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return false, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp.Name(), path)
}

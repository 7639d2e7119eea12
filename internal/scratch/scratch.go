// Package scratch names the temporary files and directories that
// tfmirror's work keeps in the data directory while it runs (module
// fetches and checks, local modules packed for import, bundles unpacked
// by an import), and removes what a killed process left of them. Every
// such name starts with one of the prefixes here, so that what is
// created and what is cleaned up cannot drift apart.
package scratch

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// The prefixes of scratch names.
const (
	// Module: a module's unpacked tree, its spooled package, a package
	// being checked (discovery/modsource, mirror).
	Module = "tfmirror-module-"
	// LocalModule: a local module packed for import (airgap).
	LocalModule = "tfmirror-local-module-"
	// Import: a bundle's tar unpacked by an import, followed by the
	// importing process's id and "-" (airgap).
	Import = ".tfmirror-import-"
)

// Pattern is the os.MkdirTemp or os.CreateTemp pattern of a scratch name
// with prefix, what (a word for the reader of the directory, may be
// empty) and suffix.
func Pattern(prefix, what, suffix string) string {
	if what != "" {
		what += "-"
	}
	return prefix + what + "*" + suffix
}

// Remove removes the entries of dir whose names start with prefix, but
// those keep (when set) reports true for, and logs each with msg. A dir
// that does not exist holds nothing to remove.
func Remove(dir, prefix string, keep func(fs.DirEntry) bool, logger *slog.Logger, msg string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || keep != nil && keep(e) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, err)
			continue
		}
		logger.Info(msg, "path", path)
	}
	return errors.Join(errs...)
}

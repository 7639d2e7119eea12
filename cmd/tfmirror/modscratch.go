package main

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// moduleScratchPrefixes name what module work leaves in the data
// directory while it runs (mirror.Config.ScratchDir, airgap's local
// modules): unpacked trees and spooled packages, gone when the work
// ends, left behind only by a process that was killed.
var moduleScratchPrefixes = []string{"tfmirror-module-", "tfmirror-local-module-"}

// removeModuleScratch removes what module work of a process that died
// left in dir. It is called once the cache in dir is this process's (the
// cache is opened by one process at a time), so nothing else is using
// them.
func removeModuleScratch(dir string, logger *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !hasAnyPrefix(e.Name(), moduleScratchPrefixes) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, err)
			continue
		}
		logger.Info("removed what interrupted module work left behind", "path", path)
	}
	return errors.Join(errs...)
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

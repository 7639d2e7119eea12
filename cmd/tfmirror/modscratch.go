package main

import (
	"errors"
	"log/slog"

	"github.com/tfmirror/tfmirror/v2/internal/scratch"
)

// removeModuleScratch removes what module work of a process that died
// left in dir (mirror.Config.ScratchDir, airgap's local modules):
// unpacked trees and spooled packages, gone when the work ends, left
// behind only by a process that was killed. It is called once the cache
// in dir is this process's (the cache is opened by one process at a
// time), so nothing else is using them.
func removeModuleScratch(dir string, logger *slog.Logger) error {
	const msg = "removed what interrupted module work left behind"
	return errors.Join(
		scratch.Remove(dir, scratch.Module, nil, logger, msg),
		scratch.Remove(dir, scratch.LocalModule, nil, logger, msg))
}

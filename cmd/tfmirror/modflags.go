package main

import (
	"errors"
	"time"

	"github.com/tfmirror/tfmirror/discovery/modsource"
)

// moduleConfig holds the flags that bound registry module packages.
type moduleConfig struct {
	ModuleMaxBytes     int64
	ModuleMaxTreeBytes int64
	ModuleMaxFiles     int
	ModuleTimeout      time.Duration
	// ModuleSourceCredentials is the --module-source-credentials file
	// (modcreds.go), "" for none: sources are fetched anonymously.
	ModuleSourceCredentials string
}

func (c moduleConfig) validate() error {
	if c.ModuleMaxBytes <= 0 || c.ModuleMaxTreeBytes <= 0 || c.ModuleMaxFiles <= 0 || c.ModuleTimeout <= 0 {
		return errors.New("--module-max-bytes, --module-max-tree-bytes, --module-max-files and --module-timeout must be positive")
	}
	return nil
}

// limits are the engine's module limits.
func (c moduleConfig) limits() modsource.Limits {
	return modsource.Limits{MaxDownloadBytes: c.ModuleMaxBytes, MaxTreeBytes: c.ModuleMaxTreeBytes, MaxEntries: c.ModuleMaxFiles}
}

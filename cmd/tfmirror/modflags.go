package main

import (
	"errors"
	"flag"
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

// addModuleFlags registers the module flags on fs; the returned function
// stores the converted values into c once fs is parsed.
func addModuleFlags(fs *flag.FlagSet, c *moduleConfig) (finish func()) {
	maxBytes := byteSizeFlag(256 << 20)
	fs.Var(&maxBytes, "module-max-bytes", "largest registry module package the mirror downloads from its source host: an archive, or a Git repository's pack (submodules included)")
	maxTree := byteSizeFlag(512 << 20)
	fs.Var(&maxTree, "module-max-tree-bytes", "largest total size of a registry module package's files once unpacked (catches archive and Git bombs)")
	fs.IntVar(&c.ModuleMaxFiles, "module-max-files", 20000, "most files, directories and links a registry module package may have")
	fs.DurationVar(&c.ModuleTimeout, "module-timeout", 10*time.Minute, "time limit for fetching one registry module package from its source host (clone or download, and normalization)")
	fs.StringVar(&c.ModuleSourceCredentials, "module-source-credentials", "", "HCL (or .json) file of source_host \"HOST\" { origins = [...], token_env = \"VAR\" } blocks: credentials for module source hosts (Git, archives), used only for modules of the origins each names; default: sources are fetched anonymously")
	return func() {
		c.ModuleMaxBytes = int64(maxBytes)
		c.ModuleMaxTreeBytes = int64(maxTree)
	}
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

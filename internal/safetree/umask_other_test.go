//go:build !unix

package safetree

import "io/fs"

// umask: no mask where the system has none.
func umask() fs.FileMode { return 0 }

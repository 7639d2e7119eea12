//go:build windows || plan9 || js || wasip1 || aix

package airgap

import "os"

// exportLocks: there are no advisory locks here; what an export leaves
// is taken for a killed one's by its age alone (staleTempAge), and
// exports of two processes into one OUT are not told apart.
const exportLocks = false

// lockExport takes no lock here.
func lockExport(*os.File) error { return nil }

//go:build windows || plan9 || js || wasip1 || aix

package airgap

import "os"

// tarLocks: there are no advisory locks here; what an export into a
// tar file leaves is taken for a killed one's by its age alone
// (staleTempAge).
const tarLocks = false

// lockTarTemp takes no lock here.
func lockTarTemp(*os.File) error { return nil }

//go:build !linux && !darwin && !freebsd

package inputfile

import (
	"os"
	"runtime"
)

// modeBits: a file's permission bits say who may write it, except on
// Windows, whose files have none (Go shows a file others may not write as
// writable by all).
const modeBits = runtime.GOOS != "windows"

// readOnlyMount: the mount's flags are read on Linux, macOS and FreeBSD;
// elsewhere a file others may write or own is refused wherever it is.
func readOnlyMount(*os.File) bool { return false }

//go:build !linux && !darwin && !freebsd

package settings

// readOnlyMount: the mount's flags are read on Linux, macOS and FreeBSD;
// elsewhere a file others may write is refused wherever it is.
func readOnlyMount(string) bool { return false }

// Package dirsync makes a directory's entries durable: once Sync returns,
// a file created, renamed or linked in the directory before it is there
// under its name after a power loss.
package dirsync

import "os"

// Sync syncs the directory dir itself (its entries, not its files'
// contents, which each writer syncs).
func Sync(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

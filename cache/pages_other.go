//go:build !linux

package cache

// pageOutTables does nothing here: the kernel decides alone which pages
// of the table files stay resident.
func pageOutTables(string) {}

//go:build !linux

package disk

// PageOutTables does nothing here: the kernel decides alone which pages
// of the table files stay resident.
func PageOutTables(string) {}

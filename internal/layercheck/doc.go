// Package layercheck holds the tests that hold the module's structure to
// its tables: layers.txt, the layers every package belongs to, checked
// against the imports `go list` reports (TestLayers); and the size limits,
// lines per production package and methods per production type, with the
// exceptions sizes.txt lists (TestSizes, whose report `go test -v -run
// TestSizes` prints). It has no code of its own and nothing imports it.
package layercheck

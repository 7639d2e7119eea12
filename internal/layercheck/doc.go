// Package layercheck holds the tests that hold the module's structure to
// its tables: layers.txt, the layers every package belongs to, checked
// against the imports `go list` reports (TestLayers); and the size marks,
// lines per production package, method sets per production type (go/types,
// embedding included) and the engine with every type holding it, each figure
// over its mark explained by a row of ARCHITECTURE.md's "Size review notes"
// (TestSizes, whose report `go test -v -run TestSizes` prints); every Go
// file laid out as gofmt lays it out (TestFormatted); and OpenPGP keys and
// signatures read through package verify only, which bounds their cost
// (TestOpenPGPReadThroughVerify). It has no code
// of its own and nothing imports it.
package layercheck

// Package doccheck holds the tests that hold the project's documents to
// its code: every relative link of the Markdown documents resolves, every
// test SECURITY.md names as the proof of a promise exists, and every
// function and type ARCHITECTURE.md names is declared where it says. It has no
// code of its own and nothing imports it.
package doccheck

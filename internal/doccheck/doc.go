// Package doccheck holds the tests that hold the project's documents to
// its code: every relative link of the Markdown documents resolves, and
// every test SECURITY.md names as the proof of a promise exists. It has no
// code of its own and nothing imports it.
package doccheck

// Package doccheck holds the tests that hold the project's documents to its code; it has no code of its own.
package doccheck

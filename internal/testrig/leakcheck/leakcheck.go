// Package leakcheck fails a package's tests when a goroutine one of them
// started outlives them: every goroutine has an owner that ends it, and
// waits for it. Tests only: the shipped binary links none of it.
package leakcheck

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// settle is how long goroutines that are ending as the tests end (a
// connection's reader seeing its server gone) are given before one that
// is still there counts as outliving them: long enough for a loaded
// machine, short beside a suite.
const settle = 10 * time.Second

// Main runs the package's tests (TestMain's m.Run) and exits with their
// status; when they passed, with 1 if a goroutine outlives them, whose
// stacks it prints. Call it from TestMain, after any setup.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := Find(); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Find returns an error naming the goroutines still running, beside the
// test framework's own, once they have been given settle to end.
func Find() error {
	deadline := time.Now().Add(settle)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

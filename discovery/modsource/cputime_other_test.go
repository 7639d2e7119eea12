//go:build !unix

package modsource

import (
	"testing"
	"time"
)

var started = time.Now()

// cpuTime is, where the process's CPU time is not read (it is on unix
// systems), the time since the tests started: a bound on the difference
// of two readings then bounds the wall time of the work between them.
func cpuTime(*testing.T) time.Duration { return time.Since(started) }

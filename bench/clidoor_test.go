//go:build linux

package main

import (
	"math"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestCPUSeconds: the CPU time read from /proc/PID/stat is the time the
// kernel's getrusage reports for this process, within a few clock ticks.
func TestCPUSeconds(t *testing.T) {
	rusage := func() float64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	before, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ru0 := rusage()
	// Compute until the kernel counts 0.3 s of CPU (however busy the
	// machine, within 60 s).
	x := 0
	for deadline := time.Now().Add(time.Minute); rusage()-ru0 < 0.3 && time.Now().Before(deadline); {
		x++
	}
	after, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ru := rusage() - ru0
	if got := after - before; ru < 0.3 || math.Abs(got-ru) > 0.1 {
		t.Fatalf("/proc counted %.2f CPU seconds, getrusage %.2f (%d)", got, ru, x)
	}
	if _, err := cpuSeconds(-1); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}

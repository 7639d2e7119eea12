package main

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// TestCPUSeconds: the CPU time read from /proc grows by about the time
// this process spends computing.
func TestCPUSeconds(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		x++
	}
	after, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < 0.05 || d > 5 {
		t.Fatalf("300 ms of computing counted as %.2f CPU seconds (%d)", d, x)
	}
	if _, err := cpuSeconds(-1); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}

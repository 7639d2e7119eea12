package main

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// restoreMemoryLimit puts the runtime's memory limit back as it was when
// the test ends, so that no other test runs under the one set here.
func restoreMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
}

// A mirror in a container with a memory limit keeps its Go heap within
// 90% of it, and says so; without a limit, or with GOMEMLIMIT set by the
// operator, the runtime's own setting stays.
func TestHeapKeptWithinTheCgroupsLimit(t *testing.T) {
	const cgroupLimit = 64 << 30 // large: other tests' collections are not hurried meanwhile
	t.Run("limit", func(t *testing.T) {
		restoreMemoryLimit(t)
		unsetenv(t, "GOMEMLIMIT")
		unsetenv(t, "AUTOMEMLIMIT")
		var logs bytes.Buffer
		got := keepHeapWithinCgroup(slog.New(slog.NewTextHandler(&logs, nil)), memlimit.Limit(cgroupLimit))
		limit, ratio := float64(cgroupLimit), memoryLimitRatio
		want := int64(limit * ratio)
		if got != want || debug.SetMemoryLimit(-1) != want {
			t.Fatalf("limit set %d, runtime's %d; want %d (90%% of the cgroup's %d)", got, debug.SetMemoryLimit(-1), want, cgroupLimit)
		}
		if !strings.Contains(logs.String(), "gomemlimit_bytes=") {
			t.Errorf("the limit set is not logged:\n%s", logs.String())
		}
	})
	t.Run("no limit", func(t *testing.T) {
		restoreMemoryLimit(t)
		unsetenv(t, "GOMEMLIMIT")
		unsetenv(t, "AUTOMEMLIMIT")
		debug.SetMemoryLimit(math.MaxInt64)
		var logs bytes.Buffer
		noLimit := func() (uint64, error) { return 0, memlimit.ErrNoLimit }
		if got := keepHeapWithinCgroup(slog.New(slog.NewTextHandler(&logs, nil)), noLimit); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
			t.Fatalf("without a cgroup limit: set %d, runtime's %d", got, debug.SetMemoryLimit(-1))
		}
		if logs.Len() != 0 {
			t.Errorf("without a cgroup limit, logged:\n%s", logs.String())
		}
	})
	t.Run("operator's GOMEMLIMIT", func(t *testing.T) {
		restoreMemoryLimit(t)
		t.Setenv("GOMEMLIMIT", "48GiB")
		debug.SetMemoryLimit(48 << 30) // as the runtime read it at start
		keepHeapWithinCgroup(slog.New(slog.DiscardHandler), memlimit.Limit(cgroupLimit))
		if got := debug.SetMemoryLimit(-1); got != 48<<30 {
			t.Fatalf("GOMEMLIMIT=48GiB in the environment: runtime's limit %d after, want it kept", got)
		}
	})
	t.Run("off", func(t *testing.T) {
		restoreMemoryLimit(t)
		unsetenv(t, "GOMEMLIMIT")
		t.Setenv("AUTOMEMLIMIT", "off")
		debug.SetMemoryLimit(math.MaxInt64)
		keepHeapWithinCgroup(slog.New(slog.DiscardHandler), memlimit.Limit(cgroupLimit))
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Fatalf("AUTOMEMLIMIT=off: runtime's limit %d, want none", got)
		}
	})
}

// unsetenv removes key from the environment for the test (t.Setenv puts
// back what was there).
func unsetenv(t *testing.T, key string) {
	t.Setenv(key, "")
	os.Unsetenv(key)
}

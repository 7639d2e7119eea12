package main

import (
	"errors"
	"log/slog"
	"math"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryLimitRatio is the share of the cgroup's memory limit the Go heap
// is kept within: the rest is for what the runtime's limit does not count
// (the kernel's page cache of Badger's files, which it reclaims) and for
// the heap's overshoot while a collection runs.
const memoryLimitRatio = 0.9

// keepHeapWithinCgroup has the Go runtime keep the heap within the memory
// limit of the process's cgroup (a container's resources.limits.memory,
// a systemd unit's MemoryMax), as GOMEMLIMIT does: the runtime does not
// read that limit, and without one of its own it lets the heap grow to
// twice what is live before it collects, so that a mirror near its limit
// under load is killed for memory where collecting sooner would have
// kept it serving. GOMEMLIMIT in the environment is the operator's and
// is kept; AUTOMEMLIMIT=off leaves the runtime's default, and
// AUTOMEMLIMIT=0.8 takes another share. limits is where the limit is
// read (memlimit.FromCgroup; tests hand their own). It reports the
// limit set, or 0 when none was.
func keepHeapWithinCgroup(log *slog.Logger, limits memlimit.Provider) int64 {
	n, err := memlimit.Set(memlimit.WithRatio(memoryLimitRatio), memlimit.WithProvider(limits))
	switch {
	case errors.Is(err, memlimit.ErrNoCgroup), errors.Is(err, memlimit.ErrCgroupsNotSupported):
		return 0
	case err != nil:
		log.Warn("the Go heap's limit could not be set from the cgroup's memory limit (AUTOMEMLIMIT, or the cgroup's files); it has none of its own: set GOMEMLIMIT",
			"error", err)
		return 0
	case n <= 0 || n == math.MaxInt64:
		return 0
	}
	log.Info("the Go heap is kept within the memory limit", "gomemlimit_bytes", n)
	return n
}

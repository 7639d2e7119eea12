package gate_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// TestPolicySwappedDuringAFilterEndsItsList: a new policy put in force
// (a reload) while a version list is being filtered by the one before
// ends what that filter keeps: the next listing is filtered by the new
// policy and leaves out the version it denies, as every listing after
// the reload must. The new policy is put in force from the clock the
// filter reads, after it took the policy in force and before it judged
// the list by it.
func TestPolicySwappedDuringAFilterEndsItsList(t *testing.T) {
	t.Parallel()
	deny := func(version string) *policy.Policy {
		return enginetest.DecodePolicy(t, fmt.Sprintf(`
deny_version "%s/%s/%s" {
  versions = "= %s"
  reason   = "withdrawn"
}`, harness.OriginHost, harness.NS, harness.Type, version))
	}
	before, after := deny("9.9.9"), deny("1.0.1")

	var swap atomic.Pointer[func()] // run once, from the filter's reading of the clock
	now := func() time.Time {
		if f := swap.Load(); f != nil && calledFrom("mirror/gate.(*Gate).FilterProviders") && swap.CompareAndSwap(f, nil) {
			(*f)()
		}
		return time.Now()
	}
	h := harness.New(t, harness.Options{Config: harness.Config{Now: now}})
	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0", "1.0.1", "1.1.0"}, []string{"linux_amd64"})
	h.Engine.SetPolicy(before)
	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0", "1.0.1", "1.1.0"}) {
		t.Fatalf("listed %v under the first policy, want every version", got)
	}

	// A listing under way as the reload puts the new policy in force.
	reload := func() { h.Engine.SetPolicy(after) }
	swap.Store(&reload)
	if _, _, err := h.Engine.Versions(context.Background(), h.Provider()); err != nil {
		t.Fatal(err)
	}
	if swap.Load() != nil {
		t.Fatal("the filter did not read the clock: the new policy was not put in force during it")
	}

	list, _, err := h.Engine.Versions(context.Background(), h.Provider())
	if err != nil {
		t.Fatal(err)
	}
	if got := list.Names(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Errorf("listed %v after the new policy was put in force, want 1.0.1, which it denies, left out", got)
	}
	if len(list.Held) != 1 || !strings.Contains(list.Held[0], "1.0.1") {
		t.Errorf("held notes %q, want the one of 1.0.1", list.Held)
	}
}

// calledFrom reports whether the function whose name ends in fn is on
// the caller's stack.
func calledFrom(fn string) bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

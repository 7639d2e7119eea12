package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/heldpoint"
)

// heldMissStore holds (heldpoint) the first read of one key after Arm
// that finds nothing, having said so on Reached, until GoOn: a caller
// held between finding a record missing and asking the origin for it.
type heldMissStore struct {
	harness.Store
	key string

	heldpoint.Point
}

func (s *heldMissStore) GetMeta(key string, v any) (time.Time, error) {
	at, err := s.Store.GetMeta(key, v)
	if key != s.key || !errors.Is(err, cache.ErrNotFound) {
		return at, err
	}
	s.Pass()
	return at, err
}

// A caller that found a version's signature time unknown, and asks the
// origin for it once another caller's lookup of it has ended, takes the
// time that lookup learned: the origin is not asked again (the lookup
// looks at the times learned before it asks). 1.0.0 is taken to be as
// old as 1.1.0 by the first listing, and is judged by its own signature
// when its archive is asked for.
func TestSignatureTimeLearnedJustBeforeIsNotLookedUpAgain(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now().Truncate(time.Second))
	held := &heldMissStore{}
	h := harness.New(t, harness.Options{Config: harness.Config{Now: clock.Now},
		Wrap: func(s harness.Store) harness.Store { held.Store = s; return held }})
	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0", "1.1.0"}, []string{"linux_amd64"})
	h.Origin.SetSignedAt(harness.NS, harness.Type, "1.0.0", clock.Now().Add(-400*day))
	h.Origin.SetSignedAt(harness.NS, harness.Type, "1.1.0", clock.Now().Add(-365*day))
	held.key = "release/signed/" + h.Provider().String() + "/1.0.0"
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	if got := h.Listed(); len(got) != 2 {
		t.Fatalf("listed %v", got)
	}
	h.Origin.ResetHits()

	held.Arm()
	late := make(chan error, 1)
	go func() { late <- h.Read(context.Background(), "1.0.0", "linux_amd64").Err }()
	<-held.Reached() // the held caller found 1.0.0's signature time unknown
	if err := h.Read(context.Background(), "1.0.0", "linux_amd64").Err; err != nil {
		t.Fatalf("archive of 1.0.0, signed 400 days ago: %v", err)
	}
	held.GoOn()
	if err := <-late; err != nil {
		t.Fatalf("the held caller: archive of 1.0.0: %v", err)
	}
	// The gate learns its signature time (one SHA256SUMS signature), and
	// the fetch verifies the package with its own.
	if n := h.Origin.Hits(fakeorigin.Signature); n != 2 {
		t.Errorf("serving 1.0.0 to two callers fetched %d signatures, want 2 (the gate's, the fetch's)", n)
	}
}

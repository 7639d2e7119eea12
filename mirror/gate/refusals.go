package gate

import (
	"sync"
	"time"

	"github.com/tfmirror/tfmirror/v2/policy"
)

// ListMemo is the last answer of a list of what the policy holds back
// (Gate.Refusals, mirror/served.Releases.Held), which the status page
// asks for on every view. The policy refuses an address, or a version
// deny_version names, before any origin is asked whether it exists, so a
// client can fill what such a list is made of with names it made up, and
// refuse one more before each view: judging, sorting and copying
// thousands of entries took tens of milliseconds a view.
//
// An answer is given again while the policy in force is the same (a
// policy is never changed once made; SetPolicy puts another in force),
// the clock has not gone back nor reached the first AvailableAt it names
// (of a policy's rules only the minimum release age reads the clock, and
// only to let a version through then), it is younger than the memo's
// MaxAge (when set), and either nothing was added since (its generation
// is the same) or it was made of FloorEntries entries or more and is
// younger than Floor: then what was added since shows within Floor.
// Below FloorEntries (what a mirror's real refusals come to) every
// answer is exact. The memo's mutex is held while an answer is made, so
// that concurrent callers wait for one and share it. Answers are shared
// and must not be modified.
type ListMemo[T any] struct {
	Floor        time.Duration
	FloorEntries int
	MaxAge       time.Duration // zero: none
	// AvailableAt is when the policy lets an entry through (zero: not by
	// the clock).
	AvailableAt func(T) time.Time

	mu      sync.Mutex
	made    bool
	pol     *policy.Policy
	gen     uint64    // the generation of the entries it was made of
	entries int       // how many
	at      time.Time // the clock then
	until   time.Time // the first AvailableAt it names (zero: none)
	madeAt  time.Time // the real time it was made
	out     []T
}

// Get returns the answer for the policy in force, the clock and the
// generation of the entries now (current, asked once the memo is the
// caller's): the last one while it holds, else build's, which judges at
// now under pol the entries of generation built (at least gen).
func (m *ListMemo[T]) Get(current func() (pol *policy.Policy, now time.Time, gen uint64), build func(pol *policy.Policy, now time.Time) (out []T, entries int, built uint64)) []T {
	m.mu.Lock()
	defer m.mu.Unlock()
	pol, now, gen := current()
	if m.holds(pol, gen, now) {
		return m.out
	}
	out, entries, built := build(pol, now)
	var until time.Time
	for _, e := range out {
		if at := m.AvailableAt(e); !at.IsZero() && (until.IsZero() || at.Before(until)) {
			until = at
		}
	}
	m.made, m.pol, m.gen, m.entries, m.at, m.until, m.madeAt, m.out = true, pol, built, entries, now, until, time.Now(), out
	return out
}

func (m *ListMemo[T]) holds(pol *policy.Policy, gen uint64, now time.Time) bool {
	switch {
	case !m.made || m.pol != pol || now.Before(m.at) || !m.until.IsZero() && !now.Before(m.until),
		m.MaxAge > 0 && time.Since(m.madeAt) >= m.MaxAge:
		return false
	case m.gen == gen:
		return true
	}
	return m.entries >= m.FloorEntries && time.Since(m.madeAt) < m.Floor
}

// Gate.Refusals' answers: exact below a thousand refusals, and within a
// second of the refusals made since above.
const (
	refusalsFloor        = time.Second
	refusalsFloorEntries = 1024
)

// newRefusalsMemo is the memo of Gate.Refusals.
func newRefusalsMemo() *ListMemo[Refusal] {
	return &ListMemo[Refusal]{Floor: refusalsFloor, FloorEntries: refusalsFloorEntries,
		AvailableAt: func(r Refusal) time.Time { return r.AvailableAt }}
}

// refusalsNow is Refusals through its memo.
func (g *Gate) refusalsNow() []Refusal {
	return g.refusals.Get(func() (*policy.Policy, time.Time, uint64) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.Current(), g.now(), g.seenGen
	}, func(pol *policy.Policy, now time.Time) ([]Refusal, int, uint64) {
		g.mu.Lock()
		var seen []heldEntry
		if g.seen != nil {
			seen = g.seen.Values()
		}
		built := g.seenGen
		g.mu.Unlock()
		return g.judgeRefusals(pol, now, seen), len(seen), built
	})
}

package gate

import (
	"sync"
	"time"

	"github.com/tfmirror/tfmirror/v2/policy"
)

// refusalsFloor is how long Refusals gives its last answer again, at
// least, once that answer was made of refusalsFloorEntries or more
// entries, whatever was refused since. The policy refuses an address,
// or a version deny_version names, before any origin is asked whether it
// exists, so a client can fill the memory of refusals (maxHeldSeen) with
// names it made up, and refuse one more before each view of the status
// page, which asks for them all: judging, sorting and copying thousands
// of entries took tens of milliseconds a view. Below that many entries
// (what a mirror's real refusals come to) every answer is exact.
const (
	refusalsFloor        = time.Second
	refusalsFloorEntries = 1024
)

// refusalsMemo is Refusals' last answer. It is given again while the
// policy in force and the gate's clock say what they said, and either
// nothing was refused since or the answer is big and younger than
// refusalsFloor. Its mutex is held while an answer is made, so that
// concurrent callers wait for one and share it.
type refusalsMemo struct {
	mu sync.Mutex
	refusalsAnswer
}

// refusalsAnswer is one answer of Refusals and what it was made of.
type refusalsAnswer struct {
	made    bool
	pol     *policy.Policy
	gen     uint64    // the generation of the entries it was made of
	entries int       // how many
	at      time.Time // the gate's clock then
	until   time.Time // the first AvailableAt it names (zero: none): the clock lets the version through then
	madeAt  time.Time // the real time it was made, for refusalsFloor
	out     []Refusal
}

// holds reports whether the memo is the answer for pol at now, with the
// entries of generation gen.
func (m *refusalsAnswer) holds(pol *policy.Policy, gen uint64, now time.Time) bool {
	switch {
	case !m.made || m.pol != pol || now.Before(m.at) || !m.until.IsZero() && !now.Before(m.until):
		// A policy is never changed once made (SetPolicy puts another in
		// force); of its rules only the minimum release age reads the
		// clock, and only to let a version through at its AvailableAt.
		return false
	case m.gen == gen:
		return true
	}
	return m.entries >= refusalsFloorEntries && time.Since(m.madeAt) < refusalsFloor
}

// get returns g's refusals: the memo while it holds, else a new answer.
func (m *refusalsMemo) get(g *Gate) []Refusal {
	m.mu.Lock()
	defer m.mu.Unlock()
	pol := g.Current()
	now := g.now()
	g.mu.Lock()
	gen := g.seenGen
	if m.holds(pol, gen, now) {
		g.mu.Unlock()
		return m.out
	}
	seen := make([]heldEntry, 0, len(g.seen))
	for _, h := range g.seen {
		seen = append(seen, h)
	}
	g.mu.Unlock()
	out := g.judgeRefusals(pol, now, seen)
	var until time.Time
	for _, r := range out {
		if !r.AvailableAt.IsZero() && (until.IsZero() || r.AvailableAt.Before(until)) {
			until = r.AvailableAt
		}
	}
	m.refusalsAnswer = refusalsAnswer{made: true, pol: pol, gen: gen, entries: len(seen), at: now, until: until, madeAt: time.Now(), out: out}
	return out
}

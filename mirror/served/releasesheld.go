package served

// The CLI versions the package policy holds back, for the status page:
// noted where this layer refuses one or leaves one out of a list, and
// judged again by the policy in force each time they are shown, so that a
// version allowed since (its minimum release age passed, a rule lifted)
// is no longer shown.

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// maxHeldNoted bounds the CLI versions noted; past it the notes start
// again (as mirror/gate's memory of refusals does). deny_version refuses a
// version before any origin is asked whether it exists, so most of a full
// memory may be versions a client made up: kept, they would keep every
// version held back later off the status page until a restart.
const maxHeldNoted = 1024

// HeldCLIKind is the unsigned.Version Kind of a CLI version held back.
const HeldCLIKind = "cli"

type heldKey struct {
	pub              releases.Publisher
	product, version string // version "" for a product refused whole
}

// heldNotes are the CLI versions noted as held back, each with the rule
// that held it, safe for concurrent use and bounded (maxHeldNoted): those
// noted since it was last full are kept.
type heldNotes struct {
	mu   sync.Mutex
	keys map[heldKey]string // the rule
	gen  uint64             // advanced by every note
}

// note notes a version (or, with version "", a product) the policy held
// back by rule, and reports whether it is new: not noted before, or noted
// by another rule.
func (h *heldNotes) note(pub releases.Publisher, product, version, rule string) (fresh bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys == nil {
		h.keys = map[heldKey]string{}
	}
	k := heldKey{pub, product, version}
	was, ok := h.keys[k]
	if !ok && len(h.keys) >= maxHeldNoted {
		clear(h.keys)
	}
	h.keys[k] = rule
	// Noted again, the version may have been dated since (its
	// SHA256SUMS fetched): Held judges it again.
	h.gen++
	return !ok || was != rule
}

// list is the versions noted, by address and version (newest first),
// and the generation they are of.
func (h *heldNotes) list() ([]heldKey, uint64) {
	h.mu.Lock()
	keys := make([]heldKey, 0, len(h.keys))
	for k := range h.keys {
		keys = append(keys, k)
	}
	gen := h.gen
	h.mu.Unlock()
	slices.SortFunc(keys, func(a, b heldKey) int {
		if c := strings.Compare(releases.Address(a.pub, a.product), releases.Address(b.pub, b.product)); c != 0 {
			return c
		}
		return releases.CompareVersions(b.version, a.version)
	})
	return keys, gen
}

// generation is the generation of the versions noted.
func (h *heldNotes) generation() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
}

// Held are the CLI versions (and products) the package policy in force
// holds back, among those this layer refused or left out of a list since
// the mirror started, by address and version (newest first), each with
// its rule, reason and, for the minimum release age, when it becomes
// available. A version's release time is judged as Sums judges it: its
// cached signature's creation time and the listing rule; the origin is
// not asked. Kind is HeldCLIKind.
//
// The answer is shared and must not be modified. It is given again while
// it holds (heldMemo): the status page asks for it on every view, and a
// client can fill the notes with versions it made up that deny_version
// refuses, each judged with two reads of the cache.
func (r *Releases) Held() []unsigned.Version {
	pol := r.pol.Policy()
	if pol == nil {
		return nil
	}
	return r.heldMemo.Get(func() (*policy.Policy, time.Time, uint64) {
		return pol, r.now(), r.held.generation()
	}, func(pol *policy.Policy, now time.Time) ([]unsigned.Version, int, uint64) {
		keys, gen := r.held.list()
		return r.judgeHeld(pol, now, keys), len(keys), gen
	})
}

// judgeHeld is Held made anew at now.
func (r *Releases) judgeHeld(pol *policy.Policy, now time.Time, keys []heldKey) []unsigned.Version {
	var out []unsigned.Version
	for _, k := range keys {
		addr := releases.Address(k.pub, k.product)
		var v policy.Verdict
		if k.version == "" {
			v = pol.Address(policy.Provider, addr)
		} else {
			v = pol.Version(policy.Provider, addr, k.version, r.rel.StoredRelease(k.pub, k.product, k.version), now)
		}
		if v.Allowed {
			continue
		}
		out = append(out, unsigned.Version{Provider: addr, Version: k.version, Platforms: []string{}, Kind: HeldCLIKind,
			Rule: v.Rule, Reason: v.Reason, AvailableAt: v.AvailableAt})
	}
	return out
}

// Held gives its last answer again while the policy in force and the
// clock say what they said, for heldMemoFor at most (the cache may have
// learnt a version's release time since), and either nothing was noted
// since or the answer was made of heldMemoFloorEntries notes or more: then
// what was noted since shows within heldMemoFor.
const (
	heldMemoFor          = time.Second
	heldMemoFloorEntries = 256
)

// newHeldMemo is the memo of Held (gate.ListMemo).
func newHeldMemo() *gate.ListMemo[unsigned.Version] {
	return &gate.ListMemo[unsigned.Version]{Floor: heldMemoFor, FloorEntries: heldMemoFloorEntries, MaxAge: heldMemoFor,
		AvailableAt: func(v unsigned.Version) time.Time { return v.AvailableAt }}
}

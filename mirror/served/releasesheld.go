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
	return !ok || was != rule
}

// list is the versions noted, by address and version (newest first).
func (h *heldNotes) list() []heldKey {
	h.mu.Lock()
	keys := make([]heldKey, 0, len(h.keys))
	for k := range h.keys {
		keys = append(keys, k)
	}
	h.mu.Unlock()
	slices.SortFunc(keys, func(a, b heldKey) int {
		if c := strings.Compare(releases.Address(a.pub, a.product), releases.Address(b.pub, b.product)); c != 0 {
			return c
		}
		return releases.CompareVersions(b.version, a.version)
	})
	return keys
}

// Held are the CLI versions (and products) the package policy in force
// holds back, among those this layer refused or left out of a list since
// the mirror started, by address and version (newest first), each with
// its rule, reason and, for the minimum release age, when it becomes
// available. A version's release time is judged as Sums judges it: its
// cached signature's creation time and the listing rule; the origin is
// not asked. Kind is HeldCLIKind.
func (r *Releases) Held() []unsigned.Version {
	pol := r.pol.Policy()
	if pol == nil {
		return nil
	}
	now := r.now()
	var out []unsigned.Version
	for _, k := range r.held.list() {
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

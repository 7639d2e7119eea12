package mirror

// The package policy on the engine's answers: package mirror/gate, on
// the components below it, handed the version lists that date versions
// (package mirror/providerlists).

import (
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// SetPolicy makes p the package policy of every answer from now on (nil:
// everything allowed). Answers kept for reuse end.
func (s *Engine) SetPolicy(p *policy.Policy) { s.gate.SetPolicy(p) }

// CheckAddress is gate.Gate.CheckAddress: the first check of every way
// in (package mirror/served), asking nothing of the origin.
func (s *Engine) CheckAddress(kind policy.Kind, address string) error {
	return s.gate.CheckAddress(kind, address)
}

// Policy is the package policy in force (nil: everything allowed), for
// the sides beside the engine that judge by it (package releases).
func (s *Engine) Policy() *policy.Policy { return s.gate.Current() }

// Withheld returns the versions the engine keeps, or would fetch, but
// does not serve: imported without signature (by an earlier release)
// under an allowed origin host that Config.UnsignedHosts does not name
// (mirror/unsigned); then those the package policy in effect holds back,
// among those it refused or left out of a list since the engine started
// (each judged again now, so a version allowed since is not listed).
// Each part sorted by address and version.
func (s *Engine) Withheld() []unsigned.Version {
	out := s.withholding.List()
	for _, h := range s.gate.Refusals() {
		kind := ""
		if h.Kind == policy.Module {
			kind = string(h.Kind)
		}
		out = append(out, unsigned.Version{Provider: h.Address, Version: h.Version, Platforms: []string{}, Kind: kind,
			Rule: h.Rule, Reason: h.Reason, AvailableAt: h.AvailableAt})
	}
	return out
}

// gated returns st ending at until when that comes first (a held version
// becomes available then).
func gated(st Stamp, until time.Time) Stamp {
	if st.kind == stampNone || until.IsZero() {
		return st
	}
	if st.until.IsZero() || until.Before(st.until) {
		st.until = until
	}
	return st
}

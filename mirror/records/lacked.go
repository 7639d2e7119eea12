package records

import "github.com/tfmirror/tfmirror/v2/addrs"

// MaxLacked bounds the versions a version list keeps as lacked
// (VersionList.Lacked, ModuleVersionList.Lacked): beyond it, the ones
// lacked longest are let go (a replica with no listing of its own then
// dates one listed again as new: held, never passed sooner).
const MaxLacked = 4096

// Lacking returns the versions of before (what the listing before next
// named: its versions, then the ones it lacked, as Named gives them) that
// next lacks, each once, in before's order, at most MaxLacked: the Lacked
// of a listing next.
//
// A listing that lacks versions the one before it named (an origin's
// short or empty answer, a version pulled) keeps them so, not served, for
// the release dating alone (mirror/gate): a replica that takes this
// listing from the shared tier as the one before its own, with no listing
// of its own, takes them as named before, as it would have had it listed
// before the short answer, not as versions published since. Versions are
// compared by their canonical form (module versions are spelt as their
// origin does: "v1.1.0" is "1.1.0"); a string that is no version is left
// out.
func Lacking(before, next []string) []string {
	canon := func(raw string) (string, bool) {
		v, err := addrs.ParseModuleVersion(raw)
		return v.String(), err == nil
	}
	inNext := make(map[string]bool, len(next))
	for _, raw := range next {
		if v, ok := canon(raw); ok {
			inNext[v] = true
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, raw := range before {
		v, ok := canon(raw)
		if !ok || inNext[v] || seen[v] {
			continue
		}
		if len(out) == MaxLacked {
			break
		}
		seen[v] = true
		out = append(out, raw)
	}
	return out
}

package hclfile

import (
	"regexp"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Suggest is the name of names nearest to name, for a "did you mean":
// one at most a third of name's length of edits away, or half of it when
// they begin alike (policies for policy); "" when none is.
func Suggest(name string, names []string) string {
	best, bestDist := "", len(name)+1
	for _, n := range names {
		d := editDistance(name, n)
		limit := len(name) / 3
		if commonPrefix(name, n) >= 4 {
			limit = len(name) / 2
		}
		if d <= max(limit, 1) && d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// quoted finds the name HCL's diagnostics quote.
var quoted = regexp.MustCompile(`"([^"]+)"`)

// UnknownName is the name of an argument or block that d refuses for
// not being expected where it is (HCL native syntax's "Unsupported
// argument" and "Unsupported block type", JSON's "Extraneous JSON object
// property"), and whether HCL already suggested one; "" when d says
// something else.
func UnknownName(d *hcl.Diagnostic) (name string, suggested bool) {
	switch d.Summary {
	case "Unsupported argument", "Unsupported block type", "Extraneous JSON object property":
	default:
		return "", false
	}
	m := quoted.FindStringSubmatch(d.Detail)
	if m == nil {
		return "", false
	}
	return m[1], strings.Contains(d.Detail, "Did you mean")
}

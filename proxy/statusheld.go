package proxy

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
)

// HeldSummary is the status page's line on what the package policy holds
// back: how many versions (and addresses refused whole), and when the
// next age-gated one becomes available.
type HeldSummary struct {
	Versions  int `json:"versions"`
	Addresses int `json:"addresses,omitempty"`
	// NextAvailableAt is when the first version held by its minimum
	// release age becomes available; absent when none is.
	NextAvailableAt time.Time `json:"next_available_at,omitzero"`
	// Text is the line as the page shows it: "held back: 3 versions,
	// next released in 41 h".
	Text string `json:"text"`
	// Omitted is how many of them under the view's prefix it leaves out
	// of its list, past its limit.
	Omitted int `json:"omitted,omitempty"`
}

// boundHeld is the part of held a view lists: those whose address
// starts with q.Prefix, q.Limit at most, and how many more of those it
// leaves out. The policy refuses an address before any origin is asked,
// whether or not it exists, so the versions held back that the engine
// remembers may be thousands of names a client made up: a view lists a
// page of them.
func boundHeld(held []unsigned.Version, q statusQuery) (shown []unsigned.Version, omitted int) {
	for _, h := range held {
		switch {
		case !strings.HasPrefix(h.Provider, q.Prefix):
		case len(shown) < q.Limit:
			shown = append(shown, h)
		default:
			omitted++
		}
	}
	return shown, omitted
}

// splitWithheld parts the engine's withheld versions into the unsigned
// imports kept out of their host's lane and those the package policy
// holds back (they name their rule), and sums the latter up as of now;
// the summary is nil when the policy holds nothing back.
func splitWithheld(all []unsigned.Version, now time.Time) (unsigned, held []unsigned.Version, sum *HeldSummary) {
	for _, w := range all {
		if w.Rule == "" {
			unsigned = append(unsigned, w)
			continue
		}
		held = append(held, w)
		if sum == nil {
			sum = &HeldSummary{}
		}
		if w.Version == "" {
			sum.Addresses++
		} else {
			sum.Versions++
		}
		if !w.AvailableAt.IsZero() && (sum.NextAvailableAt.IsZero() || w.AvailableAt.Before(sum.NextAvailableAt)) {
			sum.NextAvailableAt = w.AvailableAt
		}
	}
	if sum != nil {
		sum.Text = sum.text(now)
	}
	return unsigned, held, sum
}

func (s *HeldSummary) text(now time.Time) string {
	t := "held back: " + plural(s.Versions, "version")
	if s.Addresses > 0 {
		t += ", " + plural(s.Addresses, "address") + " refused whole"
	}
	if !s.NextAvailableAt.IsZero() {
		t += ", next released in " + untilText(s.NextAvailableAt.Sub(now))
	}
	return t
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if noun == "address" {
		return fmt.Sprintf("%d addresses", n)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// untilText is a wait as the status page words it: whole hours from an
// hour up ("41 h"), whole minutes below, each rounded up so that the
// version is not yet out when the time said has passed.
func untilText(d time.Duration) string {
	switch {
	case d <= 0:
		return "less than a minute"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(math.Ceil(d.Minutes())))
	default:
		return fmt.Sprintf("%d h", int(math.Ceil(d.Hours())))
	}
}

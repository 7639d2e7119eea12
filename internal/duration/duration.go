// Package duration parses the durations of the project's settings and
// policy: Go's durations ("90s", "10m", "72h", "1h30m") and whole days
// ("3d"), the one syntax every duration a user writes accepts. It owns
// the syntax only; what range a duration may take is its reader's.
package duration

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxDays bounds a number of days: time.Duration holds about 106,751.
const MaxDays = 100000

// Want is what a duration looks like, for messages.
const Want = `a duration such as "90s", "10m" or "72h", or whole days such as "3d"`

// Parse parses s, a Go duration or a whole number of days ("3d"). Its
// error says what a duration looks like, not s: its caller names the
// value, and where it was written.
func Parse(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseUint(n, 10, 32)
		if err != nil || days > MaxDays {
			return 0, fmt.Errorf("want %s (at most %dd)", Want, MaxDays)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want %s", Want)
	}
	return d, nil
}

// Days formats d as whole days when it is a positive number of them
// ("30d"), else as Go does ("36h0m0s").
func Days(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

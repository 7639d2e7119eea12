package safetree

import (
	"errors"
	"testing"
)

// TestCheckLinksWhereWindowsDropsTrailingDotsAndSpaces: Windows drops the
// dots and spaces that end a name (as the package's .git check knows:
// ".git." is .git there), so a client unpacking a package on Windows
// writes d/x./l through the link d/x, as a client on macOS writes d/X/l
// through it. A link that stays inside the tree here and leads out of it
// there is refused, as the case-folded view refuses d/X/l.
func TestCheckLinksWhereWindowsDropsTrailingDotsAndSpaces(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links map[string]string
	}{
		{"a name under a link, spelled with a trailing dot", map[string]string{"d/x": "..", "d/x./l": "../.."}},
		{"a name under a link, spelled with a trailing space", map[string]string{"d/x": "..", "d/x /l": "../.."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckLinks(tc.links); !errors.Is(err, ErrUnsafe) {
				t.Errorf("CheckLinks(%v) = %v, want ErrUnsafe: on Windows the link leads out of the tree", tc.links, err)
			}
		})
	}
}

package records

import (
	"fmt"
	"slices"
	"testing"
)

// A listing keeps the versions the one before it named and it lacks,
// those that one lacked too while they stay away, each once whichever
// way the origin spells it, and lets go of one named again; an empty
// answer of the origin for a provider of more versions than MaxLacked
// keeps MaxLacked of them: those the listing before named first, then
// the ones lacked longer.
func TestLacking(t *testing.T) {
	first := []string{"1.0.0", "v1.1.0", "1.2.0"}
	short := Lacking(first, []string{"1.0.0"})
	if want := []string{"v1.1.0", "1.2.0"}; !slices.Equal(short, want) {
		t.Fatalf("lacked by the short listing: %v, want %v", short, want)
	}
	before := append([]string{"1.0.0"}, short...)
	if got, want := Lacking(before, []string{"1.0.0", "1.1.0"}), []string{"1.2.0"}; !slices.Equal(got, want) {
		t.Errorf("lacked once 1.1.0 is listed again: %v, want %v", got, want)
	}
	if got, want := Lacking(before, []string{"1.0.0"}), []string{"v1.1.0", "1.2.0"}; !slices.Equal(got, want) {
		t.Errorf("lacked by a second short listing: %v, want %v", got, want)
	}
	if got := Lacking(before, append(slices.Clone(before), "not-a-version")); got != nil {
		t.Errorf("lacked by a listing that names them all: %v", got)
	}

	var many []string
	for i := range MaxLacked + 10 {
		many = append(many, fmt.Sprintf("1.%d.0", i))
	}
	got := Lacking(many, []string{})
	if len(got) != MaxLacked || got[0] != "1.0.0" {
		t.Errorf("an empty listing after %d versions keeps %d (from %s), want %d", len(many), len(got), got[0], MaxLacked)
	}
	if got := Lacking(append([]string{"9.9.9", "9.9.9"}, many...), nil); len(got) != MaxLacked || got[0] != "9.9.9" || got[1] != "1.0.0" {
		t.Errorf("kept %d, starting %v; want %d, the listing before's own first, each once", len(got), got[:2], MaxLacked)
	}
}

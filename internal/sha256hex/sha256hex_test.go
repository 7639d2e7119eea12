package sha256hex

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	good := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"sha256 of nothing", good, true},
		{"all digits", strings.Repeat("0", 64), true},
		{"empty", "", false},
		{"one short", good[:63], false},
		{"one long", good + "0", false},
		{"uppercase", strings.ToUpper(good), false},
		{"one uppercase digit", "E" + good[1:], false},
		{"not hex", "g" + good[1:], false},
		{"space", " " + good[1:], false},
		{"multi-byte rune in 64 bytes", "é" + good[2:], false},
		{"sha1", "da39a3ee5e6b4b0d3255bfef95601890afd80709", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Valid(tc.in); got != tc.want {
				t.Errorf("Valid(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

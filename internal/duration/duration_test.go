package duration

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"1d", 24 * time.Hour},
		{"3d", 72 * time.Hour},
		{"0d", 0},
		{"90s", 90 * time.Second},
		{"10m", 10 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"100000d", 100000 * 24 * time.Hour},
	} {
		if got, err := Parse(tc.in); err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "d", "-1d", "1.5d", "100001d", "1d12h", "soon", "10"} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), Want) {
			t.Errorf("Parse(%q): %v, want an error saying %s", in, err, Want)
		}
	}
	if Days(72*time.Hour) != "3d" || Days(36*time.Hour) != "36h0m0s" || Days(0) != "0s" {
		t.Errorf("Days: %s %s %s", Days(72*time.Hour), Days(36*time.Hour), Days(0))
	}
}

package mirror

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestInvalidListingLoggedOnce: what an origin's version list holds that
// is no version, or no platform, is logged in one line per listing,
// naming a few of them, however many there are: a hostile or broken
// origin's list of a million such strings made a million warnings at
// each refresh.
func TestInvalidListingLoggedOnce(t *testing.T) {
	t.Parallel()
	logs := &logRecorder{t: t}
	h := newHarness(t, harnessOptions{cfg: Config{Logger: logs.logger()}})
	var badVersions, badPlatforms []string
	for i := range 500 {
		badVersions = append(badVersions, "not-a-version-"+strconv.Itoa(i))
		badPlatforms = append(badPlatforms, "Linux_AMD64_"+strconv.Itoa(i))
	}
	h.origin.AddProvider(ns, typ, badVersions, platforms)
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, append(badPlatforms, platforms...))
	list, _, err := h.engine.Versions(context.Background(), h.provider())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Versions) != 1 || len(list.Versions[0].Platforms) != len(platforms) {
		t.Fatalf("listed %+v, want 1.0.0 alone with its %d valid platforms", list.Versions, len(platforms))
	}
	lines := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "skipped") || strings.Contains(line, "left out") {
			lines++
		}
	}
	if lines == 0 || lines > 1 {
		t.Errorf("%d log lines of what the list holds that is no version or platform, want 1", lines)
	}
}

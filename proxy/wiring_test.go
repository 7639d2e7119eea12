package proxy

import (
	"strings"
	"testing"
)

// A front door wired wrongly stops at start and says what is missing:
// without the engine, or with a health source that has no cache to read,
// /readyz and the status page's health block would say nothing.
func TestNewRefusesWrongWiring(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	for _, tc := range []struct {
		name   string
		cfg    Config
		engine Engine
		want   string
	}{
		{"no engine", Config{}, nil, "an engine is required"},
		{"a health source without its cache", Config{Health: &HealthSource{}}, packagesOf(t, h.engine), "HealthSource.Store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, tc.engine)
			if err == nil {
				t.Fatal("New took it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want it to say %q", err, tc.want)
			}
		})
	}
	if _, err := New(Config{Health: &HealthSource{Store: h.store}}, packagesOf(t, h.engine)); err != nil {
		t.Errorf("New of a front door wired right: %v", err)
	}
}

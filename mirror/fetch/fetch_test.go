package fetch

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// New refuses a fetcher without what every download needs, rather than
// giving one that fails on its first archive.
func TestNewRefusesMissingParts(t *testing.T) {
	cfg := Config{ArchiveTimeout: time.Minute, MaxArchiveBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	if _, err := New(cfg, Parts{}, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("New without parts: %v, want an error", err)
	}
}

package settings

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFileHugeNumberRefusedAtOnce: a whole number far beyond what any
// setting takes (a typo, 1e30000000 for 1e3, or a file written to stall
// the mirror) is refused with its line as soon as the file is read. It
// was turned into all its decimal digits first (big.Float.Int, then
// big.Int.String: a number of 30 million digits, a minute of CPU and
// hundreds of MiB), which held the start, every reload (they run one at
// a time) and config check.
func TestFileHugeNumberRefusedAtOnce(t *testing.T) {
	for _, tc := range []struct{ name, file, content string }{
		{"int", "c.hcl", "\nnot_found_max_entries = 1e30000000\n"},
		{"size", "c.hcl", "\ncache_max_bytes = 1e30000000\n"},
		{"negative size", "c.hcl", "\ncache_max_bytes = -1e30000000\n"},
		{"negative int", "c.hcl", "\nnot_found_max_entries = -1e30000000\n"},
		{"json", "c.json", "{\n\"cache_max_bytes\": 1e30000000}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.file, tc.content)
			done := make(chan error, 1)
			go func() {
				_, err := load(t, []string{"--config", path}, nil)
				done <- err
			}()
			select {
			case err := <-done:
				var fe *FileError
				if !errors.As(err, &fe) {
					t.Fatalf("accepted, or not as a file error: %v", err)
				}
				if !strings.Contains(err.Error(), tc.file+":2") {
					t.Errorf("error does not name %s:2: %v", tc.file, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: still reading the file after 5s", strings.TrimSpace(tc.content))
			}
		})
	}
}

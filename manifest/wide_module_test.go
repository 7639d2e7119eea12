package manifest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// TestModuleFilesParsedOneAtATime: a module's .tf files, each within
// hclfile's bounds, are parsed one at a time, what each holds let go
// before the next: eight files of half a million tokens took eight times
// the memory of one, and a module may hold twenty thousand files.
func TestModuleFilesParsedOneAtATime(t *testing.T) {
	dir := t.TempDir()
	body := "locals {\n  a = [" + strings.Repeat("1,", 250000) + "1]\n}\n"
	var files []string
	for i := range 8 {
		f := filepath.Join(dir, fmt.Sprintf("f%d.tf", i))
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	one := peakHeap(t, func() {
		if _, _, err := parseConfig(context.Background(), nil, dir, files[:1], addrs.DefaultProviderHost, &remoteCalls{}); err != nil {
			t.Fatal(err)
		}
	})
	all := peakHeap(t, func() {
		if _, _, err := parseConfig(context.Background(), nil, dir, files, addrs.DefaultProviderHost, &remoteCalls{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("peak heap: one file %d MiB, eight files %d MiB", one>>20, all>>20)
	if all > 3*one {
		t.Errorf("eight files took %d MiB at their peak, one file %d MiB", all>>20, one>>20)
	}
}

// peakHeap is the most heap in use, sampled, while f runs.
func peakHeap(t *testing.T, f func()) uint64 {
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan uint64)
	go func() {
		var peak uint64
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-ctx.Done():
				done <- peak
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	cancel()
	return <-done
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// Below the disk reserve the cache stops writing, and the serve says so
// once (one WARN line, /readyz, the metrics): the requests served
// meanwhile, each of which fails to store its version list, package
// record and archive, log those failures at debug level, not an ERROR
// line each, while tfmirror_cache_write_errors_total counts them. The
// archives are still served whole.
func TestBelowReserveLogsOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	platforms := []string{"linux_amd64", "darwin_arm64", "windows_amd64"}
	origin.AddProvider("hashicorp", "random", []string{"1.0.0"}, platforms)
	m := startProcess(t, bin, filepath.Join(t.TempDir(), "data"), origin, originCAFile(t, origin), "--disk-reserve", "1000TiB")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, pl := range platforms {
		body, _, err := m.get(ctx, providerArchivePath(origin, "hashicorp", "random", "1.0.0", pl))
		if err != nil || !bytes.Equal(body, origin.Archive("hashicorp", "random", "1.0.0", pl)) {
			t.Fatalf("%s below the reserve: %v, %d bytes; want it served whole", pl, err, len(body))
		}
	}
	if n := metricValue(t, m, "tfmirror_cache_write_errors_total"); n < 3 {
		t.Errorf("tfmirror_cache_write_errors_total = %v, want the failed writes counted (at least one archive each)", n)
	}
	warned := 0
	for _, line := range m.snapshot() {
		msg := fmt.Sprint(line["msg"])
		switch {
		case line["level"] == "ERROR":
			t.Errorf("an ERROR line below the reserve: %v", line)
		case msg == "cache not writable: free disk space below the reserve; archives are served but not cached until there is room":
			warned++
			if _, ok := line["error"]; ok {
				t.Errorf("the WARN line has an error attribute though the free space was read: %v", line)
			}
		}
	}
	if warned != 1 {
		t.Errorf("said %d times that the cache is not writable, want once", warned)
	}
}

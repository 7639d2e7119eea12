//go:build load

package main

// A bounded load test of the real binary; not part of the default run:
//
//	go test -tags load -run TestLoad -v ./cmd/tfmirror
//
// Flags (after -args): -load.clients, -load.requests (per client),
// -load.duration (upper bound).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

var (
	loadClients  = flag.Int("load.clients", 300, "concurrent clients")
	loadRequests = flag.Int("load.requests", 40, "requests per client")
	loadDuration = flag.Duration("load.duration", 2*time.Minute, "stop issuing requests after this long")
)

type loadTarget struct {
	kind string // index, version, archive
	path string
	sha  string // archives only
}

func TestLoad(t *testing.T) {
	const (
		providers   = 8
		archiveSize = 1 << 20
	)
	versionsList := []string{"1.0.0", "1.1.0", "2.0.0"}
	platformList := []string{"linux_amd64", "darwin_arm64", "windows_amd64"}
	bin := buildBinary(t)
	origin, err := fakeorigin.Start(fakeorigin.Options{ArchiveSize: archiveSize})
	if err != nil {
		t.Fatal(err)
	}
	defer origin.Close()
	origin.SetLatency(20 * time.Millisecond) // an origin across the internet
	var warm, cold []loadTarget
	for i := range providers {
		typ := fmt.Sprintf("p%d", i)
		origin.AddProvider("loadtest", typ, versionsList, platformList)
		var targets []loadTarget
		base := fmt.Sprintf("/%s/loadtest/%s/", origin.Addr, typ)
		targets = append(targets, loadTarget{kind: "index", path: base + "index.json"})
		for _, v := range versionsList {
			targets = append(targets, loadTarget{kind: "version", path: base + v + ".json"})
			for _, pl := range platformList {
				targets = append(targets, loadTarget{kind: "archive",
					path: providerArchivePath(origin, "loadtest", typ, v, pl),
					sha:  origin.SHA256("loadtest", typ, v, pl)})
			}
		}
		if i < providers/2 {
			warm = append(warm, targets...)
		} else {
			cold = append(cold, targets...)
		}
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	m := startProcess(t, bin, dataDir, origin, originCAFile(t, origin))

	// Warm half of the providers.
	ctx := context.Background()
	for _, tg := range warm {
		if _, _, err := m.get(ctx, tg.path); err != nil {
			t.Fatalf("warming %s: %v", tg.path, err)
		}
	}
	waitCached(t, m, countArchives(warm))

	type sample struct {
		kind string
		cold bool
		d    time.Duration
		err  error
	}
	deadline := time.Now().Add(*loadDuration)
	samples := make(chan sample, *loadClients**loadRequests)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range *loadClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 42))
			for range *loadRequests {
				if time.Now().After(deadline) {
					return
				}
				isCold := r.IntN(4) == 0 // a quarter of requests go to providers not yet cached
				pool := warm
				if isCold {
					pool = cold
				}
				tg := pool[r.IntN(len(pool))]
				t0 := time.Now()
				body, _, err := m.get(ctx, tg.path)
				if err == nil && tg.sha != "" {
					sum := sha256.Sum256(body)
					if hex.EncodeToString(sum[:]) != tg.sha {
						err = fmt.Errorf("%s: wrong bytes (%d)", tg.path, len(body))
					}
				}
				samples <- sample{kind: tg.kind, cold: isCold, d: time.Since(t0), err: err}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(samples)

	hwm, rss := procMemory(t, m.cmd.Process.Pid)
	byKind := map[string][]time.Duration{}
	var all []time.Duration
	errs := 0
	for s := range samples {
		if s.err != nil {
			errs++
			if errs <= 10 {
				t.Errorf("request error: %v", s.err)
			}
			continue
		}
		k := s.kind
		if s.cold {
			k += " (cold providers)"
		} else {
			k += " (warm providers)"
		}
		byKind[k] = append(byKind[k], s.d)
		all = append(all, s.d)
	}
	report := &strings.Builder{}
	fmt.Fprintf(report, "clients %d, requests %d in %s (%.0f req/s), errors %d\n",
		*loadClients, len(all)+errs, elapsed.Round(time.Millisecond), float64(len(all)+errs)/elapsed.Seconds(), errs)
	fmt.Fprintf(report, "%-28s %7s %9s %9s %9s\n", "kind", "n", "p50", "p99", "max")
	kinds := slices.Sorted(func(yield func(string) bool) {
		for k := range byKind {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range append(kinds, "all") {
		d := all
		if k != "all" {
			d = byKind[k]
		}
		slices.Sort(d)
		fmt.Fprintf(report, "%-28s %7d %9s %9s %9s\n", k, len(d), pct(d, 50), pct(d, 99), pct(d, 100))
	}
	fmt.Fprintf(report, "mirror peak RSS (VmHWM) %s, RSS now %s; origin archive fetches %d for %d archives\n",
		hwm, rss, origin.Hits(fakeorigin.Archive), countArchives(warm)+countArchives(cold))
	fmt.Fprint(os.Stdout, report.String())
	t.Log("\n" + report.String())
	if errs > 0 {
		t.Fatalf("%d requests failed", errs)
	}
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := m.wait(time.Minute); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func countArchives(ts []loadTarget) int {
	n := 0
	for _, tg := range ts {
		if tg.kind == "archive" {
			n++
		}
	}
	return n
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	i = min(max(i-1, 0), len(sorted)-1)
	return sorted[i].Round(100 * time.Microsecond)
}

// procMemory reads the peak and current resident set size of pid.
func procMemory(t *testing.T, pid int) (hwm, rss string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Logf("reading memory use: %v", err)
		return "?", "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "VmHWM":
			hwm = strings.TrimSpace(v)
		case "VmRSS":
			rss = strings.TrimSpace(v)
		}
	}
	return hwm, rss
}

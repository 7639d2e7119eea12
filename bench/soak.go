package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
)

// Figure 10: a soak. -soak-clients clients download archives of a working
// set twice -soak-limit-mib for -soak-duration through a tfmirror limited
// to -soak-limit-mib, while the origin flips every 15 s between normal,
// down (every request 503), 500 and slow (50 ms a response, 2 MB/s an
// archive). Counted: the answers by status, the 5xx the mirror made on
// its own (500, or 502 to 504 while the origin was normal); sampled
// every 5 s: the data directory against 1.25 times the limit plus the
// reserve; at start and end: anonymous memory, goroutines, open files.
func (e *env) soak(ctx context.Context) error {
	limit := int64(e.cfg.SoakLimitMiB) << 20
	run, err := e.startChurn(ctx, "soak", "soak", limit, "--origin-retries", "0")
	if err != nil {
		return err
	}
	defer run.close()
	origin, m, vs, dataDir := run.origin, run.m, run.vs, run.dataDir
	c := newClient(e.pool, e.cfg.SoakClients)
	defer closeIdle(c)
	// Warm up: every version's metadata and archive once (twice the
	// limit: the cache is full and evicting, its value-log files and
	// Badger's memtables and caches in use), so that what the soak
	// leaves is compared with a mirror in service, not with one that
	// never stored an archive.
	progress("figure 10: warming up: every version once")
	for _, v := range vs {
		if _, err := get(ctx, c, m.url+origin.Addr+"/bench/soak/"+v+".json"); err != nil {
			return err
		}
		if _, _, err := download(ctx, c, m.url+zipPath(origin.Addr, "bench", "soak", v), false); err != nil {
			return err
		}
	}
	if err := sleep(ctx, 10*time.Second); err != nil { // as before the end is read
		return err
	}
	startMem, _ := memStatus(m.pid())
	startGo, _ := goroutines(ctx, c, m.url)
	startFDs := openFiles(m.pid())

	var mu sync.Mutex
	mode := "normal"
	codes := map[string]int{}
	own := 0
	ctx, cancel := context.WithTimeout(ctx, e.cfg.SoakDuration)
	defer cancel()
	progress("figure 10: %d clients for %s over %d archives of %d MiB, limit %d MiB, the origin flipping every 15 s",
		e.cfg.SoakClients, e.cfg.SoakDuration, len(vs), churnArchiveMiB, e.cfg.SoakLimitMiB)
	var wg sync.WaitGroup
	// The origin's modes.
	wg.Go(func() {
		modes := []string{"normal", "down", "500", "slow"}
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				origin.SetDown(0)
				origin.SetLatency(0)
				origin.SetArchiveRate(0)
				return
			case <-time.After(15 * time.Second):
			}
			next := modes[i%len(modes)]
			mu.Lock()
			mode = next
			mu.Unlock()
			origin.SetDown(0)
			origin.SetLatency(0)
			origin.SetArchiveRate(0)
			switch next {
			case "down":
				origin.SetDown(http.StatusServiceUnavailable)
			case "500":
				origin.SetDown(http.StatusInternalServerError)
			case "slow":
				origin.SetLatency(50 * time.Millisecond)
				origin.SetArchiveRate(2_000_000)
			}
		}
	})
	// The data directory.
	var maxDisk, maxAnon int64
	var overBound int
	bound := limit + limit/4 + cache.DefaultDiskReserve
	wg.Go(func() {
		for {
			d := dirBytes(filepath.Join(dataDir, "cache"))
			ms, _ := memStatus(m.pid())
			mu.Lock()
			maxDisk = max(maxDisk, d)
			maxAnon = max(maxAnon, ms.anon)
			if d > bound {
				overBound++
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
		}
	})
	for i := range e.cfg.SoakClients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for ctx.Err() == nil {
				v := vs[r.IntN(len(vs))]
				mu.Lock()
				was := mode
				mu.Unlock()
				for _, path := range []string{origin.Addr + "/bench/soak/" + v + ".json", zipPath(origin.Addr, "bench", "soak", v)} {
					status, err := fetchStatus(ctx, c, m.url+path)
					if ctx.Err() != nil {
						return
					}
					mu.Lock()
					key := strconv.Itoa(status)
					switch {
					case err != nil && status == 200:
						key = "200 truncated"
						own++
					case err != nil:
						key = "error"
					}
					codes[key]++
					if status == 500 || status >= 502 && status <= 504 && was == "normal" && mode == "normal" {
						own++
					}
					mu.Unlock()
					if status != 200 {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	// Let downloads and evictions in flight end before the end is read.
	if err := sleep(context.Background(), 10*time.Second); err != nil {
		return err
	}
	endMem, _ := memStatus(m.pid())
	endGo, _ := goroutines(context.Background(), c, m.url)
	endFDs := openFiles(m.pid())
	var cs []string
	for k, v := range codes {
		cs = append(cs, fmt.Sprintf("%s: %d", k, v))
	}
	progress("  answers %v; the mirror's own 5xx: %d; data directory at most %s (bound %s, over it in %d samples); anon %s -> %s (peak %s), goroutines %d -> %d, open files %d -> %d",
		cs, own, mib(maxDisk), mib(bound), overBound, mib(startMem.anon), mib(endMem.anon), mib(maxAnon), startGo, endGo, startFDs, endFDs)
	e.report.add(row{
		fig: "10", name: fmt.Sprintf("Soak: %d clients for %s over twice the %d MiB limit, origin normal/down/500/slow every 15 s", e.cfg.SoakClients, e.cfg.SoakDuration, e.cfg.SoakLimitMiB),
		mirror: fmt.Sprintf("answers %s; 5xx of the mirror's own making: %d; data directory at most %s (over the bound in %d of its 5 s samples); RssAnon %s at start (after a warm-up that filled the cache), %s at end, %s at most; goroutines %d, %d; open files %d, %d",
			strings.Join(cs, ", "), own, mib(maxDisk), overBound, mib(startMem.anon), mib(endMem.anon), mib(maxAnon), startGo, endGo, startFDs, endFDs),
		ref:    fmt.Sprintf("bound: 1.25 × limit + reserve = %s", mib(bound)),
		ratio:  "—",
		target: "no own 5xx, disk within the bound; anon memory, goroutines and open files back where they started (anon within 25% or 8 MiB, goroutines +2, open files +5: value-log files come and go)",
		met: own == 0 && overBound == 0 && endMem.anon <= startMem.anon+max(startMem.anon/4, 8<<20) &&
			endGo <= startGo+2 && endFDs <= startFDs+5,
	})
	return nil
}

// fetchStatus GETs url and reads the whole body: its status, and an
// error when the body ended early (a 200 cut short counts as "truncated").
func fetchStatus(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = io.ErrUnexpectedEOF
	}
	return resp.StatusCode, err
}

// goroutines reads go_goroutines from the mirror's /metrics.
func goroutines(ctx context.Context, c *http.Client, base string) (int, error) {
	body, err := get(ctx, c, base+"metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no go_goroutines in /metrics")
}

// openFiles counts pid's open file descriptors.
func openFiles(pid int) int {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(fds)
}

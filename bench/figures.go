package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// Figure 1: warm archive throughput against nginx.
func (e *env) warmThroughput(ctx context.Context) error {
	path := zipPath(e.big.Addr, bigNS, bigType, warmVersion)
	want := e.big.SHA256(bigNS, bigType, warmVersion, platform)
	var best [2]float64
	var ciphers [2]string
	for round := range e.cfg.Rounds {
		for i, base := range []string{e.mirror.url, e.nginx.url} {
			c := newClient(e.pool, e.cfg.Clients)
			if round == 0 {
				ciphers[i] = cipherOf(ctx, c, base+path)
				if _, sum, err := download(ctx, c, base+path, true); err != nil {
					return err
				} else if sum != want {
					return fmt.Errorf("%s serves sha256 %s, want %s", base+path, sum, want)
				}
			}
			progress("figure 1: %d clients downloading from %s for %s (round %d)", e.cfg.Clients, serverName(i), e.cfg.Duration, round+1)
			bps, err := throughput(ctx, c, base+path, e.cfg.Clients, e.cfg.Duration)
			closeIdle(c)
			if err != nil {
				return fmt.Errorf("%s: %w", serverName(i), err)
			}
			progress("  %s", mbps(bps))
			best[i] = max(best[i], bps)
		}
	}
	e.report.protocol = fmt.Sprintf("tfmirror: %s; nginx: %s", ciphers[0], ciphers[1])
	e.report.add(row{
		fig: "1", name: fmt.Sprintf("Warm archive throughput, %d MiB, %d clients", e.cfg.ArchiveMiB, e.cfg.Clients),
		mirror: mbps(best[0]), ref: "nginx " + mbps(best[1]),
		ratio: ratio(best[0] / best[1]), target: "≥ 0.9x", met: best[0]/best[1] >= 0.9,
	})
	return nil
}

func serverName(i int) string { return [2]string{"tfmirror", "nginx"}[i] }

// Figure 2: warm index.json and VERSION.json against nginx.
func (e *env) warmJSON(ctx context.Context) error {
	docs := []struct{ name, path string }{
		{"index.json", e.json.Addr + "/" + jsonNS + "/" + jsonType + "/index.json"},
		{"VERSION.json", e.json.Addr + "/" + jsonNS + "/" + jsonType + "/" + jsonVersion + ".json"},
	}
	wrk := ""
	if e.cfg.Wrk != "" {
		var err error
		if wrk, err = exec.LookPath(e.cfg.Wrk); err != nil {
			progress("figure 2: wrk not found (%v); skipping the cross-check", err)
		}
	}
	for _, d := range docs {
		// Each round measures both servers with the Go client, then with
		// wrk, back to back, so that the two servers of a round see about
		// the same machine; the ratio reported is the median of the
		// rounds' ratios. Rounds alternate which server goes first, so
		// that neither is always measured right after the other's load.
		var goRounds, wrkRounds [][2]rpsResult
		bases := [2]string{e.mirror.url, e.nginx.url}
		// pair measures both servers in round's order with measure; how
		// names the load generator in the progress lines.
		pair := func(round int, how string, measure func(url string) (rpsResult, error)) ([2]rpsResult, error) {
			var res [2]rpsResult
			for _, i := range roundOrder(round) {
				progress("figure 2: %s from %s%s, %d connections for %s (round %d)", d.name, serverName(i), how, e.cfg.JSONConns, e.cfg.Duration, round+1)
				r, err := measure(bases[i] + d.path)
				if err != nil {
					return res, fmt.Errorf("%s: %w", serverName(i), err)
				}
				progress("  %.0f req/s, p50 %s, p99 %s", r.rps, ms(r.p50), ms(r.p99))
				res[i] = r
			}
			return res, nil
		}
		for round := range e.cfg.JSONRounds {
			res, err := pair(round, "", func(url string) (rpsResult, error) {
				c := newClient(e.pool, e.cfg.JSONConns)
				defer closeIdle(c)
				return requestRate(ctx, c, url, e.cfg.JSONConns, e.cfg.Duration)
			})
			if err != nil {
				return err
			}
			goRounds = append(goRounds, res)
			if wrk == "" {
				continue
			}
			res, err = pair(round, " with wrk", func(url string) (rpsResult, error) {
				return wrkRate(ctx, wrk, url, e.cfg.JSONConns, e.cfg.Duration)
			})
			if err != nil {
				return err
			}
			wrkRounds = append(wrkRounds, res)
		}
		e.report.add(jsonRow("2", fmt.Sprintf("Warm %s, %d keep-alive connections", d.name, e.cfg.JSONConns), goRounds))
		if wrk != "" {
			e.report.add(jsonRow("2w", fmt.Sprintf("Warm %s, %d connections, measured with wrk", d.name, e.cfg.JSONConns), wrkRounds))
		}
	}
	return nil
}

// roundOrder is the order in which round measures the two servers
// (0: tfmirror, 1: nginx): tfmirror first in even rounds, nginx first in
// odd ones.
func roundOrder(round int) [2]int {
	if round%2 == 1 {
		return [2]int{1, 0}
	}
	return [2]int{0, 1}
}

// jsonRow is figure 2's row for rounds of tfmirror (round[0]) against
// nginx (round[1]): each server's median rate and p99, and the median of
// the rounds' ratios with their range.
func jsonRow(fig, name string, rounds [][2]rpsResult) row {
	var rps, p99 [2][]float64
	var ratios []float64
	for _, r := range rounds {
		for i := range r {
			rps[i] = append(rps[i], r[i].rps)
			p99[i] = append(p99[i], float64(r[i].p99))
		}
		ratios = append(ratios, r[0].rps/r[1].rps)
	}
	m := median(ratios)
	mirrorP99, nginxP99 := time.Duration(median(p99[0])), time.Duration(median(p99[1]))
	return row{
		fig: fig, name: name,
		mirror: fmt.Sprintf("%.0f req/s, p99 %s", median(rps[0]), ms(mirrorP99)),
		ref:    fmt.Sprintf("nginx %.0f req/s, p99 %s", median(rps[1]), ms(nginxP99)),
		ratio:  fmt.Sprintf("%s (%s–%s)", ratio(m), ratio(slices.Min(ratios)), ratio(slices.Max(ratios))),
		target: "≥ 0.9x, p99 < 5 ms",
		met:    m >= 0.9 && mirrorP99 < 5*time.Millisecond,
	}
}

// median of xs (not empty): the middle value, or the mean of the two
// middle values.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// coldClients runs n clients that download url at once (connections
// already open) and returns each one's time and the time the last
// finished, checking every length and the first client's sha256.
func coldClients(ctx context.Context, c *http.Client, url, warmURL string, n int, size int64, sha string) (last time.Duration, each []time.Duration, err error) {
	return coldClientsOver(ctx, c, []string{url}, []string{warmURL}, n, size, sha, false)
}

// coldClientsOver is coldClients with client i asking urls[i%len(urls)]
// (its connection opened with warmURLs[i%len(warmURLs)]); with hashAll
// every client's sha256 is checked, not only the first one's.
func coldClientsOver(ctx context.Context, c *http.Client, urls, warmURLs []string, n int, size int64, sha string, hashAll bool) (last time.Duration, each []time.Duration, err error) {
	// Open n connections with a small request each.
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = get(ctx, c, warmURLs[i%len(warmURLs)]) }()
	}
	wg.Wait()
	start := make(chan struct{})
	each = make([]time.Duration, n)
	errs := make([]error, n)
	var t0 time.Time
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			hash := hashAll || i == 0
			got, sum, err := download(ctx, c, urls[i%len(urls)], hash)
			each[i] = time.Since(t0)
			switch {
			case err != nil:
				errs[i] = err
			case got != size:
				errs[i] = fmt.Errorf("client %d got %d bytes, want %d", i, got, size)
			case hash && sum != sha:
				errs[i] = fmt.Errorf("client %d got sha256 %s, want %s", i, sum, sha)
			}
		}()
	}
	t0 = time.Now()
	close(start)
	wg.Wait()
	last = time.Since(t0)
	return last, each, errors.Join(errs...)
}

// Figure 3: cold fan-out.
func (e *env) coldFanOut(ctx context.Context) error {
	e.big.SetArchiveRate(e.cfg.OriginRate)
	defer e.big.SetArchiveRate(0)
	size := int64(e.cfg.ArchiveMiB) << 20
	warmURL := e.mirror.url + e.big.Addr + "/" + bigNS + "/" + bigType + "/index.json"
	times := map[string]time.Duration{}
	for _, tc := range []struct {
		version string
		clients int
	}{{"2.0.0", 1}, {"2.1.0", e.cfg.FanOut}} {
		c := newClient(e.pool, tc.clients)
		// Terraform asks for VERSION.json before the archive.
		if _, err := get(ctx, c, e.mirror.url+e.big.Addr+"/"+bigNS+"/"+bigType+"/"+tc.version+".json"); err != nil {
			return err
		}
		progress("figure 3: %d client(s) downloading an uncached archive, origin at %s", tc.clients, mbps(float64(e.cfg.OriginRate)))
		before := e.big.ArchiveHits(bigNS, bigType, tc.version, platform)
		last, _, err := coldClients(ctx, c, e.mirror.url+zipPath(e.big.Addr, bigNS, bigType, tc.version), warmURL,
			tc.clients, size, e.big.SHA256(bigNS, bigType, tc.version, platform))
		if err != nil {
			return err
		}
		hits := e.big.ArchiveHits(bigNS, bigType, tc.version, platform) - before
		progress("  last client done after %s; origin archive fetches %d", ms(last), hits)
		if hits != 1 {
			return fmt.Errorf("%d clients caused %d origin fetches, want 1", tc.clients, hits)
		}
		times[tc.version] = last
		if err := e.waitCached(ctx, c, zipPath(e.big.Addr, bigNS, bigType, tc.version)); err != nil {
			return err
		}
		closeIdle(c)
	}
	one, many := times["2.0.0"], times["2.1.0"]
	note := ""
	if e.nginx != nil {
		// How long sending every client its copy takes from disk, with no
		// origin at all: the floor this machine sets.
		c := newClient(e.pool, e.cfg.FanOut)
		progress("figure 3: %d clients downloading the same file from nginx", e.cfg.FanOut)
		floor, _, err := coldClients(ctx, c, e.nginx.url+zipPath(e.big.Addr, bigNS, bigType, warmVersion),
			e.nginx.url+e.big.Addr+"/"+bigNS+"/"+bigType+"/index.json", e.cfg.FanOut, size, e.big.SHA256(bigNS, bigType, warmVersion, platform))
		closeIdle(c)
		if err != nil {
			return fmt.Errorf("nginx: %w", err)
		}
		progress("  last client done after %s", ms(floor))
		note = fmt.Sprintf("; nginx, %d clients of a file on disk: %s (%.2fx)", e.cfg.FanOut, ms(floor), float64(many)/float64(floor))
	}
	e.report.add(row{
		fig: "3", name: fmt.Sprintf("Cold fan-out, %d clients, origin %s", e.cfg.FanOut, mbps(float64(e.cfg.OriginRate))),
		mirror: fmt.Sprintf("last done %s, 1 origin fetch", ms(many)), ref: "1 client alone " + ms(one) + note,
		ratio: ratio(float64(many) / float64(one)), target: "1 fetch, ≤ 1.2x", met: float64(many)/float64(one) <= 1.2,
	})
	return nil
}

// ttfb returns the time until the first body byte of url and closes the
// body, or reads it to the end when drain is set.
func ttfb(ctx context.Context, c *http.Client, url string, drain bool) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var b [1]byte
	if _, err := resp.Body.Read(b[:]); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	if drain {
		bufp := copyBufs.Get().(*[]byte)
		defer copyBufs.Put(bufp)
		for {
			if _, err := resp.Body.Read(*bufp); err != nil {
				break
			}
		}
	}
	return d, nil
}

// Figure 4: cold time to first byte, mirror minus origin.
func (e *env) coldTTFB(ctx context.Context) error {
	e.big.SetArchiveRate(e.cfg.OriginRate)
	defer e.big.SetArchiveRate(0)
	mc := newClient(e.pool, 1)
	defer closeIdle(mc)
	oc := newClient(e.big.CertPool(), 1)
	defer closeIdle(oc)
	// Open both connections.
	if _, err := get(ctx, oc, e.big.URL+"/.well-known/terraform.json"); err != nil {
		return err
	}
	var mirror, origin, diff []time.Duration
	for i := range e.cfg.TTFBSamples {
		v := fmt.Sprintf("3.0.%d", i)
		if _, err := get(ctx, mc, e.mirror.url+e.big.Addr+"/"+bigNS+"/"+bigType+"/"+v+".json"); err != nil {
			return err
		}
		o, err := ttfb(ctx, oc, e.big.ArchiveURL(bigNS, bigType, v, platform), false)
		if err != nil {
			return fmt.Errorf("origin: %w", err)
		}
		m, err := ttfb(ctx, mc, e.mirror.url+zipPath(e.big.Addr, bigNS, bigType, v), true)
		if err != nil {
			return fmt.Errorf("mirror: %w", err)
		}
		progress("figure 4: sample %d: mirror TTFB %s, origin TTFB %s", i+1, ms(m), ms(o))
		mirror, origin, diff = append(mirror, m), append(origin, o), append(diff, m-o)
		if err := e.waitCached(ctx, mc, zipPath(e.big.Addr, bigNS, bigType, v)); err != nil {
			return err
		}
	}
	med := func(d []time.Duration) time.Duration { d = slices.Clone(d); slices.Sort(d); return d[len(d)/2] }
	e.report.add(row{
		fig: "4", name: fmt.Sprintf("Cold time to first byte (median of %d)", e.cfg.TTFBSamples),
		mirror: fmt.Sprintf("%s (mirror − origin %s)", ms(med(mirror)), ms(med(diff))), ref: "origin " + ms(med(origin)),
		ratio: "—", target: "+ < 20 ms", met: med(diff) < 20*time.Millisecond,
	})
	return nil
}

// Figure 5: peak RSS while serving concurrent downloads, warm and cold,
// in a freshly started mirror whose cache holds the warm archive. VmHWM is
// the kernel's peak; it counts the pages of Badger's
// memory-mapped value log that reads touch, which are page cache, so the
// anonymous part (heap and stacks) is sampled too.
func (e *env) memory(ctx context.Context) error {
	n := e.cfg.MemClients
	size := int64(e.cfg.ArchiveMiB) << 20
	// A new process, so that pages the earlier figures touched do not count.
	progress("figure 5: restarting tfmirror")
	if err := e.startMirror(ctx); err != nil {
		return err
	}
	pid := e.mirror.pid()
	warmURL := e.mirror.url + e.big.Addr + "/" + bigNS + "/" + bigType + "/index.json"
	c := newClient(e.pool, n)
	defer closeIdle(c)
	// The warm archive is cached by figure 1, or now.
	if _, _, err := download(ctx, c, e.mirror.url+zipPath(e.big.Addr, bigNS, bigType, warmVersion), false); err != nil {
		return err
	}
	if err := e.waitCached(ctx, c, zipPath(e.big.Addr, bigNS, bigType, warmVersion)); err != nil {
		return err
	}
	e.big.SetArchiveRate(e.cfg.OriginRate)
	defer e.big.SetArchiveRate(0)
	if _, err := get(ctx, c, e.mirror.url+e.big.Addr+"/"+bigNS+"/"+bigType+"/4.0.0.json"); err != nil {
		return err
	}
	var peaks []string
	var worstHWM, worstAnon int64
	since := "since reset"
	for _, tc := range []struct{ name, version string }{{"warm", warmVersion}, {"cold", "4.0.0"}} {
		if err := resetPeak(pid); err != nil {
			since = "since start (clear_refs failed: " + err.Error() + ")"
		}
		before, err := memStatus(pid)
		if err != nil {
			return err
		}
		progress("figure 5: %d concurrent %s downloads, RSS before %s (anon %s, file %s)", n, tc.name, mib(before.rss), mib(before.anon), mib(before.file))
		stop := make(chan struct{})
		sampled := make(chan mem)
		go func() {
			var peak mem
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for {
				if m, err := memStatus(pid); err == nil {
					peak.anon, peak.file = max(peak.anon, m.anon), max(peak.file, m.file)
				}
				select {
				case <-t.C:
				case <-stop:
					sampled <- peak
					return
				}
			}
		}()
		_, _, err = coldClients(ctx, c, e.mirror.url+zipPath(e.big.Addr, bigNS, bigType, tc.version), warmURL,
			n, size, e.big.SHA256(bigNS, bigType, tc.version, platform))
		close(stop)
		peak := <-sampled
		if err != nil {
			return err
		}
		after, err := memStatus(pid)
		if err != nil {
			return err
		}
		progress("  peak RSS %s; sampled peaks: anon %s, file %s", mib(after.hwm), mib(peak.anon), mib(peak.file))
		peaks = append(peaks, fmt.Sprintf("%s: VmHWM %s, anon %s", tc.name, mib(after.hwm), mib(peak.anon)))
		worstHWM, worstAnon = max(worstHWM, after.hwm), max(worstAnon, peak.anon)
		if err := e.waitCached(ctx, c, zipPath(e.big.Addr, bigNS, bigType, tc.version)); err != nil {
			return err
		}
	}
	e.report.add(row{
		fig: "5", name: fmt.Sprintf("Peak RSS (VmHWM %s; anon = sampled peak RssAnon), %d concurrent %d MiB downloads", since, n, e.cfg.ArchiveMiB),
		mirror: strings.Join(peaks, "; "), ref: "—",
		ratio: "—", target: "< 100 MiB", met: worstHWM < 100<<20,
	})
	e.report.memNote = worstAnon < 100<<20 && worstHWM >= 100<<20
	return nil
}

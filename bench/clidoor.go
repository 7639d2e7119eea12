package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// Figure 11: the CLI releases door's warm archive against the network
// mirror's, on the same tfmirror, the same archive size and clients.

// cliVersion is the terraform release the stand-in origin publishes.
const cliVersion = "1.0.0"

// startReleasesOrigin starts the stand-in HashiCorp releases origin with
// one terraform release for platform whose archive is exactly size bytes
// (the size of the network mirror's warm archive), and returns the flags
// that point tfmirror at it.
func (e *env) startReleasesOrigin(size int64) ([]string, error) {
	o, err := fakeorigin.StartReleases()
	if err != nil {
		return nil, err
	}
	o.Add("hashicorp", "terraform", cliVersion, platform)
	// The archive is the program and stored padding: its size is the
	// padding plus a fixed overhead.
	o.SetArchivePadding(size)
	if over := int64(len(o.Archive("terraform", cliVersion, platform))) - size; over > 0 && over < size {
		o.SetArchivePadding(size - over)
	}
	if got := int64(len(o.Archive("terraform", cliVersion, platform))); got != size {
		o.Close()
		return nil, fmt.Errorf("the stand-in's CLI archive is %d bytes, want %d", got, size)
	}
	e.releases = o
	key := filepath.Join(e.dir, "releases-hashicorp.asc")
	if err := os.WriteFile(key, []byte(o.HashiCorpKey), 0o644); err != nil {
		o.Close()
		return nil, err
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		o.Close()
		return nil, err
	}
	e.releasesHost = u.Host
	return []string{"--releases-hashicorp-url", o.HashiCorpURL, "--releases-hashicorp-keys", key}, nil
}

// cliArchivePath is the warm CLI archive in the mirror's URL space.
func cliArchivePath() string {
	name := fakeorigin.ArchiveName("terraform", cliVersion, platform)
	return "releases/hashicorp/terraform/" + cliVersion + "/" + name
}

// warmCLIArchive measures, in -cli-rounds rounds, the releases door's
// warm CLI archive and the network mirror's warm provider archive (figure
// 1's) back to back on the same tfmirror, -clients clients for -duration
// each, alternating which goes first; it reports each one's median and
// the median of the rounds' ratios with their range.
func (e *env) warmCLIArchive(ctx context.Context) error {
	size := int64(e.cfg.ArchiveMiB) << 20
	paths := [2]string{cliArchivePath(), zipPath(e.big.Addr, bigNS, bigType, warmVersion)}
	data := e.releases.Archive("terraform", cliVersion, platform)
	cliSum := sha256.Sum256(data)
	sums := [2]string{hex.EncodeToString(cliSum[:]), e.big.SHA256(bigNS, bigType, warmVersion, platform)}
	names := [2]string{"releases door", "network mirror"}

	// Warm both: fetched once through the mirror, then served from its cache.
	c := newClient(e.pool, 4)
	for i, p := range paths {
		if _, err := get(ctx, c, e.mirror.url+p); err != nil {
			closeIdle(c)
			return err
		}
		if err := e.waitCached(ctx, c, p); err != nil {
			closeIdle(c)
			return err
		}
		n, sum, err := download(ctx, c, e.mirror.url+p, true)
		switch {
		case err != nil:
			closeIdle(c)
			return err
		case n != size:
			closeIdle(c)
			return fmt.Errorf("%s serves %d bytes, want %d", names[i], n, size)
		case sum != sums[i]:
			closeIdle(c)
			return fmt.Errorf("%s serves sha256 %s, want %s", names[i], sum, sums[i])
		}
	}
	closeIdle(c)

	// Throughput on this shared machine moves with the other load; the
	// CPU time tfmirror spends per byte sent moves much less, so it is
	// reported too.
	var rates, cpus [2][]float64
	var ratios, cpuRatios []float64
	for round := range e.cfg.CLIRounds {
		var r, cpu [2]float64
		for _, i := range roundOrder(round) {
			progress("figure 11: %d clients downloading the %s's warm %d MiB archive for %s (round %d)", e.cfg.Clients, names[i], e.cfg.ArchiveMiB, e.cfg.Duration, round+1)
			c := newClient(e.pool, e.cfg.Clients)
			cpu0, err := cpuSeconds(e.mirror.pid())
			if err != nil {
				closeIdle(c)
				return err
			}
			t0 := time.Now()
			bps, err := throughput(ctx, c, e.mirror.url+paths[i], e.cfg.Clients, e.cfg.Duration)
			elapsed := time.Since(t0)
			closeIdle(c)
			if err != nil {
				return fmt.Errorf("%s: %w", names[i], err)
			}
			cpu1, err := cpuSeconds(e.mirror.pid())
			if err != nil {
				return err
			}
			r[i] = bps
			cpu[i] = (cpu1 - cpu0) / (bps * elapsed.Seconds() / 1e9) // CPU seconds per GB sent
			progress("  %s, %.2f CPU s/GB", mbps(bps), cpu[i])
			rates[i] = append(rates[i], bps)
			cpus[i] = append(cpus[i], cpu[i])
		}
		ratios = append(ratios, r[0]/r[1])
		cpuRatios = append(cpuRatios, cpu[0]/cpu[1])
	}
	m := median(ratios)
	e.report.add(row{
		fig: "11",
		name: fmt.Sprintf("Warm CLI archive through the releases door, %d MiB, %d clients (median of %d rounds; tfmirror's CPU time per GB sent, and its ratio)",
			e.cfg.ArchiveMiB, e.cfg.Clients, e.cfg.CLIRounds),
		mirror: fmt.Sprintf("%s, %.2f CPU s/GB", mbps(median(rates[0])), median(cpus[0])),
		ref:    fmt.Sprintf("network mirror's warm archive %s, %.2f CPU s/GB", mbps(median(rates[1])), median(cpus[1])),
		ratio: fmt.Sprintf("%s (%s–%s); CPU %s (%s–%s)", ratio(m), ratio(slices.Min(ratios)), ratio(slices.Max(ratios)),
			ratio(median(cpuRatios)), ratio(slices.Min(cpuRatios)), ratio(slices.Max(cpuRatios))),
		target: "≥ 0.95x",
		met:    m >= 0.95,
	})
	return nil
}

// cpuSeconds is the user and system CPU time process pid has used
// (/proc/PID/stat, in clock ticks of 1/100 s, USER_HZ on Linux).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	return float64(utime+stime) / 100, nil
}

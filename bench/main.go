// Command bench measures tfmirror against references on loopback and prints
// a table of ratios: warm archive throughput and warm JSON against nginx
// serving the same files as a static mirror, cold fan-out and cold time to
// first byte against the fake origin, peak memory, `terraform init`
// through the mirror against installing directly from the origin, origin
// downloads of three replicas with and without a shared store, what
// start-up, memory and the status page cost as the cache grows to 100,000
// packages, whether the disk follows the cache after evictions, and the
// CLI releases door's warm archive against the network mirror's.
//
//	go run ./bench            (see BENCHMARKS.md; -h lists the flags)
//
// It builds tfmirror and runs it as a subprocess (so that its memory is
// measurable and the load generator does not share its process), runs the
// fake origin (internal/testrig/fakeorigin) in this process, and starts nginx from
// the PATH with a generated configuration, and versitygw (an S3-compatible
// server) on loopback for figure 7. Every subprocess is stopped when
// the run ends, fails or is interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// config holds the command-line flags.
type config struct {
	ArchiveMiB    int
	Clients       int
	JSONConns     int
	Duration      time.Duration
	Rounds        int
	JSONRounds    int
	CLIRounds     int
	FanOut        int
	OriginRate    int64
	TTFBSamples   int
	MemClients    int
	TFProviders   int
	TFLatency     time.Duration
	TFArchive     int
	TFRuns        int
	SharedClients int
	Versitygw     string
	Nginx         string
	Wrk           string
	Terraform     string
	Out           string
	MirrorEnv     string
	Only          string
	KeepTemp      bool
	GrowthSizes   string
	DiskLimitMiB  int
	SoakClients   int
	SoakLimitMiB  int
	SoakDuration  time.Duration
	Fixture       int
	FixtureDir    string
}

func parseFlags() config {
	var c config
	flag.IntVar(&c.ArchiveMiB, "archive-mib", 64, "size of the provider archive for figures 1, 3, 4, 5 and 7, in MiB")
	flag.IntVar(&c.Clients, "clients", 32, "concurrent clients for warm archive throughput (figure 1)")
	flag.IntVar(&c.JSONConns, "json-conns", 64, "concurrent keep-alive connections for warm JSON (figure 2)")
	flag.DurationVar(&c.Duration, "duration", 10*time.Second, "how long each throughput and requests-per-second measurement runs")
	flag.IntVar(&c.JSONRounds, "json-rounds", 5, "rounds of figure 2, each measuring tfmirror and nginx back to back with each load generator, alternating which goes first; the median of the rounds' ratios is reported")
	flag.IntVar(&c.CLIRounds, "cli-rounds", 5, "rounds of figure 11, each measuring the releases door's warm CLI archive and the network mirror's warm archive back to back, alternating which goes first; the medians are reported")
	flag.IntVar(&c.Rounds, "rounds", 3, "times figure 1 alternates between tfmirror and nginx; the best round of each is reported, as other load on the machine only ever slows a round down")
	flag.IntVar(&c.FanOut, "fanout", 50, "concurrent clients of one uncached archive (figure 3)")
	flag.Int64Var(&c.OriginRate, "origin-rate", 100_000_000, "origin archive throttle for figures 3, 4 and 7, in bytes per second")
	flag.IntVar(&c.TTFBSamples, "ttfb-samples", 5, "uncached archives measured for time to first byte (figure 4)")
	flag.IntVar(&c.MemClients, "mem-clients", 20, "concurrent downloads while peak memory is measured (figure 5)")
	flag.IntVar(&c.TFProviders, "tf-providers", 4, "providers in the terraform configuration (figure 6)")
	flag.DurationVar(&c.TFLatency, "tf-latency", 50*time.Millisecond, "latency injected on every origin response for figure 6")
	flag.IntVar(&c.TFArchive, "tf-archive-mib", 8, "archive size of each terraform provider (figure 6), in MiB")
	flag.IntVar(&c.TFRuns, "tf-runs", 3, "terraform init runs per variant (figure 6); the median is reported")
	flag.IntVar(&c.SharedClients, "shared-clients", 30, "concurrent clients, spread round-robin over the three replicas, of one uncached archive (figure 7)")
	flag.StringVar(&c.Versitygw, "versitygw", "", "versitygw binary, the S3-compatible server of figure 7 (default: versitygw on PATH, else .ci/bin/versitygw; see bench/setup.sh)")
	flag.StringVar(&c.Nginx, "nginx", "nginx", "nginx binary (Debian package nginx-light; see bench/setup.sh)")
	flag.StringVar(&c.Wrk, "wrk", "wrk", "wrk binary, for a second measurement of figure 2 with a load generator in C; \"\" skips it")
	flag.StringVar(&c.Terraform, "terraform", "terraform", "terraform binary for figure 6")
	flag.StringVar(&c.MirrorEnv, "mirror-env", "", "comma-separated KEY=VALUE settings for tfmirror's environment only (e.g. GOMEMLIMIT=64MiB)")
	flag.StringVar(&c.Out, "out", "", "also write the results as Markdown to this file")
	flag.StringVar(&c.Only, "only", "", "comma-separated figures to run (e.g. 1,2); default all")
	flag.BoolVar(&c.KeepTemp, "keep-temp", false, "keep the temporary directory (logs, nginx configuration) for inspection")
	flag.StringVar(&c.GrowthSizes, "growth-sizes", "1000,10000,100000", "cache sizes of figure 8, in tiny in-house packages (a cache of 10 is measured too, as the reference)")
	flag.IntVar(&c.DiskLimitMiB, "disk-limit-mib", 64, "--cache-max-bytes of figure 9, in MiB; twice as much is pulled through")
	flag.IntVar(&c.SoakClients, "soak-clients", 6, "clients of the soak (figure 10)")
	flag.IntVar(&c.SoakLimitMiB, "soak-limit-mib", 200, "--cache-max-bytes of the soak (figure 10), in MiB; the working set is twice that")
	flag.DurationVar(&c.SoakDuration, "soak-duration", 10*time.Minute, "how long the soak (figure 10) runs")
	flag.IntVar(&c.Fixture, "write-fixture", 0, "only write this many in-house packages (figure 8's fixture) into the data directory -fixture-dir, and exit")
	flag.StringVar(&c.FixtureDir, "fixture-dir", "", "data directory for -write-fixture")
	flag.Parse()
	c.Rounds = max(c.Rounds, 1)
	c.JSONRounds = max(c.JSONRounds, 1)
	c.CLIRounds = max(c.CLIRounds, 1)
	return c
}

func main() {
	cfg := parseFlags()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Fixture > 0 {
		start := time.Now()
		n, err := writeFixture(ctx, cfg.FixtureDir, cfg.Fixture)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Printf("wrote %d providers (%d packages) in %s\n", n, n*fixtureVersions*len(fixturePlatforms), time.Since(start).Round(time.Millisecond))
		return
	}
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

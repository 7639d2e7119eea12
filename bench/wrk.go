package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// wrkRate measures url with wrk (a load generator in C, using OpenSSL),
// as a cross-check that figure 2 is not limited by the Go client: 2
// threads, conns connections, for d.
func wrkRate(ctx context.Context, bin, url string, conns int, d time.Duration) (rpsResult, error) {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	cmd := exec.CommandContext(ctx, bin, "-t2", fmt.Sprintf("-c%d", conns), fmt.Sprintf("-d%ds", secs), "--latency", url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return rpsResult{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	return parseWrk(out)
}

// parseWrk reads "Requests/sec:", the 50% and 99% latency lines and the
// error counts of wrk's output.
func parseWrk(out []byte) (rpsResult, error) {
	var r rpsResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			r.rps, _ = strconv.ParseFloat(f[1], 64)
		case len(f) == 2 && f[0] == "50%":
			r.p50, _ = time.ParseDuration(f[1])
		case len(f) == 2 && f[0] == "99%":
			r.p99, _ = time.ParseDuration(f[1])
		case len(f) > 0 && (f[0] == "Non-2xx" || f[0] == "Socket"):
			return r, fmt.Errorf("wrk reports errors: %s", sc.Text())
		}
	}
	if r.rps == 0 || r.p99 == 0 {
		return r, fmt.Errorf("unexpected wrk output:\n%s", out)
	}
	return r, nil
}

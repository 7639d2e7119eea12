package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/dustin/go-humanize"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

const verifyUsage = "tfmirror cache verify [--data-dir DIR]"

// runVerify is `tfmirror cache verify`: it reads every cached package and
// checks it against its stored evidence (provider packages) or recorded
// sha256, through the tfmirror serving the data directory or on the
// directory itself (opened sealed: a check asks no origin). It lists what
// failed on stderr, the counts on stdout, and exits 1 when anything
// failed or the data directory does not exist (it never makes one); it
// removes nothing.
func runVerify(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	cfg, rest, err := parseCacheCommandFlags("cache verify", args, lookupEnv, usageOutput(args, stdout, stderr), verifyUsage, func(*flag.FlagSet) {})
	if errors.Is(err, settings.ErrHelp) {
		return 0
	}
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected arguments %q", rest)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror cache verify: %v\nUsage: %s\n", err, verifyUsage)
		return 2
	}
	if err := existingDataDir(cfg.DataDir, "cache verify"); err != nil {
		fmt.Fprintf(stderr, "tfmirror cache verify: %v\n", err)
		return 1
	}
	return runSealed("cache verify", cfg, nil, stdout, stderr, nil, func(ctx context.Context, ops engineOps) (airGapResult, error) {
		res, err := ops.Verify(ctx, admin.VerifyRequest{})
		var out airGapResult
		for _, c := range res.Failures {
			what := c.Kind + " " + c.Address + " " + c.Version
			if c.Platform != "" {
				what += " " + c.Platform
			}
			if c.Withheld {
				what += " (the withheld import set aside in its record)"
			}
			out.failures = append(out.failures, fmt.Sprintf("FAILED %s (sha256 %s): %s", what, c.SHA256, c.Problem))
		}
		if res.Failed > len(res.Failures) {
			out.failures = append(out.failures, fmt.Sprintf("... and %d more failed (see the serving tfmirror's log)", res.Failed-len(res.Failures)))
		}
		out.failed = res.Failed
		if err != nil && res.Checked+res.Failed == 0 {
			return out, err // nothing checked: no summary
		}
		out.summary = fmt.Sprintf("checked %d packages, %s (%d against stored evidence, %d against their sha256): %d failed",
			res.Checked, humanize.IBytes(uint64(res.Bytes)), res.ByEvidence, res.Checked-res.ByEvidence, res.Failed)
		return out, err
	})
}

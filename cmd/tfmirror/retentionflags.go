package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/internal/manifest"
	pullthrough "github.com/tfmirror/tfmirror/mirror"
)

// retentionConfig holds the retention flags: serve's, and those of
// cache prune when it opens the data directory itself.
type retentionConfig struct {
	KeepVersions      int
	KeepPerMajor      bool
	EvictUnusedAfter  time.Duration
	PinsDir           string
	RetentionInterval time.Duration
}

// addRetentionFlags registers the retention rules' flags on fs; interval
// says whether --retention-interval is one of them (serve's).
func addRetentionFlags(fs *flag.FlagSet, c *retentionConfig, interval bool) {
	fs.IntVar(&c.KeepVersions, "keep-versions", 0, "keep the packages of only the newest N cached versions of each provider and module; older ones are removed (fetched again if asked for); 0 keeps all")
	fs.BoolVar(&c.KeepPerMajor, "keep-versions-per-major", false, "apply --keep-versions to each major version apart (the newest N of 4.x, of 5.x, ...)")
	fs.Var((*daysFlag)(&c.EvictUnusedAfter), "evict-unused-after", "remove the packages of versions nobody downloaded for this long (e.g. 30d, 72h); 0 disables")
	fs.StringVar(&c.PinsDir, "pins-dir", "", "directory of Terraform lock files (*.lock.hcl) and sync manifests (*.hcl), read again when they change: the versions they select are never removed by any rule or the size limit, and are listed as pinned on the status page")
	if interval {
		fs.DurationVar(&c.RetentionInterval, "retention-interval", 10*time.Minute, "how often the retention rules (--keep-versions, --evict-unused-after) are applied in the background; 0: only when tfmirror cache prune asks")
	}
}

func (c retentionConfig) validate() error {
	if c.KeepVersions < 0 || c.EvictUnusedAfter < 0 {
		return errors.New("--keep-versions and --evict-unused-after must not be negative (0 disables)")
	}
	if c.KeepPerMajor && c.KeepVersions == 0 {
		return errors.New("--keep-versions-per-major needs --keep-versions")
	}
	if c.RetentionInterval < 0 {
		return errors.New("--retention-interval must not be negative (0: only tfmirror cache prune applies the rules)")
	}
	return nil
}

// engine is the engine's retention for a cache limited to maxBytes.
func (c retentionConfig) engine(maxBytes int64) pullthrough.Retention {
	r := pullthrough.Retention{KeepVersions: c.KeepVersions, KeepPerMajor: c.KeepPerMajor,
		UnusedAfter: c.EvictUnusedAfter, Interval: c.RetentionInterval, MaxBytes: maxBytes}
	if r.Interval == 0 {
		r.Interval = -1 // only when asked: a command that is not serve
	}
	if c.PinsDir != "" {
		r.Pins = manifest.NewPinsDir(c.PinsDir)
	}
	return r
}

// daysFlag is a duration that also takes whole days ("30d").
type daysFlag time.Duration

func (d *daysFlag) String() string {
	v := time.Duration(*d)
	if v > 0 && v%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", v/(24*time.Hour))
	}
	return v.String()
}

func (d *daysFlag) Set(s string) error {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 100000 {
			return fmt.Errorf("%q: want a number of days (30d) or a duration (72h)", s)
		}
		*d = daysFlag(time.Duration(days) * 24 * time.Hour)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q: want a number of days (30d) or a duration (72h)", s)
	}
	*d = daysFlag(v)
	return nil
}

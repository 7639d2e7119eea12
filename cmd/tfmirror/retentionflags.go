package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/manifest"
	"github.com/tfmirror/tfmirror/retention"
)

// retentionConfig holds the retention settings: serve's, and those of
// cache prune when it opens the data directory itself.
type retentionConfig struct {
	KeepVersions      int
	KeepPerMajor      bool
	EvictUnusedAfter  time.Duration
	PinsDir           string
	RetentionInterval time.Duration
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

// config is the retention of a cache limited to maxBytes.
func (c retentionConfig) config(maxBytes int64) retention.Config {
	r := retention.Config{KeepVersions: c.KeepVersions, KeepPerMajor: c.KeepPerMajor,
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

package settings

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// ErrHelp is what parsing gives for -h.
var ErrHelp = errors.New("help requested")

// EnvName is the environment variable that sets flag name.
func EnvName(name string) string {
	return "TFMIRROR_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// List is a comma-separated list; setting it replaces the default.
type List []string

func (l *List) String() string { return strings.Join(*l, ",") }

func (l *List) Set(s string) error {
	*l = nil
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

// ByteSize is a size such as 2GiB, 500MB or 1048576.
type ByteSize int64

func (b *ByteSize) String() string { return humanize.IBytes(uint64(*b)) }

func (b *ByteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		// humanize's own message names no part of the input.
		return fmt.Errorf("not a size: want bytes, or a number and a unit such as 512MiB or 2GB")
	}
	if n > 1<<62 {
		return fmt.Errorf("%s is too large", s)
	}
	*b = ByteSize(n)
	return nil
}

// Days is a duration that also takes whole days ("30d").
type Days time.Duration

func (d *Days) String() string {
	v := time.Duration(*d)
	if v > 0 && v%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", v/(24*time.Hour))
	}
	return v.String()
}

func (d *Days) Set(s string) error {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 100000 {
			return fmt.Errorf("%q: want a number of days (30d) or a duration (72h)", s)
		}
		*d = Days(time.Duration(days) * 24 * time.Hour)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q: want a number of days (30d) or a duration (72h)", s)
	}
	*d = Days(v)
	return nil
}

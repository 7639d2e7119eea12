package settings

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/tfmirror/tfmirror/v2/internal/duration"
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

// Duration is a duration (duration.Parse: "72h", or whole days "3d"),
// shown as Go shows it ("72h0m0s").
type Duration time.Duration

func (d *Duration) String() string { return time.Duration(*d).String() }

func (d *Duration) Set(s string) error {
	v, err := duration.Parse(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Days is a duration (duration.Parse) shown in whole days when it is a
// number of them ("30d").
type Days time.Duration

func (d *Days) String() string { return duration.Days(time.Duration(*d)) }

func (d *Days) Set(s string) error {
	v, err := duration.Parse(s)
	if err != nil {
		return err
	}
	*d = Days(v)
	return nil
}

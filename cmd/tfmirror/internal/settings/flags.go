package settings

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
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

// Int is a whole number. Its error says what is wanted, where the flag
// package's says "parse error" (the caller names the value).
type Int int

func (n *Int) String() string { return strconv.Itoa(int(*n)) }

func (n *Int) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("want a whole number between %d and %d", math.MinInt, math.MaxInt)
	}
	if err != nil {
		return errors.New("want a whole number")
	}
	*n = Int(v)
	return nil
}

// IntVar defines an int flag on fs, as flag.FlagSet.IntVar does, whose
// error says what is wanted (Int).
func IntVar(fs *flag.FlagSet, p *int, name string, def int, usage string) {
	*p = def
	fs.Var((*Int)(p), name, usage)
}

// BoolVar defines a switch on fs, off by default, as
// flag.FlagSet.BoolVar does, whose error says what is wanted (Bool).
func BoolVar(fs *flag.FlagSet, p *bool, name string, usage string) {
	*p = false
	fs.Var((*Bool)(p), name, usage)
}

// Bool is a switch, given alone (--offline) or with a value; its error
// says what is wanted, where the flag package's says "parse error".
type Bool bool

func (b *Bool) String() string { return strconv.FormatBool(bool(*b)) }

func (b *Bool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*b = Bool(v)
	return nil
}

// IsBoolFlag lets the flag be given without a value, as a switch.
func (b *Bool) IsBoolFlag() bool { return true }

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
	// A fraction of a byte rounds down to 0, which turns a limit off
	// (--cache-max-bytes 0.1 was no limit at all).
	if n == 0 && strings.ContainsAny(strings.TrimRight(s, "BbKkMmGgTtPpEeIi "), "123456789") {
		return fmt.Errorf("%s is less than one byte (0, which is what turns a limit off, is written 0)", s)
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

// PrintDefaults writes fs's flags as flag.FlagSet.PrintDefaults does,
// each flag of this package's types shown with its kind
// ("-origin-timeout duration", "-cache-max-bytes size") where the flag
// package, which knows only its own types, says "value".
func PrintDefaults(fs *flag.FlagSet) {
	out := fs.Output()
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	lines := strings.SplitAfter(b.String(), "\n")
	for i, line := range lines {
		name, ok := strings.CutPrefix(line, "  -")
		if !ok {
			continue
		}
		if name, ok = strings.CutSuffix(name, " value\n"); !ok {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if kind := kindOf(f.Value); kind != "" {
				lines[i] = "  -" + name + " " + kind + "\n"
			}
		}
	}
	fmt.Fprint(out, strings.Join(lines, ""))
}

// kindOf is how PrintDefaults shows a value of this package's types.
func kindOf(v flag.Value) string {
	switch v.(type) {
	case *Int:
		return "int"
	case *Duration, *Days:
		return "duration"
	case *ByteSize:
		return "size"
	case *List:
		return "list"
	}
	return ""
}

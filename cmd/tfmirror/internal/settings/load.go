package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/tfmirror/tfmirror/v2/internal/redact"
)

// A Source is where a setting's value in effect came from.
type Source string

// The sources, from the one that wins down.
const (
	FromFlag    Source = "flag"
	FromEnv     Source = "env"
	FromFile    Source = "file"
	FromDefault Source = "default"
)

// Loaded is what Load read besides the values it set: the configuration
// file, and where each flag's value came from.
type Loaded struct {
	// File is the configuration file; nil without one.
	File *File
	// Sources are where each flag of the set got its value, by name.
	Sources map[string]Source
	// raw and shown are each setting's value, exactly (for comparing)
	// and as it may be shown (secrets redacted), by name.
	raw, shown map[string]string
	order      []*Setting // the settings of the set, in the table's order
	// pending are the values, as shown, that the configuration file gave
	// at the last reload to settings that cannot change while serving and
	// kept their values in force (Reloader): in force after a restart.
	pending map[string]string
}

// Load parses args with fs, then fills every flag not given on the
// command line from its TFMIRROR_ environment variable (one set to the
// empty string counts as unset) and, for the
// settings of the table named in names, else from the configuration file
// that --config or TFMIRROR_CONFIG names (when fs has AddConfigFlag's
// flag): a flag wins over the environment, which wins over the file,
// which wins over the default. -h gives ErrHelp; a file refused gives a
// *FileError.
func Load(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool), names []string) (*Loaded, error) {
	l, fileErr, err := loadAll(fs, args, lookupEnv, names)
	if err != nil {
		return nil, err
	}
	if fileErr != nil {
		return nil, fileErr
	}
	return l, nil
}

// loadAll is Load, going on past a file refused for its values with those
// it accepted: fileErr is the file's errors, l nil only when err is set
// or the file could not be read or parsed.
func loadAll(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool), names []string) (l *Loaded, fileErr *FileError, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, ErrHelp
		}
		return nil, nil, err
	}
	l = &Loaded{Sources: map[string]Source{}, raw: map[string]string{}, shown: map[string]string{}}
	fs.Visit(func(f *flag.Flag) { l.Sources[f.Name] = FromFlag })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if l.Sources[f.Name] != "" || envErr != nil {
			return
		}
		// Empty is unset, as the go command takes its variables: a
		// TFMIRROR_X= an edit left behind does not set X to nothing.
		if v, ok := lookupEnv(EnvName(f.Name)); ok && v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", EnvName(f.Name), v, err)
			}
			l.Sources[f.Name] = FromEnv
		}
	})
	if envErr != nil {
		return nil, nil, envErr
	}
	if cf := fs.Lookup(ConfigFlag); cf != nil && cf.Value.String() != "" {
		path := cf.Value.String()
		file, diags := ReadFile(path)
		if diags.HasErrors() {
			fileErr = &FileError{Path: path, Diags: diags}
			if file == nil {
				return nil, fileErr, nil
			}
		}
		l.File = file
	}
	for _, name := range names {
		s := Named(name)
		l.order = append(l.order, s)
		if l.Sources[name] == "" {
			l.Sources[name] = FromDefault
			if v, _, ok := l.File.Value(name); ok {
				if err := fs.Set(name, v); err != nil { // checked by ReadFile
					return nil, nil, fmt.Errorf("configuration file %s: %s: %w", l.File.Path, s.Attribute(), err)
				}
				l.Sources[name] = FromFile
			}
		}
		l.raw[name] = exact(fs.Lookup(name).Value)
		l.shown[name] = l.raw[name]
		switch {
		case s.Secret:
			l.shown[name] = redactValue(l.raw[name])
		case s.show != nil && l.raw[name] != "":
			l.shown[name] = s.show(l.raw[name])
		}
		if src := l.Sources[name]; src == FromFlag || src == FromEnv {
			if v, rng, ok := l.File.Value(name); ok && fileExact(s, v) != l.raw[name] {
				l.File.Warnings = append(l.File.Warnings, overridden(s, src, rng, l.shown[name]))
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if l.Sources[f.Name] == "" {
			l.Sources[f.Name] = FromDefault
		}
	})
	return l, fileErr, nil
}

// Check is Load for a check of the whole file at once (config check):
// it goes on past the file's errors with the values it accepted, then
// checks them with validate (Config.Validate of the values Load sets,
// each of its errors placed at the line of a setting it names) and runs
// the hooks (the policy block). Every error of the three is in the one
// *FileError it returns; an error of validate about a setting the file
// gave a refused value is left out (it is about the default instead).
func Check(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool), names []string, validate func() error, hooks []Hook) (*Loaded, error) {
	l, fileErr, err := loadAll(fs, args, lookupEnv, names)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, fileErr
	}
	var diags hcl.Diagnostics
	if fileErr != nil {
		diags = fileErr.Diags
	}
	for _, e := range unjoin(validate()) {
		d, refused := l.diagnostic(e)
		if !refused {
			diags = append(diags, d)
		}
	}
	if _, err := CheckHooks(hooks, l.File); err != nil {
		var fe *FileError
		if !errors.As(err, &fe) {
			return nil, err
		}
		diags = append(diags, fe.Diags...)
	}
	if diags.HasErrors() {
		path := ""
		if l.File != nil {
			path = l.File.Path
		}
		return nil, &FileError{Path: path, Diags: diags}
	}
	return l, nil
}

// unjoin is the errors errors.Join joined in err, or err alone.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

// diagnostic is err, a check of the values that names settings by their
// flags, as a diagnostic at the first of them the file sets (in named's
// order: the one err begins with first); refused
// says the file gave one of them a value it refused.
func (l *Loaded) diagnostic(err error) (d *hcl.Diagnostic, refused bool) {
	d = &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid settings", Detail: err.Error() + l.fromEnv(err.Error())}
	for _, s := range l.named(err.Error()) {
		if l.File != nil && l.File.refused[s.Name] {
			return d, true
		}
		if _, rng, ok := l.File.Value(s.Name); ok && l.Sources[s.Name] == FromFile && d.Subject == nil {
			d.Subject = rng.Ptr()
		}
	}
	return d, false
}

// named are the settings whose flags msg names: first the one msg
// begins with ("--releases-hashicorp-url: ..."), the setting it is about,
// whose advice may name another ("give the origin's token in
// --credentials-file instead"); then the others in the table's order.
func (l *Loaded) named(msg string) []*Setting {
	var out []*Setting
	for _, s := range l.order {
		i := strings.Index(msg, "--"+s.Name)
		for i >= 0 {
			end := i + 2 + len(s.Name)
			if end == len(msg) || !(msg[end] == '-' || msg[end] >= 'a' && msg[end] <= 'z') {
				if i == 0 {
					out = slices.Insert(out, 0, s)
				} else {
					out = append(out, s)
				}
				break
			}
			j := strings.Index(msg[end:], "--"+s.Name)
			if j < 0 {
				break
			}
			i = end + j
		}
	}
	return out
}

// fileExact is v, the file's value of s in the flag's syntax, as exact
// writes the value in force (a size in its unit, a duration in Go's
// form), so that one value spelt two ways compares equal.
func fileExact(s *Setting, v string) string {
	fs := flag.NewFlagSet("file", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var scratch Config
	s.Register(fs, &scratch)
	if fs.Set(s.Name, v) != nil {
		return v
	}
	return exact(fs.Lookup(s.Name).Value)
}

// overridden is the warning of a value of s the file gives at rng that
// the flag or the environment (src) overrides with another: an edit of
// the file that takes no effect, on a start or a reload, is said. shown
// is the value in force, a secret's redacted.
func overridden(s *Setting, src Source, rng hcl.Range, shown string) *hcl.Diagnostic {
	who := "--" + s.Name + " on the command line"
	if src == FromEnv {
		who = EnvName(s.Name) + " in the environment"
	}
	return &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Overridden value",
		Detail:  fmt.Sprintf("%s is not in force: %s wins over the file (the value in force is %q)", s.Attribute(), who, shown),
		Subject: rng.Ptr()}
}

// ParseWithEnv parses args with fs, then fills every flag not given on
// the command line from its TFMIRROR_* environment variable: Load
// without a configuration file.
func ParseWithEnv(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool)) error {
	_, err := Load(fs, args, lookupEnv, nil)
	return err
}

// exact is v as a string that sets it again to the same value: sizes in
// bytes unless a whole number of a binary unit.
func exact(v flag.Value) string {
	switch v := v.(type) {
	case *ByteSize:
		n := int64(*v)
		for _, u := range []struct {
			unit string
			size int64
		}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
			if n != 0 && n%u.size == 0 {
				return strconv.FormatInt(n/u.size, 10) + u.unit
			}
		}
		return strconv.FormatInt(n, 10)
	case *List:
		return strings.Join(*v, ",")
	}
	return v.String()
}

// redactValue is a secret setting's value as it may be shown: a URL
// without its user, password and query (package redact's rule), anything
// else not at all.
func redactValue(v string) string {
	if v == "" {
		return ""
	}
	if u, err := url.Parse(v); err == nil && u.Host != "" {
		shown := redact.URL(u)
		if u.User != nil {
			// Said to be there, not shown: a proxy with credentials is
			// told from one without.
			shown = strings.Replace(shown, "://", "://(credentials)@", 1)
		}
		return shown
	}
	return "(redacted)"
}

// A Value is a setting's value in effect and where it came from.
type Value struct {
	Setting *Setting
	// Value is the value in the flag's syntax; a secret's redacted.
	Value  string
	Source Source
	// Pending is the value, shown as Value is, that the configuration
	// file gave at the last reload to a setting that cannot change while
	// serving (Setting.Live false), which a restart puts in force (for
	// one left empty whose default is made of others' values,
	// Setting.derived, the value they make then, pending whenever it
	// differs from Value); HasPending says there is one (Pending may be "").
	Pending    string
	HasPending bool
}

// Values are the values in effect of the settings Load read, in the
// table's order, secrets redacted; a setting left empty whose default is
// made of other settings' values (Setting.derived: --shared-store-id, the
// ID --shared-store's bucket and prefix give it) has that value.
func (l *Loaded) Values() []Value {
	raw := func(name string) string { return l.raw[name] }
	out := make([]Value, 0, len(l.order))
	for _, s := range l.order {
		v := Value{Setting: s, Value: l.shown[s.Name], Source: l.Sources[s.Name]}
		v.Pending, v.HasPending = l.pending[s.Name]
		if v.Value == "" && s.derived != nil {
			v.Value = s.derived(raw)
		}
		out = append(out, v)
	}
	return out
}

// Changed are the settings whose value in next differs from l's.
func (l *Loaded) Changed(next *Loaded) []*Setting {
	var out []*Setting
	for _, s := range l.order {
		if l.raw[s.Name] != next.raw[s.Name] {
			out = append(out, s)
		}
	}
	return out
}

// An Effective is a command's configuration in effect: the values, the
// file they were read from and where each came from.
type Effective struct {
	Config Config
	*Loaded
}

// keep is next with the values of e for the settings in kept: those that
// changed in the file but cannot change while serving, each with the
// value next gives it pending (Value.Pending).
func (e *Effective) keep(next *Effective, kept []*Setting) (*Effective, error) {
	out := &Effective{Config: next.Config, Loaded: &Loaded{File: next.File, Sources: map[string]Source{},
		raw: map[string]string{}, shown: map[string]string{}, order: next.order}}
	for k, v := range next.Sources {
		out.Sources[k] = v
	}
	for _, s := range next.order {
		out.raw[s.Name], out.shown[s.Name] = next.raw[s.Name], next.shown[s.Name]
	}
	fs := flag.NewFlagSet("keep", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, s := range kept {
		s.Register(fs, &out.Config)
		if err := fs.Set(s.Name, e.raw[s.Name]); err != nil {
			return nil, fmt.Errorf("--%s: %w", s.Name, err)
		}
		out.raw[s.Name], out.shown[s.Name], out.Sources[s.Name] = e.raw[s.Name], e.shown[s.Name], e.Sources[s.Name]
	}
	out.pending = map[string]string{}
	for _, c := range e.changes(next.Loaded, kept) {
		out.pending[c.Setting.Name] = c.New
	}
	// A setting left empty whose default is made of other settings'
	// values (Setting.derived) is pending as a restart puts it in force:
	// the value next's make when next leaves it empty, and so too when
	// it is left empty in both but the settings it is made of wait for
	// the restart (the value in force is made of theirs in force, Values).
	inForce := func(name string) string { return out.raw[name] }
	after := func(name string) string { return next.raw[name] }
	for _, s := range next.order {
		if s.derived == nil || next.raw[s.Name] != "" {
			continue
		}
		_, isPending := out.pending[s.Name]
		if v := s.derived(after); isPending || (out.raw[s.Name] == "" && v != s.derived(inForce)) {
			out.pending[s.Name] = v
		}
	}
	if len(out.pending) == 0 {
		out.pending = nil
	}
	return out, nil
}

// Names are the names of settings.
func Names(settings []*Setting) []string {
	out := make([]string, 0, len(settings))
	for _, s := range settings {
		out = append(out, s.Name)
	}
	return out
}

// AllNames are the names of every setting of the table.
func AllNames() []string { return Names(Table) }

// LiveOnly splits settings into those a reload puts in force (Live) and
// those that need a restart.
func LiveOnly(settings []*Setting) (live, restart []*Setting) {
	for _, s := range settings {
		if s.Live {
			live = append(live, s)
		} else {
			restart = append(restart, s)
		}
	}
	return live, slices.Clip(restart)
}

// Locate adds to err, a check of the values that names settings by their
// flags (Config.Validate's), where the configuration file sets each of
// them, so that a value from the file is found by its line too, and the
// environment variables that set the others (fromEnv).
func (l *Loaded) Locate(err error) error {
	if err == nil {
		return err
	}
	if errs := unjoin(err); len(errs) > 1 {
		for i, e := range errs {
			errs[i] = l.Locate(e)
		}
		return JoinProblems(errs...)
	}
	var where []string
	for _, s := range l.named(err.Error()) {
		if l.Sources[s.Name] != FromFile {
			continue
		}
		_, rng, _ := l.File.Value(s.Name)
		where = append(where, fmt.Sprintf("%s at %s", s.Attribute(), rng.String()))
	}
	env := l.fromEnv(err.Error())
	if len(where) == 0 {
		if env == "" {
			return err
		}
		return fmt.Errorf("%w%s", err, env)
	}
	return fmt.Errorf("%w (configuration file: %s)%s", err, strings.Join(where, ", "), env)
}

// fromEnv names, for a check of the values whose message is msg, the
// environment variables that set the settings it names: " (from the
// environment: TFMIRROR_X)", "" when none did. The message names the
// flags, which the command line may not hold.
func (l *Loaded) fromEnv(msg string) string {
	var names []string
	for _, s := range l.named(msg) {
		if l.Sources[s.Name] == FromEnv {
			names = append(names, EnvName(s.Name))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (from the environment: " + strings.Join(names, ", ") + ")"
}

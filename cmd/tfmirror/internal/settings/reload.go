package settings

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"
)

// A Hook reads a part of the configuration file that is not a setting of
// the table (the policy block), at start, on reload and in config check.
// Validate decodes and checks that part of f (nil: no configuration file)
// and changes nothing; it returns the function that puts what it decoded
// in force, which is called only once every hook and every setting of the
// same file were accepted. A diagnostic of error severity refuses the
// whole file.
type Hook struct {
	Name     string
	Validate func(f *File) (apply func(), diags hcl.Diagnostics)
	// Lines, when set, lists the part of f the hook reads, one line per
	// entry (the policy's rules, as config check lists them), for a
	// reload to say what it added and removed. Called only on a file
	// Validate accepted (or nil).
	Lines func(f *File) []Line
}

// Line is one entry of a hook's part: Text as shown, Key what is
// compared (Text without where in the file it is, so that a rule that
// only moved is not a change).
type Line struct{ Key, Text string }

// CheckHooks runs every hook's Validate on f and returns their apply
// functions, or a *FileError with all their errors.
func CheckHooks(hooks []Hook, f *File) ([]func(), error) {
	var applies []func()
	var all hcl.Diagnostics
	for _, h := range hooks {
		apply, diags := h.Validate(f)
		all = append(all, diags...)
		if apply != nil {
			applies = append(applies, apply)
		}
	}
	if all.HasErrors() {
		path := ""
		if f != nil {
			path = f.Path
		}
		return nil, &FileError{Path: path, Diags: all}
	}
	return applies, nil
}

// ReloadMetrics counts reloads of the configuration file by outcome,
// "applied" or "refused" (*metrics.Metrics implements it).
type ReloadMetrics interface {
	ConfigReload(outcome string)
}

// ReloaderConfig is what a Reloader needs.
type ReloaderConfig struct {
	// Load reads the configuration again: the same flags and environment,
	// the file as it is now, checked as at start.
	Load func() (*Effective, error)
	// Apply puts in force the Live settings of next that differ from
	// those of cur (their names in changed); or, when one of them cannot
	// be put in force (the certificate a new public URL needs cannot be
	// issued), it puts none of them in force and says why: the reload is
	// then refused, as one of a file that does not validate is, and the
	// configuration in force stays. It returns what the operator should
	// know of the values it put in force (a public URL the operator's
	// certificate does not name), which the reload logs and returns
	// among its warnings.
	Apply func(cur, next *Effective, changed []*Setting) (warnings []string, err error)
	// Hooks read the file's parts that are not settings (the policy).
	Hooks   []Hook
	Metrics ReloadMetrics
	Logger  *slog.Logger
}

// A Reloader holds the configuration in force and puts a new one in
// force when asked (on SIGHUP): the file is read again and refused whole
// when it does not parse or validate, a hook refuses it or a Live
// setting cannot be put in force (ReloaderConfig.Apply); else the
// Live settings that changed and the hooks' parts are put in force, and
// the settings that cannot change while serving keep their values, with
// a warning that they need a restart.
type Reloader struct {
	cfg ReloaderConfig
	mu  sync.Mutex // one reload at a time
	cur atomic.Pointer[Effective]
}

// NewReloader returns a Reloader with initial in force, and puts the
// hooks' parts of its file in force; it fails when a hook refuses it.
func NewReloader(initial *Effective, cfg ReloaderConfig) (*Reloader, error) {
	if cfg.Load == nil || cfg.Apply == nil || cfg.Metrics == nil || cfg.Logger == nil {
		return nil, errors.New("settings: a Reloader needs Load, Apply, Metrics and a Logger")
	}
	applies, err := CheckHooks(cfg.Hooks, initial.File)
	if err != nil {
		return nil, err
	}
	for _, apply := range applies {
		apply()
	}
	r := &Reloader{cfg: cfg}
	r.cur.Store(initial)
	return r, nil
}

// Current is the configuration in force.
func (r *Reloader) Current() *Effective { return r.cur.Load() }

// Change is a setting whose value a reload found changed: Old and New
// in the flag's syntax, a secret's redacted.
type Change struct {
	Setting  *Setting
	Old, New string
}

// PartChange is what a reload changed of a hook's part (Hook.Lines):
// the lines added and removed.
type PartChange struct {
	Name           string
	Added, Removed []string
}

// Reloaded is what a reload did: the file read, the Live settings put in
// force (Applied), the settings changed that need a restart and keep
// their value in force (Restart), and the hooks' parts that changed.
type Reloaded struct {
	File    string
	Applied []Change
	Restart []Change
	Parts   []PartChange
	// Warnings are the file's warnings (a value a flag or the
	// environment overrides), as FormatDiagnostic writes them, then
	// those of the values put in force (ReloaderConfig.Apply's).
	Warnings []string
}

// Changed names what the reload put in force as the file names it: the
// Live settings' attributes, then the hooks' parts.
func (r Reloaded) Changed() []string {
	out := make([]string, 0, len(r.Applied)+len(r.Parts))
	for _, c := range r.Applied {
		out = append(out, c.Setting.Attribute())
	}
	for _, p := range r.Parts {
		out = append(out, p.Name)
	}
	return out
}

// Reload reads the configuration again and puts it in force, or refuses
// it whole: the refusal is logged, counted and returned. It returns what
// changed.
func (r *Reloader) Reload() (Reloaded, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.cur.Load()
	res, err := r.reload(cur)
	if err != nil {
		r.cfg.Logger.Error("configuration file refused; the configuration in force stays", "file", configPath(cur), "error", err.Error())
		r.cfg.Metrics.ConfigReload("refused")
		return Reloaded{File: configPath(cur)}, err
	}
	return res, nil
}

// reload reads and checks the configuration, then puts it in force.
func (r *Reloader) reload(cur *Effective) (Reloaded, error) {
	next, err := r.cfg.Load()
	if err != nil {
		return Reloaded{}, err
	}
	if err := next.Locate(next.Config.Validate()); err != nil {
		return Reloaded{}, err
	}
	applies, err := CheckHooks(r.cfg.Hooks, next.File)
	if err != nil {
		return Reloaded{}, err
	}
	live, restart := LiveOnly(cur.Changed(next.Loaded))
	res := Reloaded{File: configPath(next), Applied: cur.changes(next.Loaded, live), Restart: cur.changes(next.Loaded, restart),
		Parts: partChanges(r.cfg.Hooks, cur.File, next.File)}
	if next, err = cur.keep(next, restart); err != nil {
		return Reloaded{}, err
	}
	warnings, err := r.cfg.Apply(cur, next, live)
	if err != nil {
		return Reloaded{}, next.Locate(err)
	}
	for _, w := range next.File.warnings() {
		r.cfg.Logger.Warn("configuration file: "+FormatDiagnostic(w), "file", configPath(next))
		res.Warnings = append(res.Warnings, FormatDiagnostic(w))
	}
	for _, w := range warnings {
		r.cfg.Logger.Warn(w, "file", configPath(next))
		res.Warnings = append(res.Warnings, w)
	}
	if len(restart) > 0 {
		r.cfg.Logger.Warn("settings changed in the configuration file take effect only after a restart; their values in force stay",
			"settings", attributes(restart))
	}
	for _, apply := range applies {
		apply()
	}
	r.cur.Store(next)
	r.cfg.Metrics.ConfigReload("applied")
	r.cfg.Logger.Info("configuration file reloaded", "file", configPath(next), "changed", res.Changed())
	return res, nil
}

// attributes are the file's names of settings.
func attributes(settings []*Setting) []string {
	out := make([]string, 0, len(settings))
	for _, s := range settings {
		out = append(out, s.Attribute())
	}
	return out
}

// changes are the settings of changed with their values in l and next.
// A value that changed only in what is not shown (a proxy's password)
// says so, where the two values shown were the same.
func (l *Loaded) changes(next *Loaded, changed []*Setting) []Change {
	out := make([]Change, 0, len(changed))
	for _, s := range changed {
		c := Change{Setting: s, Old: l.shown[s.Name], New: next.shown[s.Name]}
		if c.Old == c.New {
			c.New += " (what is not shown of it changed)"
		}
		out = append(out, c)
	}
	return out
}

// partChanges are the hooks' parts that differ between the files cur and
// next (either may be nil): the lines of each added and removed, each
// line counted as often as it occurs.
func partChanges(hooks []Hook, cur, next *File) []PartChange {
	var out []PartChange
	for _, h := range hooks {
		if h.Lines == nil {
			continue
		}
		old, now := h.Lines(cur), h.Lines(next)
		pc := PartChange{Name: h.Name, Added: minus(now, old), Removed: minus(old, now)}
		if len(pc.Added) > 0 || len(pc.Removed) > 0 {
			out = append(out, pc)
		}
	}
	return out
}

// minus is the texts of the lines of a whose keys are not in b, in a's
// order, as multisets.
func minus(a, b []Line) []string {
	left := map[string]int{}
	for _, l := range b {
		left[l.Key]++
	}
	var out []string
	for _, l := range a {
		if left[l.Key] > 0 {
			left[l.Key]--
			continue
		}
		out = append(out, l.Text)
	}
	return out
}

func (f *File) warnings() hcl.Diagnostics {
	if f == nil {
		return nil
	}
	return f.Warnings
}

func configPath(e *Effective) string {
	if e == nil || e.File == nil {
		return ""
	}
	return e.File.Path
}

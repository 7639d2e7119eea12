package settings

import (
	"flag"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// nonDefault is a valid value of kind that differs from def.
func nonDefault(kind, def string) string {
	v := map[string]string{"string": "x-test", "bool": "true", "int": "7", "duration": "7m0s",
		"size": "7MiB", "days": "7d", "list": "a.example,b.example"}[kind]
	if v == def {
		v = map[string]string{"int": "8", "duration": "8m0s", "size": "8MiB", "days": "8d"}[kind]
	}
	return v
}

// allSettings registers every setting on a new flag set bound to c.
func allSettings(c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, s := range Table {
		s.Register(fs, c)
	}
	return fs
}

// TestSettingsTable checks the table itself: each setting has a name of
// its own, a group of the docs, a default the docs show truly, and a field
// of its own; and each can be set by its flag and by its environment
// variable.
func TestSettingsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Table {
		if seen[s.Name] {
			t.Errorf("setting %s is in the table twice", s.Name)
		}
		seen[s.Name] = true
		if !regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`).MatchString(s.Name) {
			t.Errorf("setting %q: not a flag name", s.Name)
		}
		if !slices.Contains(Groups, s.Group) {
			t.Errorf("setting %s: group %q is not one of the docs' groups", s.Name, s.Group)
		}
		if s.Help == "" {
			t.Errorf("setting %s has no help", s.Name)
		}
		if s.DocDefault != "" && !s.bind.zero {
			t.Errorf("setting %s: DocDefault %q hides its default", s.Name, s.DocDefault)
		}
		if strings.Contains(s.Doc+s.Help, "|") {
			t.Errorf("setting %s: a | would break the docs' table", s.Name)
		}
	}
	if len(Table) < 50 {
		t.Fatalf("only %d settings", len(Table))
	}

	for _, s := range Table {
		t.Run(s.Name, func(t *testing.T) {
			var c Config
			fs := allSettings(&c)
			defaults := map[string]string{}
			fs.VisitAll(func(f *flag.Flag) { defaults[f.Name] = f.Value.String() })
			v := nonDefault(s.bind.kind, defaults[s.Name])
			if v == "" {
				t.Fatalf("kind %q", s.bind.kind)
			}
			for _, how := range []string{"flag", "environment"} {
				var c Config
				fs := allSettings(&c)
				args, env := []string{"--" + s.Name + "=" + v}, map[string]string{}
				if how == "environment" {
					args, env = nil, map[string]string{s.Env(): v}
				}
				if err := ParseWithEnv(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
					t.Fatalf("%s: %v", how, err)
				}
				// Only this setting's value changed: it has a field of its own.
				var changed []string
				fs.VisitAll(func(f *flag.Flag) {
					if f.Value.String() != defaults[f.Name] {
						changed = append(changed, f.Name)
					}
				})
				if !slices.Equal(changed, []string{s.Name}) {
					t.Errorf("set by %s to %q, the settings that changed are %v", how, v, changed)
				}
				var plain Config
				allSettings(&plain)
				if reflect.DeepEqual(c, plain) {
					t.Errorf("set by %s, the configuration is the default one", how)
				}
			}
		})
	}
}

// TakeGiven copies, for every setting of the table, exactly the flags
// given on the command line into the Config the environment and the
// file made, leaving the others as they were.
func TestTakeGivenCopiesOnlyWhatWasGiven(t *testing.T) {
	for _, s := range Table {
		t.Run(s.Name, func(t *testing.T) {
			var own Config
			fs := allSettings(&own)
			def := fs.Lookup(s.Name).Value.String()
			v := nonDefault(s.Kind(), def)
			if err := fs.Parse([]string{"--" + s.Name + "=" + v}); err != nil {
				t.Fatal(err)
			}
			var before Config
			bfs := allSettings(&before) // the defaults, as a loaded Config holds them
			dst := before
			given := TakeGiven(fs, own, &dst, Names(Table)...)
			if !slices.Equal(given, []string{"--" + s.Name}) {
				t.Errorf("given: %q, want --%s", given, s.Name)
			}
			// dst now reads, through its flag, what was given.
			var after Config
			afs := allSettings(&after)
			after = dst
			if got := afs.Lookup(s.Name).Value.String(); got != fs.Lookup(s.Name).Value.String() {
				t.Errorf("--%s=%s taken: dst holds %q", s.Name, v, got)
			}
			for _, o := range Table {
				if o.Name != s.Name && afs.Lookup(o.Name).Value.String() != bfs.Lookup(o.Name).Value.String() {
					t.Errorf("--%s not given, yet taken: %q, was %q", o.Name, afs.Lookup(o.Name).Value.String(), bfs.Lookup(o.Name).Value.String())
				}
			}
		})
	}
}

// A name not registered on the flag set is a programming error, not a
// flag silently never taken.
func TestTakeGivenPanicsOnAnUnregisteredName(t *testing.T) {
	var own Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	Add(fs, &own, "keep-versions")
	defer func() {
		if recover() == nil {
			t.Error("TakeGiven of a setting not on the flag set did not panic")
		}
	}()
	TakeGiven(fs, own, &Config{}, "keep-versions", "pins-dir")
}

// TestDocsSayWhatASettingNeeds: a setting Config.Validate refuses
// without another ("--A needs --B", "must be given together") or with
// another ("mutually exclusive") says so in docs/configuration.md, in its
// own row or in the other's, so that an operator is not refused at start
// by a rule the guide never gave (--url-signing-key-file without
// --auth-tokens-file, --insecure-http with --tls-cert).
func TestDocsSayWhatASettingNeeds(t *testing.T) {
	src, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	pairs := regexp.MustCompile(`"--([a-z0-9-]+) (?:needs --([a-z0-9-]+)|and --([a-z0-9-]+) (?:are mutually exclusive|must be given together))`).FindAllStringSubmatch(string(src), -1)
	if len(pairs) < 3 {
		t.Fatalf("found %d rules of the form --A needs --B in config.go; the pattern reads them wrong", len(pairs))
	}
	names := func(s *Setting, other string) bool {
		return strings.Contains(s.Doc, "--"+other) || strings.Contains(s.Doc, "`"+strings.ReplaceAll(other, "-", "_")+"`")
	}
	for _, p := range pairs {
		a, b := Named(p[1]), Named(p[2]+p[3]) // each a setting of the table, or Named panics
		if !names(a, b.Name) && !names(b, a.Name) {
			t.Errorf("%s, but neither's doc names the other:\n  %s: %s\n  %s: %s", strings.Trim(p[0], `"`), a.Name, a.Doc, b.Name, b.Doc)
		}
	}
}

// TestOriginRetriesSayWhichStatusesAreRetried: the origin client retries
// 429 and every 5xx but 501, which says the origin does not do what was
// asked, not that it failed (discovery.retryableStatus); --help said
// "5xx" whole, where docs/configuration.md names the exception.
func TestOriginRetriesSayWhichStatusesAreRetried(t *testing.T) {
	s := Named("origin-retries")
	for what, text := range map[string]string{"--help": s.Help, "docs/configuration.md": s.Doc} {
		if !strings.Contains(text, "5xx other than 501") {
			t.Errorf("%s of --origin-retries does not name the 5xx not retried (501): %s", what, text)
		}
	}
}

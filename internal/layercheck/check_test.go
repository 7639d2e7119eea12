package layercheck

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// testTable is a small table of the real one's shape.
const testTable = `
# a comment
layer domain  nouns
    nouns
layer helpers  leaves
    internal/leaf
layer engine
    engine
    internal/misplaced
layer frontdoors
    door  a comment
layer tests
    internal/testrig/rig
    internal/oldrig
forbid door -> internal/leaf  doors take no leaves
known door -> internal/leaf  #1: to be removed
`

// TestCheckFindsEachBrokenRule runs the check on import graphs that each
// break one rule: each must be reported as that arrow, and a graph that
// keeps the rules reports nothing.
func TestCheckFindsEachBrokenRule(t *testing.T) {
	tb, err := parseTable(testTable)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Collect(maps.Keys(tb.known)); !slices.Equal(got, []arrow{{"door", "internal/leaf"}}) {
		t.Fatalf("known arrows %v", got)
	}
	// good is a graph that keeps every rule; each case adds to it.
	good := func() []pkgImports {
		return []pkgImports{
			{path: "nouns"},
			{path: "internal/leaf", imports: []string{"nouns"}},
			{path: "engine", imports: []string{"internal/leaf", "nouns"}, tests: []string{"internal/testrig/rig", "nouns"}},
			{path: "internal/misplaced"},
			{path: "door", imports: []string{"engine", "nouns"}, tests: []string{"internal/leaf", "internal/testrig/rig"}},
			{path: "internal/testrig/rig", imports: []string{"engine", "door"}},
			{path: "internal/oldrig"},
		}
	}
	set := func(ps []pkgImports, path string, f func(*pkgImports)) []pkgImports {
		for i := range ps {
			if ps[i].path == path {
				f(&ps[i])
			}
		}
		return ps
	}
	misplaced := "internal/ holds leaf helpers and test rigs, and internal/misplaced is in layer engine"
	for _, c := range []struct {
		name     string
		pkgs     []pkgImports
		want     []arrow  // the arrows reported
		problems []string // what each problem starts with, after misplaced
		reason   string   // a word the first arrow's reason holds
	}{
		{name: "kept", pkgs: good()},
		{
			name: "upward",
			pkgs: set(good(), "engine", func(p *pkgImports) { p.imports = append(p.imports, "door") }),
			want: []arrow{{"engine", "door"}}, reason: "upward",
		},
		{
			name: "domain imports the module",
			pkgs: set(good(), "nouns", func(p *pkgImports) { p.imports = []string{"internal/leaf"} }),
			want: []arrow{{"nouns", "internal/leaf"}}, reason: "imports nothing",
		},
		{
			name: "production imports a test rig",
			pkgs: set(good(), "door", func(p *pkgImports) { p.imports = append(p.imports, "internal/testrig/rig") }),
			want: []arrow{{"door", "internal/testrig/rig"}}, reason: "binary would link",
		},
		{
			name: "forbidden arrow",
			pkgs: set(good(), "door", func(p *pkgImports) { p.imports = append(p.imports, "internal/leaf") }),
			want: []arrow{{"door", "internal/leaf"}}, reason: "forbidden",
		},
		{
			name: "test imports upward",
			pkgs: set(good(), "engine", func(p *pkgImports) { p.tests = append(p.tests, "door") }),
			want: []arrow{{"engine (tests)", "door"}}, reason: "tests of engine",
		},
		{
			name:     "a test rig outside internal/testrig/",
			pkgs:     set(good(), "door", func(p *pkgImports) { p.tests = append(p.tests, "internal/oldrig") }),
			problems: []string{"the tests of door import the test rig internal/oldrig, which is outside internal/testrig/"},
		},
		{
			name:     "package missing from the table",
			pkgs:     append(good(), pkgImports{path: "retention", imports: []string{"engine"}}),
			problems: []string{"package retention is not in the layer table: add it to internal/layercheck/layers.txt"},
		},
		{
			name:     "listed package gone",
			pkgs:     slices.DeleteFunc(good(), func(p pkgImports) bool { return p.path == "door" }),
			problems: []string{"layers.txt lists door, which is not a package"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad, problems := tb.check(c.pkgs)
			got := slices.SortedFunc(maps.Keys(bad), func(a, b arrow) int { return strings.Compare(a.String(), b.String()) })
			if !slices.Equal(got, c.want) {
				t.Errorf("arrows %v, want %v (%v)", got, c.want, bad)
			}
			if len(c.want) > 0 && !strings.Contains(bad[c.want[0]], c.reason) {
				t.Errorf("reason %q, want it to say %q", bad[c.want[0]], c.reason)
			}
			want := append([]string{misplaced}, c.problems...)
			slices.Sort(want)
			if len(problems) != len(want) {
				t.Fatalf("problems %q, want ones starting with %q", problems, want)
			}
			for i := range want {
				if !strings.HasPrefix(problems[i], want[i]) {
					t.Errorf("problem %q, want it to start with %q", problems[i], want[i])
				}
			}
		})
	}
}

// TestKnownListMustBeExact: a violation not listed fails, and so does a
// listed exception that is no longer a violation.
func TestKnownListMustBeExact(t *testing.T) {
	a, b := arrow{"proxy", "discovery"}, arrow{"cache", "internal/testhooks"}
	for _, c := range []struct {
		name         string
		found, known map[arrow]string
		want         []string
	}{
		{name: "exact", found: map[arrow]string{a: "x"}, known: map[arrow]string{a: "#1"}},
		{name: "new violation", found: map[arrow]string{a: "x", b: "upward: y"}, known: map[arrow]string{a: "#1"},
			want: []string{"cache -> internal/testhooks: upward: y"}},
		{name: "exception fixed but listed", found: map[arrow]string{}, known: map[arrow]string{a: "#1"},
			want: []string{"proxy -> discovery is listed as a known exception in t.txt (#1) but is no longer one: delete its line"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := knownDiff("t.txt", c.found, c.known); !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestParseTableRefuses: a table the check could misread is refused.
func TestParseTableRefuses(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"package twice", "layer domain\n  a\nlayer helpers\n  a\nlayer tests\n", "a listed twice"},
		{"package before a layer", "  a\nlayer domain\n", "before any layer"},
		{"no tests layer", "layer domain\nlayer helpers\n", `no layer "tests"`},
		{"tests not on top", "layer domain\nlayer tests\nlayer helpers\n", "on top"},
		{"arrow without a reason", "layer domain\nlayer helpers\nlayer tests\nknown a -> b\n", "say why"},
		{"malformed arrow", "layer domain\nlayer helpers\nlayer tests\nforbid a b  why\n", "want FROM -> TO"},
		{"unknown word", "layer domain\nlayer helpers\nlayer tests\nallow a -> b  why\n", "unknown line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseTable(c.text)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// TestTestRigsFolderHoldsRigsOnly: a package under internal/testrig/ in
// any layer but the tests is a problem.
func TestTestRigsFolderHoldsRigsOnly(t *testing.T) {
	tb, err := parseTable("layer domain\n    nouns\nlayer helpers\nlayer engine\n    engine\nlayer tests\n    internal/testrig/rig\n    internal/testrig/helper  misfiled\n")
	if err != nil {
		t.Fatal(err)
	}
	_, problems := tb.check([]pkgImports{{path: "nouns"}, {path: "engine"}, {path: "internal/testrig/rig"}, {path: "internal/testrig/helper"}})
	if len(problems) != 0 {
		t.Fatalf("rigs in their folder: %q", problems)
	}
	tb.layerOf["internal/testrig/helper"] = slices.Index(tb.layers, "engine")
	_, problems = tb.check([]pkgImports{{path: "nouns"}, {path: "engine"}, {path: "internal/testrig/rig"}, {path: "internal/testrig/helper"}})
	want := "internal/testrig/ holds test rigs only, and internal/testrig/helper is in layer engine"
	if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
		t.Errorf("problems %q, want one starting with %q", problems, want)
	}
}

package layercheck

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, from this directory.
const root = "../.."

// arrow is an import: from imports to (paths inside the repository).
type arrow struct{ from, to string }

func (a arrow) String() string { return a.from + " -> " + a.to }

// parseArrow reads "FROM -> TO  comment".
func parseArrow(s string) (arrow, string, error) {
	from, rest, ok := strings.Cut(s, " -> ")
	to, comment, _ := strings.Cut(strings.TrimSpace(rest), " ")
	from = strings.TrimSpace(from)
	if !ok || from == "" || to == "" || strings.Contains(from, " ") {
		return arrow{}, "", fmt.Errorf("want FROM -> TO, got %q", s)
	}
	return arrow{from, to}, strings.TrimSpace(comment), nil
}

// table is layers.txt, parsed.
type table struct {
	layers  []string       // names, bottom first
	layerOf map[string]int // package -> index into layers
	forbid  map[arrow]string
	known   map[arrow]string
}

// The layers the rules name.
const (
	domainLayer  = "domain"  // imports nothing of the module
	helpersLayer = "helpers" // the highest layer internal/ may hold, but tests
	testsLayer   = "tests"   // test rigs: only tests and each other import them
)

func parseTable(text string) (*table, error) {
	tb := &table{layerOf: map[string]int{}, forbid: map[arrow]string{}, known: map[arrow]string{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d: %s", n, fmt.Sprintf(format, args...))
		}
		if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			if len(tb.layers) == 0 {
				return nil, fail("package %q before any layer", trimmed)
			}
			pkg, _, _ := strings.Cut(trimmed, " ")
			if l, dup := tb.layerOf[pkg]; dup {
				return nil, fail("%s listed twice (already in layer %s)", pkg, tb.layers[l])
			}
			tb.layerOf[pkg] = len(tb.layers) - 1
			continue
		}
		word, rest, _ := strings.Cut(trimmed, " ")
		switch word {
		case "layer":
			name, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
			if name == "" || slices.Contains(tb.layers, name) {
				return nil, fail("layer %q: empty or repeated", name)
			}
			tb.layers = append(tb.layers, name)
		case "forbid", "known":
			a, why, err := parseArrow(rest)
			if err != nil {
				return nil, fail("%v", err)
			}
			if why == "" {
				return nil, fail("%s %v: say why", word, a)
			}
			m := map[string]map[arrow]string{"forbid": tb.forbid, "known": tb.known}[word]
			if _, dup := m[a]; dup {
				return nil, fail("%s %v listed twice", word, a)
			}
			m[a] = why
		default:
			return nil, fail("unknown line %q", trimmed)
		}
	}
	for _, name := range []string{domainLayer, helpersLayer, testsLayer} {
		if !slices.Contains(tb.layers, name) {
			return nil, fmt.Errorf("no layer %q", name)
		}
	}
	if tb.layers[0] != domainLayer || tb.layers[len(tb.layers)-1] != testsLayer {
		return nil, fmt.Errorf("layers %v: want %s at the bottom and %s on top", tb.layers, domainLayer, testsLayer)
	}
	return tb, sc.Err()
}

// pkgImports is one package's imports of the repository's packages.
type pkgImports struct {
	path    string   // inside the repository
	imports []string // of its production files
	tests   []string // of its test files, in the package or beside it
}

// check returns the arrows that break the table's rules, each with why,
// and the problems no "known" line may excuse (a package missing from
// the table, a listed package that does not exist).
func (tb *table) check(pkgs []pkgImports) (map[arrow]string, []string) {
	var problems []string
	exists := map[string]bool{}
	for _, p := range pkgs {
		exists[p.path] = true
		if _, ok := tb.layerOf[p.path]; !ok {
			problems = append(problems, fmt.Sprintf("package %s is not in the layer table: add it to internal/layercheck/layers.txt, in its layer", p.path))
		}
	}
	for pkg := range tb.layerOf {
		if !exists[pkg] {
			problems = append(problems, fmt.Sprintf("layers.txt lists %s, which is not a package of the repository: remove it (or fix its path)", pkg))
		}
	}
	for a := range tb.forbid {
		if _, ok := tb.layerOf[a.from]; !ok {
			problems = append(problems, fmt.Sprintf("forbid %v: %s is not in the table", a, a.from))
		}
	}
	tests := len(tb.layers) - 1
	helpers := slices.Index(tb.layers, helpersLayer)
	bad := map[arrow]string{}
	for _, p := range pkgs {
		from, ok := tb.layerOf[p.path]
		if !ok {
			continue
		}
		if strings.HasPrefix(p.path, "internal/") && from > helpers && from != tests {
			problems = append(problems, fmt.Sprintf("internal/ holds leaf helpers and test rigs, and %s is in layer %s: move it beside its layer's packages", p.path, tb.layers[from]))
		}
		if strings.HasPrefix(p.path, testRigs) && from != tests {
			problems = append(problems, fmt.Sprintf("%s holds test rigs only, and %s is in layer %s: move it out", testRigs, p.path, tb.layers[from]))
		}
		for _, imp := range p.tests {
			if l, ok := tb.layerOf[imp]; ok && l == tests && strings.HasPrefix(imp, "internal/") && !strings.HasPrefix(imp, testRigs) {
				problems = append(problems, fmt.Sprintf("the tests of %s import the test rig %s, which is outside %s: move it there, so that internal/ shows the production helpers apart", p.path, imp, testRigs))
			}
		}
		for _, imp := range p.imports {
			to, ok := tb.layerOf[imp]
			a := arrow{p.path, imp}
			switch {
			case !ok:
				// Reported above as missing from the table.
			case from == 0:
				bad[a] = fmt.Sprintf("%s is in layer %s, which imports nothing of the module", p.path, domainLayer)
			case to == tests && from != tests:
				bad[a] = fmt.Sprintf("%s, a production package (layer %s), imports the test rig %s: the binary would link it", p.path, tb.layers[from], imp)
			case to > from:
				bad[a] = fmt.Sprintf("upward: %s (layer %s) imports %s (layer %s)", p.path, tb.layers[from], imp, tb.layers[to])
			case tb.forbid[a] != "":
				bad[a] = "forbidden: " + tb.forbid[a]
			}
		}
		for _, imp := range p.tests {
			to, ok := tb.layerOf[imp]
			if ok && to > from && to != tests {
				bad[arrow{p.path + " (tests)", imp}] = fmt.Sprintf("upward: the tests of %s (layer %s) import %s (layer %s)", p.path, tb.layers[from], imp, tb.layers[to])
			}
		}
	}
	slices.Sort(problems)
	return bad, problems
}

// testRigs is where the test rigs under internal/ live: the packages
// of the tests layer that other packages' tests import.
const testRigs = "internal/testrig/"

// knownDiff reports each entry of found not listed in known (a new
// violation) and each entry of known no longer found (an exception that
// must leave its list), so the list is exactly what is still to be fixed.
func knownDiff[K comparable](file string, found, known map[K]string) []string {
	var msgs []string
	for k, why := range found {
		if _, ok := known[k]; !ok {
			msgs = append(msgs, fmt.Sprintf("%v: %s", k, why))
		}
	}
	for k, why := range known {
		if _, ok := found[k]; !ok {
			msgs = append(msgs, fmt.Sprintf("%v is listed as a known exception in %s (%s) but is no longer one: delete its line", k, file, why))
		}
	}
	slices.Sort(msgs)
	return msgs
}

// goList runs go list in the repository's root and returns its output.
func goList(t *testing.T, args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages: %v", err)
	}
	cmd := exec.Command(gobin, append([]string{"list"}, args...)...)
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// modulePackages lists the packages of the repository with their imports
// of the repository's packages, as go list reports them for this platform,
// and the deploy module's package, whose files only the test files are.
func modulePackages(t *testing.T) []pkgImports {
	t.Helper()
	mod := strings.TrimSpace(goList(t, "-m"))
	rel := func(paths string) []string {
		var out []string
		for _, p := range strings.Fields(paths) {
			if r, ok := strings.CutPrefix(p, mod+"/"); ok {
				out = append(out, r)
			}
		}
		return out
	}
	var pkgs []pkgImports
	out := goList(t, "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(f) != 3 {
			t.Fatalf("go list line %q", line)
		}
		path, ok := strings.CutPrefix(f[0], mod+"/")
		if !ok {
			t.Fatalf("package %s outside the module %s", f[0], mod)
		}
		tests := slices.DeleteFunc(rel(f[2]), func(p string) bool { return p == path })
		pkgs = append(pkgs, pkgImports{path: path, imports: rel(f[1]), tests: tests})
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	// deploy/ is a module of its own, with heavy dependencies of its
	// tests; its imports are read from its files.
	deploy, err := fileImports(filepath.Join(root, "deploy"), mod)
	if err != nil {
		t.Fatal(err)
	}
	return append(pkgs, deploy)
}

// readLayers reads and parses layers.txt, failing t if it cannot.
func readLayers(t *testing.T) *table {
	t.Helper()
	text, err := os.ReadFile("layers.txt")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := parseTable(string(text))
	if err != nil {
		t.Fatalf("layers.txt: %v", err)
	}
	return tb
}

func TestLayers(t *testing.T) {
	tb := readLayers(t)
	bad, problems := tb.check(modulePackages(t))
	for _, p := range problems {
		t.Error(p)
	}
	for _, m := range knownDiff("layers.txt", bad, tb.known) {
		t.Error(m)
	}
}

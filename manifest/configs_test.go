package manifest

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// requiresP is a configuration requiring acme/p with constraint.
func requiresP(constraint string) string {
	return fmt.Sprintf("terraform {\n  required_providers {\n    p = {\n      source  = \"acme/p\"\n      version = %q\n    }\n  }\n}\n", constraint)
}

// someVersions are the versions selectionsOf and takenAt select from.
func someVersions() versions.List {
	var list versions.List
	for _, v := range []string{"1.0.0", "1.5.0", "1.6.0", "1.7.0", "1.9.0", "2.0.0", "2.3.0"} {
		list = append(list, versions.MustParseVersion(v))
	}
	return list
}

// selectionsOf are the texts and the versions of someVersions each of
// spec's selections of its one provider takes.
func selectionsOf(t *testing.T, spec *Spec) []string {
	t.Helper()
	if len(spec.Providers) != 1 {
		t.Fatalf("%d providers, want 1", len(spec.Providers))
	}
	list := someVersions()
	var out []string
	for _, sel := range spec.Providers[0].Selections {
		got := "none"
		if vs := sel.Select(list); len(vs) > 0 {
			got = vs[0].String()
		}
		out = append(out, sel.Text+": "+got)
	}
	return out
}

// taken is what each selection of each of spec's providers takes of
// list, as "TYPE TEXT: VERSION" (the newest it selects, "none" for none).
func taken(spec *Spec, list versions.List) []string {
	return takenBy(spec, list, func(p addrs.Provider) string { return p.Type })
}

// takenAt is what each selection of each of spec's providers takes of
// someVersions, as "ADDRESS TEXT: VERSION".
func takenAt(spec *Spec) []string {
	return takenBy(spec, someVersions(), addrs.Provider.String)
}

// takenBy is taken with each provider named by name.
func takenBy(spec *Spec, list versions.List, name func(addrs.Provider) string) []string {
	var out []string
	for _, p := range spec.Providers {
		for _, sel := range p.Selections {
			took := "none"
			if vs := sel.Select(list); len(vs) > 0 {
				took = vs[0].String()
			}
			out = append(out, name(p.Address)+" "+sel.Text+": "+took)
		}
	}
	return out
}

// AddConfigSelections judges each configuration directory with the
// registry modules it calls as Terraform does, the constraints of all of
// them intersected: it adds the selection of that intersection, naming
// the directory, in place of the one Load gave the directory's own
// constraints alone, whose newest version Terraform does not install
// (each package's own, Load's too, stay: AddOwnSelections); nothing
// for a provider the directory's lock file locks, whose locked version
// Terraform installs; and a selection nothing meets when the directory's
// constraints and its modules' exclude each other, as terraform init
// fails there.
func TestAddConfigSelections(t *testing.T) {
	call := "module \"net\" {\n  source  = \"acme/net/aws\"\n  version = \"~> 1.0\"\n}\n"
	net := func(constraint string) func(Call) (ModuleDir, bool) {
		return func(c Call) (ModuleDir, bool) {
			if c.Module.String() != "registry.terraform.io/acme/net/aws" || c.Selection != "~> 1.0" || c.Subdir != "" {
				t.Errorf("read %+v, want acme/net/aws, ~> 1.0", c)
				return ModuleDir{}, false
			}
			dir := writeFiles(t, map[string]string{"main.tf": requiresP(constraint)})
			md, err := (&Spec{}).ReadModuleDir(context.Background(), dir, dir, "module acme/net/aws 1.0.0")
			return md, err == nil
		}
	}
	for _, tc := range []struct {
		name, root, module, lock string
		want                     []string
	}{
		{"intersected", "< 1.8.0", "!= 1.7.0", "", []string{"< 1.8.0, != 1.7.0: 1.6.0"}},
		{"module asks the same", "< 1.8.0", "< 1.8.0", "", []string{"< 1.8.0: 1.7.0"}},
		{"locked", "< 1.8.0", "!= 1.7.0", "provider \"registry.terraform.io/acme/p\" {\n  version = \"1.5.0\"\n}\n", []string{"1.5.0: 1.5.0"}},
		{"excluding each other", "~> 2.0", "< 2.0.0", "", []string{"~> 2.0, < 2.0.0: none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"main.tf": requiresP(tc.root) + call}
			if tc.lock != "" {
				files[LockFileName] = tc.lock
			}
			dir := writeFiles(t, files)
			spec, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			spec.AddConfigSelections(net(tc.module))
			if got := selectionsOf(t, spec); strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("selections %q, want %q", got, tc.want)
			}
			if sels := spec.Providers[0].Selections; tc.lock == "" && tc.root != tc.module {
				if w := sels[len(sels)-1].Where; !strings.Contains(w, filepath.Clean(dir)) {
					t.Errorf("the configuration's selection is asked by %q, which does not name %s", w, dir)
				}
			}
		})
	}
}

// A stranger's packages may call one another in a cycle, each calling
// itself at another version too, and thousands of configuration
// directories may call them: AddConfigSelections reads each distinct
// call once and gathers what a call reaches once, not again for each
// directory (which read every package of the cycle once a directory,
// hundreds of thousands of reads), and still judges each directory with
// every constraint the cycle asks.
func TestAddConfigSelectionsReadsEachCallOnce(t *testing.T) {
	const mods, dirs = 100, 500
	p, err := addrs.ParseProvider("acme/p")
	if err != nil {
		t.Fatal(err)
	}
	module := func(i int) addrs.Module {
		m, err := addrs.ParseModule(fmt.Sprintf("acme/m%d/aws", i%mods))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	reads := map[string]int{}
	read := func(c Call) (ModuleDir, bool) {
		reads[fmt.Sprint(c.Module, "//", c.Subdir, " ", c.Selection)]++
		var i int
		if _, err := fmt.Sscanf(c.Module.Name, "m%d", &i); err != nil {
			t.Fatal(err)
		}
		constraint := fmt.Sprintf("!= 1.0.%d", i)
		set, err := parseConstraint(constraint)
		if err != nil {
			t.Fatal(err)
		}
		return ModuleDir{
			Requires: []Requirement{{Provider: p, Constraints: []string{constraint}, Exact: set}},
			Calls: []Call{
				{Module: module(i + 1), Selection: "1.0.0"}, // the next, the last calling the first
				{Module: c.Module, Selection: c.Selection + ".x"},
			},
		}, len(c.Selection) < 12 // itself, at a few other versions
	}
	spec := &Spec{}
	for d := range dirs {
		spec.Configs = append(spec.Configs, &Config{Dir: fmt.Sprintf("/configs/%d", d), Calls: []Call{{Module: module(0), Selection: "1.0.0"}}})
	}
	spec.AddConfigSelections(read)
	for k, n := range reads {
		if n > 1 {
			t.Fatalf("call %v read %d times, want once", k, n)
		}
	}
	if len(spec.Providers) != 1 || len(spec.Providers[0].Selections) != dirs {
		t.Fatalf("providers %+v, want acme/p with a selection a directory", spec.Providers)
	}
	var list versions.List
	for i := range mods + 1 {
		list = append(list, versions.MustParseVersion(fmt.Sprintf("1.0.%d", i)))
	}
	for _, sel := range spec.Providers[0].Selections {
		got := sel.Select(list)
		if len(got) != 1 || got[0].String() != fmt.Sprintf("1.0.%d", mods) {
			t.Fatalf("%s (%s) selects %v, want 1.0.%d: every version below is excluded by a module of the cycle", sel.Text, sel.Where, got, mods)
		}
		if want := fmt.Sprintf("and %d more", mods-maxSelectionConstraints); !strings.Contains(sel.Text, want) {
			t.Fatalf("selection %q, want %q", sel.Text, want)
		}
	}
}

// What the registry modules a thousand directories call ask of a
// provider, thousands of constraints, is one set their selections share,
// not a copy in each directory's selection of the set of every
// constraint (which held a thousand directories times the constraints).
func TestAddConfigSelectionsSharesWhatModulesAsk(t *testing.T) {
	const mods, dirs = 2000, 1000
	p, err := addrs.ParseProvider("acme/p")
	if err != nil {
		t.Fatal(err)
	}
	packages := map[string]ModuleDir{}
	var root addrs.Module
	for i := range mods {
		m, err := addrs.ParseModule(fmt.Sprintf("acme/m%d/aws", i))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			root = m
		}
		constraint := fmt.Sprintf("!= 1.0.%d", i)
		set, err := parseConstraint(constraint)
		if err != nil {
			t.Fatal(err)
		}
		md := ModuleDir{Requires: []Requirement{{Provider: p, Constraints: []string{constraint}, Exact: set}}}
		if i+1 < mods {
			md.Calls = []Call{{Module: addrs.Module{Hostname: m.Hostname, Namespace: "acme", Name: fmt.Sprintf("m%d", i+1), System: "aws"}, Selection: "1.0.0"}}
		}
		packages[m.String()] = md
	}
	read := func(c Call) (ModuleDir, bool) {
		md, ok := packages[c.Module.String()]
		return md, ok
	}
	own, err := parseConstraint("< 2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	spec := &Spec{}
	for d := range dirs {
		spec.Configs = append(spec.Configs, &Config{
			Dir:      fmt.Sprintf("/configs/%d", d),
			Requires: []Requirement{{Provider: p, Constraints: []string{"< 2.0.0"}, Exact: own}},
			Calls:    []Call{{Module: root, Selection: "1.0.0"}},
		})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	spec.AddConfigSelections(read)
	runtime.ReadMemStats(&after)
	// Each directory's copy of 2,000 sets is 32 KiB; a thousand, 32 MiB.
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("judging %d directories calling one module allocated %d MiB, want less than 16", dirs, n>>20)
	}
	list := versions.List{versions.MustParseVersion("1.0.1999"), versions.MustParseVersion(fmt.Sprintf("1.0.%d", mods))}
	for _, sel := range spec.Providers[0].Selections {
		if got := sel.Select(list); len(got) != 1 || got[0].String() != fmt.Sprintf("1.0.%d", mods) {
			t.Fatalf("%s (%s) selects %v, want 1.0.%d", sel.Text, sel.Where, got, mods)
		}
	}
}

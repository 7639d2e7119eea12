package manifest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
)

// manyConstraintsFiles is a package naming one provider, hashicorp/aws,
// in n terraform blocks of its main file and n of a local module's, each
// with a version constraint: every other one "~> 5.0", the others
// ">= 5.0.I" (I from 0), so that the versions meeting them all are the
// 5.x from 5.0.(n/2-1) on.
func manyConstraintsFiles(n int) (map[string]string, []string) {
	var constraints []string
	var b strings.Builder
	for i := range n {
		c := "~> 5.0"
		if i%2 == 1 {
			c = fmt.Sprintf(">= 5.0.%d", i/2)
		}
		constraints = append(constraints, c)
		fmt.Fprintf(&b, "terraform {\n  required_providers {\n    aws = { source = \"hashicorp/aws\", version = %q }\n  }\n}\n", c)
	}
	return map[string]string{
		"main.tf":       "module \"child\" {\n  source = \"./child\"\n}\n" + b.String(),
		"child/main.tf": b.String(),
	}, append(constraints, constraints...)
}

// A stranger's package may name one provider with thousands of version
// constraints, in as many required_providers entries, of its modules and
// the local modules they call: all apply, as in Terraform, and the
// selection synced is the set meeting them all, the same set as met
// by intersecting them one at a time; a constraint repeated is one
// constraint, written once in the selection's text. Each constraint was
// intersected with those before it, copying them all, time quadratic in
// their number (BenchmarkReadModuleDirManyConstraints, in
// BENCHMARKS.md), and the selection's text repeated every constraint
// as often as it was written.
func TestReadModuleDirManyConstraints(t *testing.T) {
	const n = 400
	files, constraints := manyConstraintsFiles(n)
	dir := writeFiles(t, files)
	spec := &Spec{}
	if _, err := readAlone(spec, dir, dir, "module acme/app/aws 1.0.0"); err != nil {
		t.Fatal(err)
	}
	if len(spec.Providers) != 1 || len(spec.Providers[0].Selections) != 1 {
		t.Fatalf("providers %+v, want hashicorp/aws with one selection", spec.Providers)
	}
	sel := spec.Providers[0].Selections[0]

	want := versions.Released
	for _, c := range constraints {
		set, err := parseConstraint(c)
		if err != nil {
			t.Fatal(err)
		}
		want = versions.Intersection(want, set)
	}
	var list versions.List
	for _, s := range []string{"4.9.0", "5.0.0", "5.0.198", "5.0.199", "5.0.200", "5.7.1", "5.99.0", "6.0.0", "5.1.0-beta1"} {
		list = append(list, versions.MustParseVersion(s))
	}
	met := 0
	for _, v := range list {
		if got := sel.Set.Has(v); got != want.Has(v) {
			t.Errorf("%s: met %v, want %v as by intersecting the constraints one at a time", v, got, want.Has(v))
		} else if got {
			met++
		}
	}
	if met != 4 { // 5.0.199, 5.0.200, 5.7.1, 5.99.0
		t.Errorf("%d of the versions meet the constraints, want 4", met)
	}

	if got := strings.Count(sel.Text, "~> 5.0"); got != 1 {
		t.Errorf("the selection's text names \"~> 5.0\" %d times, want once", got)
	}
	if got := strings.Count(sel.Text, ", ") + 1; got != n/2+1 {
		t.Errorf("the selection's text names %d constraints, want the %d distinct ones", got, n/2+1)
	}
}

// BenchmarkReadModuleDirManyConstraints reads a package naming one
// provider with 2 × 10,000 version constraints (half of them one
// constraint repeated), in a module and a local module it calls.
func BenchmarkReadModuleDirManyConstraints(b *testing.B) {
	files, _ := manyConstraintsFiles(10000)
	benchmarkReadModuleDir(b, files)
}

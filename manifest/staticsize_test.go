package manifest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestStaticEvaluationBoundsValues: with --client opentofu, what a
// module's source and version are evaluated from (locals, variables,
// function calls) is bounded in size: a configuration whose locals
// double a string at each step, or call setproduct on ranges, would
// make a value of gigabytes before its source was read, and sync
// refuses it naming the file:line of the value past the bound, instead
// of running out of memory.
func TestStaticEvaluationBoundsValues(t *testing.T) {
	var doubling strings.Builder
	doubling.WriteString("locals {\n  l0 = \"0123456789abcdef\"\n")
	for i := 1; i <= 26; i++ {
		fmt.Fprintf(&doubling, "  l%d = \"${local.l%d}${local.l%d}\"\n", i, i-1, i-1)
	}
	doubling.WriteString("}\n")
	for _, tt := range []struct {
		name, locals, source, wantAt string
	}{
		{"doubling locals", doubling.String(), `substr(local.l26, 0, 0) == "" ? "hashicorp/consul/aws" : ""`, "locals.tf:"},
		{"setproduct", "locals {\n  p = setproduct(range(100), range(100), range(100))\n}\n", `length(local.p) > 0 ? "hashicorp/consul/aws" : ""`, "locals.tf:2"},
		{"join", "locals {\n  s = join(format(\"%s\", \"${local.k}${local.k}${local.k}${local.k}\"), range(1000))\n  k = \"" + strings.Repeat("k", 1<<18) + "\"\n}\n", `length(local.s) > 0 ? "hashicorp/consul/aws" : ""`, "locals.tf:2"},
		{"replace", "locals {\n  s = replace(local.k, \"\", local.k)\n  k = \"" + strings.Repeat("k", 1<<14) + "\"\n}\n", `length(local.s) > 0 ? "hashicorp/consul/aws" : ""`, "locals.tf:2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"locals.tf": tt.locals,
				"main.tf":   "module \"m\" {\n  source = " + tt.source + "\n}\n",
			})
			start := time.Now()
			_, err := LoadFor(OpenTofu, nil, dir)
			t.Logf("%v after %v", err, time.Since(start))
			if err == nil {
				t.Fatalf("a configuration evaluating a value past the bound was read")
			}
			if !strings.Contains(err.Error(), tt.wantAt) || !strings.Contains(err.Error(), fmt.Sprintf("%d bytes", maxStaticSize)) {
				t.Errorf("the refusal does not name the value's file:line (%s) and the bound: %v", tt.wantAt, err)
			}
		})
	}
}

// TestStaticEvaluationBoundsForExpressions: for expressions nested in
// one another make their elements one by one, each counted against the
// bound as it is made: one of a few lines would make millions before
// the value's size could be checked. So do those of a .tf.json file's
// template, which HCL's JSON reading parses and evaluates itself.
func TestStaticEvaluationBoundsForExpressions(t *testing.T) {
	const main = "module \"m\" {\n  source = length(local.p) > 0 ? \"hashicorp/consul/aws\" : \"\"\n}\n"
	for _, tt := range []struct {
		name, file, locals, wantAt string
	}{
		{"native syntax", "locals.tf",
			"locals {\n  l = tolist(range(200))\n  p = [for i in local.l : [for j in local.l : [for k in local.l : k]]]\n}\n", "locals.tf:3"},
		{"JSON template", "locals.tf.json", `{"locals": {"l": "${tolist(range(200))}",
"p": "${[for i in local.l : [for j in local.l : [for k in local.l : k]]]}"}}`, "locals.tf.json:2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{tt.file: tt.locals, "main.tf": main})
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := LoadFor(OpenTofu, nil, dir)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%v; %d MiB allocated", err, allocated>>20)
			if err == nil || !strings.Contains(err.Error(), tt.wantAt) {
				t.Errorf("the refusal does not name the for expression's file:line (%s): %v", tt.wantAt, err)
			}
			if allocated > 256<<20 {
				t.Errorf("the evaluation allocated %d MiB before it was refused", allocated>>20)
			}
		})
	}
}

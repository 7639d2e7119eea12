package manifest

import (
	"strings"
	"testing"
)

// The path "-" is a manifest read from the stdin LoadFrom is given, once;
// Load, given none, refuses it.
func TestLoadFromStdin(t *testing.T) {
	const body = `provider "registry.terraform.io/hashicorp/random" {
  versions = ["3.6.0"]
}
`
	spec, err := LoadFrom(strings.NewReader(body), Stdin)
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Providers) != 1 || spec.Providers[0].Address.String() != "registry.terraform.io/hashicorp/random" ||
		spec.Providers[0].Selections[0].Where != StdinName+":2" {
		t.Errorf("spec = %+v", spec.Providers)
	}
	for _, tc := range []struct {
		stdin bool
		paths []string
		want  string
	}{
		{false, []string{Stdin}, "is not read here"},
		{true, []string{Stdin, Stdin}, "given 2 times"},
		{true, []string{"-x"}, "no such file"},
	} {
		var r *strings.Reader
		if tc.stdin {
			r = strings.NewReader(body)
		}
		var err error
		if r == nil {
			_, err = Load(tc.paths...)
		} else {
			_, err = LoadFrom(r, tc.paths...)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.paths, err, tc.want)
		}
	}
}

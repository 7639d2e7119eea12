package manifest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// resolvedModules flattens a spec's modules into "module: v1 v2 [subdirs]" lines.
func resolvedModules(s *Spec) []string {
	var out []string
	for _, m := range s.Modules {
		var vs []string
		for _, sel := range m.Selections {
			for _, v := range sel.Select(available) {
				if !slices.Contains(vs, v.String()) {
					vs = append(vs, v.String())
				}
			}
		}
		out = append(out, m.Address.String()+": "+strings.Join(vs, " ")+" ["+strings.Join(m.Subdirs, ",")+"]")
	}
	return out
}

func TestLoadModules(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"sync.hcl": `platforms = ["linux_amd64"]
module "registry.terraform.io/terraform-aws-modules/vpc/aws" {
  versions = ["~> 5.0", "4.67.0"]
}
module "example.com/Team/net_work/AWS" {
  versions = [">= 4.0"]
  latest   = 2
}
`,
		"config/main.tf": `module "vpc" {
  source  = "terraform-aws-modules/vpc/aws"
  version = "6.0.0"
}
module "sub" {
  source = "acme/platform/aws//modules/app"
}
module "git" {
  source = "git::https://example.com/x.git?ref=v1"
}
module "gh" {
  source = "github.com/org/repo"
}
module "local" {
  source = "./child"
}
`,
		"config/child/main.tf": `module "deep" {
  source  = "app.terraform.io/corp/deep/azurerm"
  version = "~> 4.66"
}
`,
	})
	spec, err := Load(filepath.Join(dir, "sync.hcl"), filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"registry.terraform.io/terraform-aws-modules/vpc/aws: 5.1.0 5.0.0 4.67.0 6.0.0 []",
		"example.com/team/net_work/aws: 6.0.0 5.1.0 []", // named in its normal form
		"registry.terraform.io/acme/platform/aws: 6.0.0 [modules/app]",
		"app.terraform.io/corp/deep/azurerm: 4.67.0 []",
	}
	if got := resolvedModules(spec); !slices.Equal(got, want) {
		t.Errorf("modules\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(spec.Unmirrorable) != 2 || !strings.Contains(spec.Unmirrorable[0], "git::https://example.com/x.git") ||
		!strings.Contains(spec.Unmirrorable[1], "main.tf:12: github.com/org/repo") {
		t.Errorf("unmirrorable %q", spec.Unmirrorable)
	}

	for name, body := range map[string]string{
		"bad address": `module "vpc/aws" { versions = ["1.0.0"] }`,
		"no versions": `module "a/b/c" { latest = 1 }`,
		"duplicate":   `module "a/b/c" { versions = ["1.0.0"] }` + "\n" + `module "registry.terraform.io/a/b/c" { versions = ["2.0.0"] }`,
		"bad latest":  `module "a/b/c" { versions = ["1.0.0"] latest = 0 }`,
	} {
		d := writeFiles(t, map[string]string{"m.hcl": body})
		if _, err := Load(filepath.Join(d, "m.hcl")); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// ReadModuleDir reads a downloaded module: its providers join the spec,
// the registry modules it calls come back.
func TestReadModuleDir(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"modules/app/main.tf": `module "shared" {
  source = "../shared"
}
module "next" {
  source  = "acme/next/aws"
  version = "~> 5.0"
}
`,
		"modules/shared/versions.tf": `terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = ">= 4.67" }
  }
}
`,
	})
	spec := &Spec{}
	md, err := readAlone(spec, dir, filepath.Join(dir, "modules", "app"), "module acme/app/aws 1.0.0")
	calls := md.Modules
	if err != nil {
		t.Fatal(err)
	}
	if got := resolved(spec); !slices.Equal(got, []string{"registry.terraform.io/hashicorp/aws: 6.0.0"}) {
		t.Errorf("providers %q", got)
	}
	if len(calls) != 1 || calls[0].Address.String() != "registry.terraform.io/acme/next/aws" || len(calls[0].Selections) != 1 {
		t.Fatalf("calls %+v", calls)
	}
	if got := calls[0].Selections[0].Select(available); len(got) != 1 || got[0].String() != "5.1.0" {
		t.Errorf("the call selects %v, want the newest 5.x", got)
	}
	if _, err := spec.ReadModuleDir(context.Background(), dir, filepath.Join(dir, "nope"), "x"); err == nil {
		t.Error("a directory without configuration: no error")
	}
}

// checkCounter is a context whose Err counts its calls and reports the
// deadline passed from call expireAt on (never when 0).
type checkCounter struct {
	context.Context
	calls, expireAt int
}

func (c *checkCounter) Err() error {
	c.calls++
	if c.expireAt > 0 && c.calls >= c.expireAt {
		return context.DeadlineExceeded
	}
	return nil
}

// ReadModuleDir reads a stranger's package within its caller's deadline:
// the context is asked before each file, of the module and of the local
// modules it calls, and once it is done nothing more is read and the
// error is the context's. A package of thousands of files, each within
// hclfile's bounds, held tfmirror sync past --module-timeout.
func TestReadModuleDirStopsAtItsDeadline(t *testing.T) {
	files := map[string]string{"main.tf": "module \"child\" {\n  source = \"./child\"\n}\n"}
	for i := range 30 {
		files[fmt.Sprintf("r%02d.tf", i)] = fmt.Sprintf("resource \"p%02d_thing\" \"x\" {}\n", i)
		files[fmt.Sprintf("child/c%02d.tf", i)] = fmt.Sprintf("resource \"q%02d_thing\" \"x\" {}\n", i)
	}
	dir := writeFiles(t, files)

	whole := &checkCounter{Context: context.Background()}
	if _, err := (&Spec{}).ReadModuleDir(whole, dir, dir, "module acme/big/aws 1.0.0"); err != nil {
		t.Fatal(err)
	}
	if whole.calls < 61 {
		t.Errorf("the context was asked %d times for 61 files, want once a file at least", whole.calls)
	}

	cut := &checkCounter{Context: context.Background(), expireAt: 5}
	spec := &Spec{}
	_, err := spec.ReadModuleDir(cut, dir, dir, "module acme/big/aws 1.0.0")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past its deadline: %v, want the context's error", err)
	}
	if cut.calls > 6 {
		t.Errorf("the context was asked %d times after its deadline passed at the 5th: files were read after it", cut.calls)
	}
	if len(spec.Providers) != 0 {
		t.Errorf("a module read past its deadline added providers: %d", len(spec.Providers))
	}
}

// manyCallsFiles is a package of two files of perFile git:: module calls
// and perFile registry ones each, the files calling modules of the same
// names (g0, m0, ...) from distinct sources.
func manyCallsFiles(perFile int) map[string]string {
	files := map[string]string{}
	for f := range 2 {
		var b strings.Builder
		for i := range perFile {
			fmt.Fprintf(&b, "module \"g%d\" {\n  source = \"git::https://git.example.com/r%d-%d.git\"\n}\n", i, f, i)
			fmt.Fprintf(&b, "module \"m%d\" {\n  source = \"acme/m%d-%d/aws//d\"\n}\n", i, f, i)
		}
		files[fmt.Sprintf("f%d.tf", f)] = b.String()
	}
	return files
}

// manyProvidersFiles is a package of two files of perFile distinct
// required providers each, the first read again through a local module
// call.
func manyProvidersFiles(perFile int) map[string]string {
	files := map[string]string{}
	for f := range 2 {
		var b strings.Builder
		b.WriteString("terraform {\n  required_providers {\n")
		for i := range perFile {
			fmt.Fprintf(&b, "    p%d-%d = { source = \"acme/p%d-%d\" }\n", f, i, f, i)
		}
		b.WriteString("  }\n}\n")
		files[fmt.Sprintf("f%d.tf", f)] = b.String()
	}
	files["child/main.tf"] = files["f0.tf"]
	files["main.tf"] = "module \"child\" {\n  source = \"./child\"\n}\n"
	return files
}

// A stranger's package may call tens of thousands of modules, registry
// ones and others (git::, URLs), and name tens of thousands of
// providers: ReadModuleDir merges each by a lookup, each distinct one
// kept once, what is read again (a local module call) merged with what
// was. Each was merged by a search of those before it, time quadratic in
// their number that no deadline checked: two files of 10,000 module
// calls each held sync for about a minute after it read them, past
// --module-timeout; two of 20,000 providers, half a minute
// (BenchmarkReadModuleDirManyCalls, BenchmarkReadModuleDirManyProviders,
// in BENCHMARKS.md).
func TestReadModuleDirManyCallsAndProviders(t *testing.T) {
	const perFile = 500
	spec := &Spec{}
	dir := writeFiles(t, manyCallsFiles(perFile))
	md, err := spec.ReadModuleDir(context.Background(), dir, dir, "module acme/many/aws 1.0.0")
	calls, others := md.Modules, md.Sources
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2*perFile || len(others) != 2*perFile {
		t.Fatalf("%d registry module calls and %d others, want %d of each", len(calls), len(others), 2*perFile)
	}
	spec = &Spec{}
	dir = writeFiles(t, manyProvidersFiles(perFile))
	if _, err := readAlone(spec, dir, dir, "module acme/many/aws 1.0.0"); err != nil {
		t.Fatal(err)
	}
	if len(spec.Providers) != 2*perFile {
		t.Fatalf("%d providers, want %d", len(spec.Providers), 2*perFile)
	}
}

// benchmarkReadModuleDir reads the package of files as ReadModuleDir does,
// without its bound on registry module calls (MaxPackageModuleCalls,
// which BenchmarkReadModuleDirManyCalls's package is past), so that its
// figures compare with those before the bound.
func benchmarkReadModuleDir(b *testing.B, files map[string]string) {
	dir := writeFiles(b, files)
	for b.Loop() {
		spec := &Spec{}
		md, err := spec.readModuleDir(context.Background(), dir, dir, "module acme/many/aws 1.0.0", 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		spec.AddOwnSelections(md.Requires)
	}
}

// readAlone reads the module in dir as the package of a Standalone
// module is read: ReadModuleDir, and what it asks of providers added to
// spec alone (AddOwnSelections).
func readAlone(spec *Spec, root, dir, what string) (ModuleDir, error) {
	md, err := spec.ReadModuleDir(context.Background(), root, dir, what)
	if err == nil {
		spec.AddOwnSelections(md.Requires)
	}
	return md, err
}

// BenchmarkReadModuleDirManyCalls reads and merges two files of 10,000
// git:: and 10,000 registry module calls each.
func BenchmarkReadModuleDirManyCalls(b *testing.B) {
	benchmarkReadModuleDir(b, manyCallsFiles(10000))
}

// BenchmarkReadModuleDirManyProviders reads and merges two files of
// 20,000 required providers each, one of them read again through a
// local module call.
func BenchmarkReadModuleDirManyProviders(b *testing.B) {
	benchmarkReadModuleDir(b, manyProvidersFiles(20000))
}

// A downloaded package is read within its root: a local module call
// ("../shared") may name any directory of the package, as Terraform
// resolves it, and none outside it (Terraform refuses a relative path
// with too many "../" segments). A stranger's package that climbed out
// had sync read the configuration of any directory of the machine, and
// ask the origin for the providers and modules it names.
func TestReadModuleDirStaysInThePackage(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "private")
	writeTree(t, outside, map[string]string{
		"main.tf": "terraform {\n  required_providers {\n    secret = { source = \"acme/secretthing\" }\n  }\n}\n",
	})
	climb := strings.Repeat("../", 40) + strings.TrimPrefix(filepath.ToSlash(outside), "/")
	pkg := filepath.Join(base, "pkg")
	for _, source := range []string{"../private", "./modules/../../private", climb} {
		writeTree(t, pkg, map[string]string{
			"modules/app/main.tf":  "module \"shared\" {\n  source = \"../shared\"\n}\n",
			"modules/shared/a.tf":  "resource \"aws_thing\" \"x\" {}\n",
			"main.tf":              "module \"up\" {\n  source = \"" + source + "\"\n}\n",
			"modules/keep/main.tf": "# a directory of the package\n",
		})
		spec := &Spec{}
		_, err := spec.ReadModuleDir(context.Background(), pkg, pkg, "module acme/app/aws 1.0.0")
		if err == nil || !strings.Contains(err.Error(), "outside the module package") {
			t.Errorf("source %q: %v, want refused as outside the package", source, err)
		}
		for _, p := range spec.Providers {
			if strings.Contains(p.Address.String(), "secretthing") {
				t.Errorf("source %q: the configuration outside the package was read: %s", source, p.Address)
			}
		}
		if _, err := (&Spec{}).ReadModuleDir(context.Background(), pkg, filepath.Join(pkg, "modules", "app"), "module acme/app/aws 1.0.0//modules/app"); err != nil {
			t.Errorf("a call of another directory of the package: %v", err)
		}
	}
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

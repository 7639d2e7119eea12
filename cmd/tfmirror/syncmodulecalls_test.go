package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/manifest"
)

// callsOf is a configuration calling each of mods ("acme/a/aws"),
// version "1.0.0".
func callsOf(mods ...string) string {
	var b strings.Builder
	for i, m := range mods {
		fmt.Fprintf(&b, "module \"m%d\" {\n  source  = %q\n  version = \"1.0.0\"\n}\n", i, m)
	}
	return b.String()
}

// moduleSyncRun is a sync of ops's registry modules into a data
// directory of its own.
func moduleSyncRun(t *testing.T, ops *treeModuleOps) *syncRun {
	r := &syncRun{cfg: syncConfig{Config: settings.Config{DataDir: t.TempDir()}}, ops: ops, out: io.Discard, status: io.Discard, now: time.Now}
	r.cfg.ModuleTimeout = time.Minute
	return r
}

// A sync follows at most maxSyncModuleCalls registry module calls of the
// packages it reads (here lowered to 5): a package whose calls would take
// it past the bound is one failure, naming the module version, its
// calls and the bound, and none of its calls is followed; those within
// it are. Each call of every package was followed, whatever their
// number.
func TestSyncBoundsModuleCallsFollowed(t *testing.T) {
	const root = "registry.terraform.io/acme/root/aws"
	ops := &treeModuleOps{
		files: map[string]map[string]string{
			root:                                {"main.tf": callsOf("acme/a/aws", "acme/b/aws", "acme/c/aws")},
			"registry.terraform.io/acme/a/aws":  {"main.tf": callsOf("acme/d1/aws", "acme/d2/aws")},
			"registry.terraform.io/acme/b/aws":  {"main.tf": callsOf("acme/e1/aws", "acme/e2/aws")},
			"registry.terraform.io/acme/c/aws":  {"main.tf": "# calls none\n"},
			"registry.terraform.io/acme/d1/aws": {"main.tf": "# calls none\n"},
			"registry.terraform.io/acme/d2/aws": {"main.tf": "# calls none\n"},
			"registry.terraform.io/acme/e1/aws": {"main.tf": "# calls none\n"},
			"registry.terraform.io/acme/e2/aws": {"main.tf": "# calls none\n"},
		},
		unpacked: map[string]int{},
	}
	r := moduleSyncRun(t, ops)
	r.maxModuleCalls = 5
	res := r.syncModules(context.Background(), moduleSpec(t, t.TempDir(), root))

	want := "module registry.terraform.io/acme/b/aws 1.0.0: its 2 registry module calls are not followed: they would take this sync past 5, the most it follows from the packages it reads (5 followed)"
	if len(res.failures) != 1 || res.failures[0] != want {
		t.Errorf("failures %q, want one: %q", res.failures, want)
	}
	for _, m := range []string{"e1", "e2"} {
		if n := ops.unpacked["registry.terraform.io/acme/"+m+"/aws"]; n != 0 {
			t.Errorf("acme/%s/aws, called past the bound, was fetched %d times", m, n)
		}
	}
	if got := res.fetched + res.cached; got != 6 {
		t.Errorf("%d packages synced, want 6: root, a, b, c, d1, d2", got)
	}
}

// heldCalls counts the registry module calls res holds of the packages
// it read, for judging the configuration directories.
func heldCalls(res moduleSync) int {
	n := 0
	for _, md := range res.packages {
		n += len(md.Calls)
	}
	return n
}

// The registry module calls a sync holds to judge the configuration
// directories with are those it follows, within maxSyncModuleCalls (here
// lowered to 5), and not those of the packages past the bound or nested
// too deep, which it does not follow: thousands of packages each making
// up to manifest.MaxPackageModuleCalls were millions held until the sync
// ended. Each such package's calls were held.
func TestSyncHoldsOnlyTheModuleCallsItFollows(t *testing.T) {
	const root = "registry.terraform.io/acme/root/aws"
	ops := &treeModuleOps{
		files: map[string]map[string]string{
			root:                                {"main.tf": callsOf("acme/a/aws", "acme/b/aws", "acme/c/aws")},
			"registry.terraform.io/acme/a/aws":  {"main.tf": callsOf("acme/d1/aws", "acme/d2/aws")},
			"registry.terraform.io/acme/b/aws":  {"main.tf": callsOf("acme/e1/aws", "acme/e2/aws", "acme/e3/aws", "acme/e4/aws")},
			"registry.terraform.io/acme/c/aws":  {"main.tf": "# calls none\n"},
			"registry.terraform.io/acme/d1/aws": {"main.tf": "# calls none\n"},
			"registry.terraform.io/acme/d2/aws": {"main.tf": "# calls none\n"},
		},
		unpacked: map[string]int{},
	}
	r := moduleSyncRun(t, ops)
	r.maxModuleCalls = 5
	res := r.syncModules(context.Background(), moduleSpec(t, t.TempDir(), root))
	if len(res.failures) != 1 || !strings.Contains(res.failures[0], "acme/b/aws 1.0.0: its 4 registry module calls are not followed") {
		t.Fatalf("failures %q, want one: acme/b/aws's calls not followed", res.failures)
	}
	if n := heldCalls(res); n != 5 {
		t.Errorf("%d registry module calls held, want the 5 followed (root's 3, acme/a/aws's 2)", n)
	}

	// Nested too deep: a chain of 18 modules, the 17th's call not followed.
	name := func(i int) string { return fmt.Sprintf("registry.terraform.io/acme/m%d/aws", i) }
	ops = &treeModuleOps{files: map[string]map[string]string{}, unpacked: map[string]int{}}
	for i := range 18 {
		ops.files[name(i)] = map[string]string{"main.tf": callsOf(fmt.Sprintf("acme/m%d/aws", i+1))}
	}
	r = moduleSyncRun(t, ops)
	res = r.syncModules(context.Background(), moduleSpec(t, t.TempDir(), name(0)))
	if n := heldCalls(res); n != 16 {
		t.Errorf("%d registry module calls held of a chain 18 deep, want the 16 followed", n)
	}
}

// A package making more than manifest.MaxPackageModuleCalls distinct
// registry module calls is one failure of the sync, naming the module
// version, the call past the bound and the bound, and none of its calls
// is followed.
func TestSyncRefusesAPackageOfTooManyModuleCalls(t *testing.T) {
	const big = "registry.terraform.io/acme/big/aws"
	var mods []string
	for i := range manifest.MaxPackageModuleCalls + 1 {
		mods = append(mods, fmt.Sprintf("acme/m%d/aws", i))
	}
	ops := &treeModuleOps{files: map[string]map[string]string{big: {"main.tf": callsOf(mods...)}}, unpacked: map[string]int{}}
	r := moduleSyncRun(t, ops)
	res := r.syncModules(context.Background(), moduleSpec(t, t.TempDir(), big))

	want := fmt.Sprintf("module %s 1.0.0: reading its configuration: main.tf:%d: module registry.terraform.io/acme/m%d/aws: more than %d distinct registry module calls",
		big, 4*manifest.MaxPackageModuleCalls+2, manifest.MaxPackageModuleCalls, manifest.MaxPackageModuleCalls)
	if len(res.failures) != 1 || !strings.HasPrefix(res.failures[0], want) {
		t.Errorf("failures %q, want one: %q", res.failures, want)
	}
	if len(ops.unpacked) != 1 {
		t.Errorf("%d packages fetched, want %s's alone", len(ops.unpacked), big)
	}
}

// One module called many times alike (one version constraint) is checked
// against its version list once, and fails once when no version meets
// it, the failure saying how many calls asked: by a package's calls, and
// by the configurations of the operator's directories. Each call was
// checked, and reported, on its own.
func TestSyncReportsAModuleCalledAlikeOnce(t *testing.T) {
	const (
		caller = "registry.terraform.io/acme/caller/aws"
		callee = "registry.terraform.io/acme/callee/aws"
	)
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "module \"c%d\" {\n  source  = \"acme/callee/aws\"\n  version = \"~> 9.0\"\n}\n", i)
	}
	ops := &treeModuleOps{files: map[string]map[string]string{caller: {"main.tf": b.String()}}, unpacked: map[string]int{}}
	r := moduleSyncRun(t, ops)
	res := r.syncModules(context.Background(), moduleSpec(t, t.TempDir(), caller))
	want := fmt.Sprintf("module %s: no version matches \"~> 9.0\" (50 calls, the first at ", callee)
	if len(res.failures) != 1 || !strings.HasPrefix(res.failures[0], want) {
		t.Errorf("a package calling a module 50 times alike: failures %q, want one: %q...", res.failures, want)
	}

	// The operator's configuration, in two directories.
	var dirs []string
	for range 2 {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	spec, err := manifest.Load(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	res = moduleSyncRun(t, ops).syncModules(context.Background(), spec)
	want = fmt.Sprintf("module %s: no version matches \"~> 9.0\" (100 calls, the first at %s:2)", callee, filepath.Join(dirs[0], "main.tf"))
	if len(res.failures) != 1 || res.failures[0] != want {
		t.Errorf("two directories calling a module 50 times alike each: failures %q, want one: %q", res.failures, want)
	}
}

// Registry modules calling registry modules are followed 16 deep: the
// calls of a package deeper than that are failures naming the module,
// and are not counted against the calls a sync follows, which they are
// not. Here a chain of 18 modules, under a bound of 16 calls: 17
// packages synced (the chain's first and 16 it calls), the 18th one
// failure.
func TestSyncFollowsModules16Deep(t *testing.T) {
	name := func(i int) string { return fmt.Sprintf("registry.terraform.io/acme/m%d/aws", i) }
	ops := &treeModuleOps{files: map[string]map[string]string{}, unpacked: map[string]int{}}
	for i := range 18 {
		ops.files[name(i)] = map[string]string{"main.tf": callsOf(fmt.Sprintf("acme/m%d/aws", i+1))}
	}
	r := moduleSyncRun(t, ops)
	r.maxModuleCalls = 16
	res := r.syncModules(context.Background(), moduleSpec(t, t.TempDir(), name(0)))

	want := "module " + name(17) + ": registry modules nested more than 16 deep"
	if len(res.failures) != 1 || res.failures[0] != want {
		t.Errorf("failures %q, want one: %q", res.failures, want)
	}
	if got := res.fetched + res.cached; got != 17 || ops.unpacked[name(17)] != 0 {
		t.Errorf("%d packages synced, %s's fetched %d times; want 17, and not it", got, name(17), ops.unpacked[name(17)])
	}
}

// gitCallsOf is a configuration calling n git repositories,
// git::https://git.example.com/NAME-0.git ...
func gitCallsOf(name string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "module \"g%d\" {\n  source = \"git::https://git.example.com/%s-%d.git\"\n}\n", i, name, i)
	}
	return b.String()
}

// A package making more than manifest.MaxPackageModuleSources distinct
// module calls whose source is not a registry address is one failure of
// the sync, naming the module version, the call past the bound and the
// bound: none of its sources is listed, and none of its registry calls
// followed. Each of its sources was listed, however many.
func TestSyncRefusesAPackageOfTooManyModuleSources(t *testing.T) {
	const big = "registry.terraform.io/acme/big/aws"
	ops := &treeModuleOps{files: map[string]map[string]string{
		big: {"main.tf": callsOf("acme/a/aws") + gitCallsOf("big", manifest.MaxPackageModuleSources+1)},
	}, unpacked: map[string]int{}}
	r := moduleSyncRun(t, ops)
	spec := moduleSpec(t, t.TempDir(), big)
	res := r.syncModules(context.Background(), spec)

	want := fmt.Sprintf("module %s 1.0.0: reading its configuration: main.tf:%d: module source \"git::https://git.example.com/big-%d.git\": more than %d distinct module calls whose source is not a registry address",
		big, 4+3*manifest.MaxPackageModuleSources+2, manifest.MaxPackageModuleSources, manifest.MaxPackageModuleSources)
	if len(res.failures) != 1 || !strings.HasPrefix(res.failures[0], want) {
		t.Errorf("failures %q, want one: %q", res.failures, want)
	}
	if len(spec.Unmirrorable) != 0 || len(ops.unpacked) != 1 {
		t.Errorf("%d sources listed, %d packages fetched; want none, and %s's alone", len(spec.Unmirrorable), len(ops.unpacked), big)
	}
}

// A sync lists at most maxSyncModuleSources module sources that are not
// registry addresses from the packages it reads (here lowered to 5): a
// package whose sources would take it past the bound is one failure,
// naming the module version, their number and the bound, and none of
// them is listed; the registry modules it calls are followed still. The
// sources of the operator's own configuration are not counted. Every
// source of every package was listed, whatever their number.
func TestSyncBoundsModuleSourcesListed(t *testing.T) {
	const root = "registry.terraform.io/acme/root/aws"
	ops := &treeModuleOps{
		files: map[string]map[string]string{
			root:                               {"main.tf": callsOf("acme/a/aws", "acme/b/aws") + gitCallsOf("root", 2)},
			"registry.terraform.io/acme/a/aws": {"main.tf": gitCallsOf("a", 3)},
			"registry.terraform.io/acme/b/aws": {"main.tf": callsOf("acme/c/aws") + gitCallsOf("b", 2)},
			"registry.terraform.io/acme/c/aws": {"main.tf": "# calls none\n"},
		},
		unpacked: map[string]int{},
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(gitCallsOf("own", 7)), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := manifest.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range moduleSpec(t, t.TempDir(), root).Modules {
		spec.Modules = append(spec.Modules, m)
	}
	r := moduleSyncRun(t, ops)
	r.maxModuleSources = 5
	res := r.syncModules(context.Background(), spec)

	want := "module registry.terraform.io/acme/b/aws 1.0.0: its 2 module sources that are not registry addresses are not listed: they would take this sync past 5, the most it lists from the packages it reads (5 listed)"
	if len(res.failures) != 1 || res.failures[0] != want {
		t.Errorf("failures %q, want one: %q", res.failures, want)
	}
	var fromB int
	for _, u := range spec.Unmirrorable {
		if strings.Contains(u, "acme/b/aws") {
			fromB++
		}
	}
	if len(spec.Unmirrorable) != 7+5 || fromB != 0 {
		t.Errorf("%d sources listed, %d of acme/b/aws; want 12 (7 of the operator's, 2 of root, 3 of a), none of b:\n%s", len(spec.Unmirrorable), fromB, strings.Join(spec.Unmirrorable, "\n"))
	}
	if got := res.fetched + res.cached; got != 4 {
		t.Errorf("%d packages synced, want 4: root, a, b, c", got)
	}
}

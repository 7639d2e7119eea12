package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/manifest"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
)

// listOps serves one version list for every provider, 1.0.0 to 1.9.0
// and 2.0.0 to 2.3.0, each for linux_amd64, and counts what sync asks.
type listOps struct {
	engineOps
	mu       sync.Mutex
	lists    int            // version lists asked
	packages map[string]int // package metadata asked, by version
}

func (o *listOps) Versions(context.Context, addrs.Provider) ([]admin.Version, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lists++
	var out []admin.Version
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0", "1.6.0", "1.7.0", "1.8.0", "1.9.0", "2.0.0", "2.1.0", "2.2.0", "2.3.0", "2.4.0-beta1"} {
		out = append(out, admin.Version{Version: v, Platforms: []string{"linux_amd64"}})
	}
	return out, nil
}

func (o *listOps) Package(_ context.Context, _ addrs.Provider, version string, _ []string) ([]admin.Archive, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.packages[version]++
	return []admin.Archive{{Platform: "linux_amd64", Filename: "a_" + version + ".zip"}}, nil
}

func (o *listOps) Held(context.Context, admin.PolicyRequest) ([]unsigned.Version, error) {
	return nil, nil
}

// providerDirs writes each configuration (a file name under a directory
// of its own, "a/main.tf", to its text) and loads the directories, in
// order, as sync given them does.
func providerDirs(t *testing.T, names []string, files map[string]string) (*manifest.Spec, map[string]string) {
	t.Helper()
	base := t.TempDir()
	for name, body := range files {
		path := filepath.Join(base, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dirs := map[string]string{}
	var paths []string
	for _, n := range names {
		dirs[n] = filepath.Join(base, n)
		paths = append(paths, dirs[n])
	}
	spec, err := manifest.Load(paths...)
	if err != nil {
		t.Fatal(err)
	}
	if err := resolvePlatforms(spec, []string{"linux_amd64"}); err != nil {
		t.Fatal(err)
	}
	return spec, dirs
}

// requires is a configuration requiring acme/p with constraint.
func requires(constraint string) string {
	return fmt.Sprintf("terraform {\n  required_providers {\n    p = {\n      source  = \"acme/p\"\n      version = %q\n    }\n  }\n}\n", constraint)
}

func providerSyncRun(ops engineOps) *syncRun {
	r := &syncRun{ops: ops, out: io.Discard, status: io.Discard, now: time.Now}
	r.cfg.Parallel = 2
	return r
}

// One provider required by several directories is one provider of the
// sync, its version list asked once, and each directory is judged as
// Terraform judges it, a configuration of its own: within one (its root
// module and the local modules it calls) the constraints all apply, the
// newest version meeting them all taken; across directories the versions
// each takes are all synced, the union, not what meets every
// directory's constraints. Here a takes 1.7.0 (~> 1.0, and < 1.8.0 in
// its local module), b 2.3.0 (~> 2.0), c 1.9.0 (~> 1.0): nothing meets
// the three, and each of the three versions is synced, its package
// metadata asked once.
func TestSyncJudgesAProviderOfSeveralDirectoriesEachAsTerraform(t *testing.T) {
	spec, _ := providerDirs(t, []string{"a", "b", "c"}, map[string]string{
		"a/main.tf":        requires("~> 1.0") + "module \"pinned\" {\n  source = \"./pinned\"\n}\n",
		"a/pinned/main.tf": requires("< 1.8.0"),
		"b/main.tf":        requires("~> 2.0"),
		"c/main.tf":        requires("~> 1.0"),
	})
	if len(spec.Providers) != 1 {
		t.Fatalf("%d providers, want acme/p once", len(spec.Providers))
	}
	ops := &listOps{packages: map[string]int{}}
	plan := providerSyncRun(ops).plan(context.Background(), spec)
	var got []string
	for _, it := range plan.items {
		got = append(got, it.version)
	}
	if want := []string{"1.7.0", "1.9.0", "2.3.0"}; !slices.Equal(got, want) || len(plan.failures) != 0 {
		t.Errorf("synced %q (failures %q), want %q", got, plan.failures, want)
	}
	if ops.lists != 1 || len(ops.packages) != 3 || ops.packages["1.9.0"] != 1 {
		t.Errorf("version list asked %d times, package metadata %v; want once, and once each of 3 versions", ops.lists, ops.packages)
	}
}

// Directories requiring one provider alike (one version constraint) are
// one selection of it, checked against its version list once, and
// reported once when no version meets it, saying how many asked and the
// first: sync given a hundred directories of one constraint printed a
// hundred failures of it.
func TestSyncChecksAProviderAskedAlikeOnce(t *testing.T) {
	files := map[string]string{}
	var names []string
	for i := range 3 {
		names = append(names, fmt.Sprintf("d%d", i))
		files[names[i]+"/main.tf"] = requires("~> 9.0")
	}
	files["d3/main.tf"] = requires("~> 2.0")
	names = append(names, "d3")
	spec, dirs := providerDirs(t, names, files)
	plan := providerSyncRun(&listOps{packages: map[string]int{}}).plan(context.Background(), spec)

	want := fmt.Sprintf("registry.terraform.io/acme/p: no version matches \"~> 9.0\" (asked 3 times, the first at %s:3)", filepath.Join(dirs["d0"], "main.tf"))
	if len(plan.failures) != 1 || plan.failures[0] != want {
		t.Errorf("failures:\n%s\nwant one:\n%s", strings.Join(plan.failures, "\n"), want)
	}
	if len(plan.items) != 1 || plan.items[0].version != "2.3.0" {
		t.Errorf("synced %v, want 2.3.0 alone", plan.items)
	}
}

// treeListOps is a registry of module packages (treeModuleOps) and of
// providers (listOps).
type treeListOps struct {
	*listOps
	tree *treeModuleOps
}

func (o *treeListOps) ModuleVersions(ctx context.Context, m addrs.Module) ([]string, error) {
	return o.tree.ModuleVersions(ctx, m)
}

func (o *treeListOps) UnpackModule(ctx context.Context, m addrs.Module, version, dir string) (admin.Module, error) {
	return o.tree.UnpackModule(ctx, m, version, dir)
}

// requiresOf is a configuration requiring provider acme/NAME with
// constraint.
func requiresOf(name, constraint string) string {
	return fmt.Sprintf("terraform {\n  required_providers {\n    %s = {\n      source  = \"acme/%s\"\n      version = %q\n    }\n  }\n}\n", name, name, constraint)
}

// A configuration directory is one configuration with the registry
// modules it calls, and those these call, as Terraform judges it: their
// constraints on a provider all apply, and the newest version meeting
// them all is synced, which Terraform installs. Each module's own was
// judged alone: here a asks acme/p "< 1.8.0" and calls acme/net/aws,
// which asks "!= 1.7.0" (Terraform installs 1.6.0); net asks acme/q
// "!= 1.4.0" and calls acme/deep/aws, which asks "< 1.5.0" (1.3.0).
// Sync took 1.7.0 and 2.3.0 of p, 2.3.0 and 1.4.0 of q, and not the two
// that Terraform installs: an air-gapped terraform init failed; then it
// took those too, and a failed when 1.7.0 could not be fetched. b, a
// directory of its own calling net too, is judged on its own (p "~> 2.0"
// with "!= 1.7.0": 2.3.0), its versions synced with a's.
func TestSyncJudgesADirectoryWithTheRegistryModulesItCalls(t *testing.T) {
	tree := &treeModuleOps{files: map[string]map[string]string{
		"registry.terraform.io/acme/net/aws": {"main.tf": requiresOf("p", "!= 1.7.0") + requiresOf("q", "!= 1.4.0") +
			"module \"deep\" {\n  source  = \"acme/deep/aws\"\n  version = \"1.0.0\"\n}\n"},
		"registry.terraform.io/acme/deep/aws": {"main.tf": requiresOf("q", "< 1.5.0")},
	}, unpacked: map[string]int{}}
	calls := "module \"net\" {\n  source  = \"acme/net/aws\"\n  version = \"~> 1.0\"\n}\n"
	spec, _ := providerDirs(t, []string{"a", "b"}, map[string]string{
		"a/main.tf": requiresOf("p", "< 1.8.0") + calls,
		"b/main.tf": requiresOf("p", "~> 2.0") + calls,
	})
	plan := planWithModules(t, tree, spec)
	got := map[string][]string{}
	for _, it := range plan.items {
		got[it.provider.Type] = append(got[it.provider.Type], it.version)
	}
	for name, want := range map[string]string{"p": "1.6.0", "q": "1.3.0"} {
		if !slices.Contains(got[name], want) {
			t.Errorf("acme/%s: synced %q, not %s, which Terraform installs for a", name, got[name], want)
		}
	}
	if !slices.Contains(got["p"], "2.3.0") {
		t.Errorf("acme/p: synced %q, not 2.3.0, which Terraform installs for b", got["p"])
	}
	// Nothing else: the newest version a's or b's root module allows
	// alone (1.7.0 of p, 2.3.0 of q), which neither installs, was synced
	// too, and a sync failed when that one could not be fetched.
	for name, want := range map[string][]string{"p": {"1.6.0", "2.3.0"}, "q": {"1.3.0"}} {
		have := slices.Compact(slices.Sorted(slices.Values(got[name])))
		if !slices.Equal(have, want) {
			t.Errorf("acme/%s: synced %q, want only %q, what a and b install", name, have, want)
		}
	}
}

// A configuration naming a prerelease exactly is synced that prerelease,
// as terraform init installs it, with a registry module it calls
// admitting it too; one naming none is synced no prerelease, whatever it
// admits. Sync said no version matched "2.4.0-beta1" and synced nothing
// for the directory.
func TestSyncTakesAPrereleaseAConfigurationNames(t *testing.T) {
	tree := &treeModuleOps{files: map[string]map[string]string{
		"registry.terraform.io/acme/net/aws": {"main.tf": requiresOf("p", ">= 2.0")},
	}, unpacked: map[string]int{}}
	calls := "module \"net\" {\n  source  = \"acme/net/aws\"\n  version = \"~> 1.0\"\n}\n"
	spec, _ := providerDirs(t, []string{"beta", "released"}, map[string]string{
		"beta/main.tf":     requiresOf("p", "2.4.0-beta1") + calls,
		"released/main.tf": requiresOf("p", "~> 2.0"),
	})
	plan := planWithModules(t, tree, spec)
	var got []string
	for _, it := range plan.items {
		got = append(got, it.version)
	}
	slices.Sort(got)
	if want := []string{"2.3.0", "2.4.0-beta1"}; !slices.Equal(got, want) {
		t.Errorf("synced %q, want %q: the prerelease beta names, the newest release for released", got, want)
	}
}

// A registry module a configuration calls asks what it asks of a
// provider together with the configuration, and sync syncs what the
// configuration installs with it: not also the newest version the
// module's package alone would take, which no configuration installs (a
// provider of hundreds of MiB, for every platform). A module a manifest
// names, which no configuration judges, is synced what its package asks
// alone, and so are the modules its package calls.
func TestSyncTakesWhatTheConfigurationInstallsWithItsModules(t *testing.T) {
	tree := &treeModuleOps{files: map[string]map[string]string{
		"registry.terraform.io/acme/net/aws": {"main.tf": requiresOf("p", ">= 1.5") +
			"module \"dns\" {\n  source  = \"acme/dns/aws\"\n  version = \"1.0.0\"\n}\n"},
		"registry.terraform.io/acme/dns/aws": {"main.tf": requiresOf("q", ">= 1.0")},
	}, unpacked: map[string]int{}}
	calls := "module \"net\" {\n  source  = \"acme/net/aws\"\n  version = \"1.0.0\"\n}\n"
	synced := func(plan syncPlan) []string {
		var got []string
		for _, it := range plan.items {
			got = append(got, it.provider.Type+" "+it.version)
		}
		slices.Sort(got)
		return slices.Compact(got)
	}
	spec, _ := providerDirs(t, []string{"app"}, map[string]string{
		"app/main.tf": requiresOf("p", "~> 1.0") + requiresOf("q", "< 1.5.0") + calls,
	})
	if got, want := synced(planWithModules(t, tree, spec)), []string{"p 1.9.0", "q 1.4.0"}; !slices.Equal(got, want) {
		t.Errorf("a configuration calling acme/net/aws: synced %q, want %q, what it installs", got, want)
	}

	spec = moduleSpec(t, t.TempDir(), "registry.terraform.io/acme/net/aws")
	if err := resolvePlatforms(spec, []string{"linux_amd64"}); err != nil {
		t.Fatal(err)
	}
	if got, want := synced(planWithModules(t, tree, spec)), []string{"p 2.3.0", "q 2.3.0"}; !slices.Equal(got, want) {
		t.Errorf("a manifest naming acme/net/aws: synced %q, want %q, what its package and the one it calls ask alone", got, want)
	}
}

// planWithModules syncs spec's registry modules from tree, as a sync
// run does before it plans, and returns the plan of its providers
// (listOps' versions), failing the test on any failure of either.
func planWithModules(t *testing.T, tree *treeModuleOps, spec *manifest.Spec) syncPlan {
	t.Helper()
	r := providerSyncRun(&treeListOps{listOps: &listOps{packages: map[string]int{}}, tree: tree})
	r.cfg.DataDir = t.TempDir()
	r.cfg.ModuleTimeout = time.Minute
	r.cfg.SyncPlatforms = []string{"linux_amd64"}
	mods := r.modules(context.Background(), spec)
	plan := r.plan(context.Background(), spec)
	if len(mods.failures)+len(plan.failures) != 0 {
		t.Fatalf("failures %q %q", mods.failures, plan.failures)
	}
	return plan
}

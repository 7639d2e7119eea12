package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
)

// treeModuleOps is sync's engine for registry modules whose packages
// have subdirectories: every module has version 1.0.0, whose package is
// the files of files[module] (names with slashes). Each unpack is counted.
type treeModuleOps struct {
	engineOps
	files    map[string]map[string]string
	unpacked map[string]int
}

func (o *treeModuleOps) ModuleVersions(context.Context, addrs.Module) ([]string, error) {
	return []string{"1.0.0"}, nil
}

func (o *treeModuleOps) Held(context.Context, admin.PolicyRequest) ([]unsigned.Version, error) {
	return nil, nil
}

func (o *treeModuleOps) UnpackModule(_ context.Context, m addrs.Module, version, dir string) (admin.Module, error) {
	for name, body := range o.files[m.String()] {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return admin.Module{}, err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return admin.Module{}, err
		}
	}
	o.unpacked[m.String()]++
	return admin.Module{Version: version, SHA256: strings.Repeat("ab", 32), CachedAlready: o.unpacked[m.String()] > 1}, nil
}

// TestSyncReadsEverySubdirOfAModuleVersion: two packages call
// subdirectories of one module version (terraform-aws-modules/iam/aws//
// modules/a and //modules/b, as modules commonly do), each requiring its
// own provider. A sealed mirror must then serve both providers, so sync
// must read both subdirectories' configuration, though the package is
// cached once; and it counts the package once.
func TestSyncReadsEverySubdirOfAModuleVersion(t *testing.T) {
	const (
		callerA = "registry.terraform.io/acme/callera/aws"
		callerB = "registry.terraform.io/acme/callerb/aws"
		shared  = "registry.terraform.io/acme/shared/aws"
	)
	calls := func(src string) string {
		return "module \"m\" {\n  source  = \"" + src + "\"\n  version = \"1.0.0\"\n}\n"
	}
	requires := func(p string) string {
		return "terraform {\n  required_providers {\n    x = { source = \"" + p + "\" }\n  }\n}\n"
	}
	ops := &treeModuleOps{
		files: map[string]map[string]string{
			callerA: {"main.tf": calls("acme/shared/aws//modules/a")},
			callerB: {"main.tf": calls("acme/shared/aws//modules/b")},
			shared: {
				"main.tf":           "# root\n",
				"modules/a/main.tf": requires("acme/one"),
				"modules/b/main.tf": requires("acme/two"),
			},
		},
		unpacked: map[string]int{},
	}
	dir := t.TempDir()
	spec := moduleSpec(t, dir, callerA, callerB)
	r := &syncRun{cfg: syncConfig{Config: settings.Config{DataDir: dir}}, ops: ops, out: io.Discard, status: io.Discard, now: time.Now}
	r.cfg.ModuleTimeout = time.Minute

	res := r.syncModules(context.Background(), spec)
	if len(res.failures) != 0 {
		t.Fatalf("failures %q", res.failures)
	}
	var got []string
	for _, p := range spec.Providers {
		got = append(got, p.Address.String())
	}
	for _, want := range []string{"registry.terraform.io/acme/one", "registry.terraform.io/acme/two"} {
		if !slices.Contains(got, want) {
			t.Errorf("providers to sync %q: %s, required by a subdirectory of %s 1.0.0 a synced package calls, is missing", got, want, shared)
		}
	}
	if res.fetched+res.cached != 3 {
		t.Errorf("modules: %d fetched, %d already cached; want 3 packages in all (two callers and the shared one, once)", res.fetched, res.cached)
	}
}

// cutModuleOps is sync's engine for registry modules, interrupted: the
// package of every module is being fetched when the operator presses
// Ctrl-C (cancel), and what is asked after that ends with the context.
type cutModuleOps struct {
	engineOps
	cancel context.CancelFunc
}

func (o *cutModuleOps) ModuleVersions(ctx context.Context, _ addrs.Module) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []string{"1.0.0"}, nil
}

func (o *cutModuleOps) Held(context.Context, admin.PolicyRequest) ([]unsigned.Version, error) {
	return nil, nil
}

func (o *cutModuleOps) UnpackModule(ctx context.Context, _ addrs.Module, _, _ string) (admin.Module, error) {
	o.cancel()
	<-ctx.Done()
	return admin.Module{}, ctx.Err()
}

// TestSyncInterruptedDuringModules: a sync interrupted while it fetches
// a registry module's package says what it says when interrupted while
// fetching provider archives: interrupted, nothing failed (the next run
// fetches the rest), exit status 1; not a "failed:" line per module it
// did not get to.
func TestSyncInterruptedDuringModules(t *testing.T) {
	dir := t.TempDir()
	spec := moduleSpec(t, dir, "acme/first/aws", "acme/second/aws")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out strings.Builder
	r := &syncRun{cfg: syncConfig{Config: settings.Config{DataDir: dir}, Parallel: 4}, ops: &cutModuleOps{cancel: cancel}, out: &out, status: &out, now: time.Now}
	r.cfg.ModuleTimeout = time.Minute
	ok := r.runProviders(ctx, spec)
	t.Logf("output:\n%s", out.String())
	if ok {
		t.Error("an interrupted sync reports success")
	}
	if strings.Contains(out.String(), "failed:") || !strings.Contains(out.String(), " 0 failed") {
		t.Error("an interrupted sync reports the modules it did not get to as failed")
	}
	if !strings.Contains(out.String(), "sync interrupted") {
		t.Error("the sync does not say it was interrupted")
	}
}

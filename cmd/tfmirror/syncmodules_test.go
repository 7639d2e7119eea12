package main

import (
	"bytes"
	"context"
	"errors"
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
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/manifest"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
)

// slowModuleOps is sync's engine for registry modules: every module has
// version 1.0.0, whose package is the files of files[module]; the package
// of a module in slow comes when its caller's context is done, as a
// package whose fetch and unpack took the time it had (fallback bounds
// the wait without a deadline). Every module asked for is noted.
type slowModuleOps struct {
	engineOps
	files    map[string]map[string]string
	slow     map[string]bool
	fallback time.Duration

	mu    sync.Mutex
	asked []string
}

func (o *slowModuleOps) ModuleVersions(_ context.Context, m addrs.Module) ([]string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asked = append(o.asked, m.String())
	return []string{"1.0.0"}, nil
}

func (o *slowModuleOps) Held(context.Context, admin.PolicyRequest) ([]unsigned.Version, error) {
	return nil, nil
}

func (o *slowModuleOps) UnpackModule(ctx context.Context, m addrs.Module, version, dir string) (admin.Module, error) {
	for name, body := range o.files[m.String()] {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return admin.Module{}, err
		}
	}
	if o.slow[m.String()] {
		select {
		case <-ctx.Done():
		case <-time.After(o.fallback):
		}
	}
	return admin.Module{Version: version, SHA256: strings.Repeat("ab", 32)}, nil
}

// TestSyncReadsAModuleWithinItsTimeout: --module-timeout bounds what sync
// does with one module version, the reading of its package's
// configuration included (the package is a stranger's, and may hold
// thousands of files): a package that comes with its time spent is not
// read, its calls not followed, and the sync says so; the modules that
// come in time are read as before.
func TestSyncReadsAModuleWithinItsTimeout(t *testing.T) {
	const (
		slow   = "registry.terraform.io/acme/slow/aws"
		nested = "registry.terraform.io/acme/nested/aws"
		quick  = "registry.terraform.io/acme/quick/aws"
		deeper = "registry.terraform.io/acme/deeper/aws"
	)
	calls := func(addr string) string {
		return "module \"m\" {\n  source  = \"" + addr + "\"\n  version = \"1.0.0\"\n}\n"
	}
	ops := &slowModuleOps{
		files: map[string]map[string]string{
			slow:   {"main.tf": calls(nested)},
			quick:  {"main.tf": calls(deeper)},
			nested: {"main.tf": "# none\n"},
			deeper: {"main.tf": "# none\n"},
		},
		slow:     map[string]bool{slow: true},
		fallback: time.Minute, // far past the timeout: the slow package comes at it
	}
	dir := t.TempDir()
	spec := moduleSpec(t, dir, slow, quick)
	r := &syncRun{cfg: syncConfig{Config: settings.Config{DataDir: dir}}, ops: ops, out: io.Discard, status: io.Discard, now: time.Now}
	// The quick module's package is unpacked and its configuration read
	// within the timeout: milliseconds of work, which a loaded machine
	// may stretch well past 50 ms (the slow one takes the whole timeout).
	r.cfg.ModuleTimeout = 2 * time.Second

	res := r.syncModules(context.Background(), spec)
	t.Logf("asked %v; failures %q", ops.asked, res.failures)
	if slices.Contains(ops.asked, nested) {
		t.Errorf("sync followed the calls of a package read after its --module-timeout: asked for %s", nested)
	}
	if !slices.Contains(ops.asked, deeper) {
		t.Errorf("sync did not follow the calls of a package read in time: %s not asked for", deeper)
	}
	if len(res.failures) != 1 || !strings.Contains(res.failures[0], "acme/slow/aws") || !strings.Contains(res.failures[0], "--module-timeout (2s)") {
		t.Errorf("failures %q, want one naming the slow module and --module-timeout", res.failures)
	}
}

// moduleSpec is the sync manifest, written in dir and loaded, that asks
// for version 1.0.0 of each of modules.
func moduleSpec(t *testing.T, dir string, modules ...string) *manifest.Spec {
	t.Helper()
	var body strings.Builder
	for _, m := range modules {
		body.WriteString("module \"" + m + "\" {\n  versions = [\"1.0.0\"]\n}\n")
	}
	path := filepath.Join(dir, "sync.hcl")
	if err := os.WriteFile(path, []byte(body.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// interruptingModuleOps is slowModuleOps whose UnpackModule is
// interrupted as it starts, as the operator's Ctrl-C does (interrupt,
// the cancel of sync's signal context, which gives its cause), and
// answers as the engine does to a caller gone: with ctx.Err().
type interruptingModuleOps struct {
	slowModuleOps
	interrupt func()
}

func (o *interruptingModuleOps) UnpackModule(ctx context.Context, _ addrs.Module, _, _ string) (admin.Module, error) {
	o.interrupt()
	<-ctx.Done()
	return admin.Module{}, fmt.Errorf("waiting for the origin: %w", ctx.Err())
}

// TestSyncModuleInterruptedBySignal: a sync interrupted by SIGINT or
// SIGTERM (whose context's cause names the signal) while a module
// package is fetched counts that module as not synced, not as failed:
// it prints no "failed:" line naming the signal, and says it was
// interrupted, as for a provider's archive.
func TestSyncModuleInterruptedBySignal(t *testing.T) {
	const m = "registry.terraform.io/acme/m/aws"
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ops := &interruptingModuleOps{
		slowModuleOps: slowModuleOps{files: map[string]map[string]string{m: {"main.tf": "# none\n"}}},
		interrupt:     func() { cancel(errors.New("interrupt signal received")) }, // as signal.NotifyContext does
	}
	dir := t.TempDir()
	spec := moduleSpec(t, dir, m)
	var out, status bytes.Buffer
	r := &syncRun{cfg: syncConfig{Config: settings.Config{DataDir: dir}}, ops: ops, out: &out, status: &status, now: time.Now}
	r.cfg.ModuleTimeout = time.Minute
	if r.runProviders(ctx, spec) {
		t.Errorf("an interrupted sync succeeded")
	}
	printed := out.String() + status.String()
	t.Logf("printed:\n%s", printed)
	if strings.Contains(printed, "failed:") || strings.Contains(printed, "signal received") {
		t.Errorf("an interrupt was reported as a failure of the module")
	}
	if !strings.Contains(printed, "sync interrupted") {
		t.Errorf("sync did not say it was interrupted")
	}
}

// scratchCheckingModuleOps is slowModuleOps whose UnpackModule, once it
// has written the package's files, does what the next start on the data
// directory does after a sync killed at that moment (removeModuleScratch),
// and notes whether the directory the package was written in survived it.
type scratchCheckingModuleOps struct {
	slowModuleOps
	dataDir string
	left    []string // what the removal left of the package's directory
}

func (o *scratchCheckingModuleOps) UnpackModule(ctx context.Context, m addrs.Module, version, dir string) (admin.Module, error) {
	if _, err := o.slowModuleOps.UnpackModule(ctx, m, version, dir); err != nil {
		return admin.Module{}, err
	}
	if err := removeModuleScratch(o.dataDir, discardLogger()); err != nil {
		return admin.Module{}, err
	}
	for d := dir; d != o.dataDir && d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			o.left = append(o.left, d)
		}
	}
	return admin.Module{}, errors.New("stopped here")
}

// TestSyncModuleScratchRemovedAfterKill: the directory a sync unpacks a
// module package into, in the data directory, is one the next start on
// that directory removes when the sync was killed (SIGKILL, the OOM
// killer) before removing it itself: a package's files, up to
// --module-max-tree-bytes, are not left there for good.
func TestSyncModuleScratchRemovedAfterKill(t *testing.T) {
	const m = "registry.terraform.io/acme/m/aws"
	dir := t.TempDir()
	dataDir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	ops := &scratchCheckingModuleOps{
		slowModuleOps: slowModuleOps{files: map[string]map[string]string{m: {"main.tf": "# none\n"}}},
		dataDir:       dataDir,
	}
	spec := moduleSpec(t, dir, m)
	r := &syncRun{cfg: syncConfig{Config: settings.Config{DataDir: dataDir}}, ops: ops, out: io.Discard, status: io.Discard, now: time.Now}
	r.cfg.ModuleTimeout = time.Minute
	r.syncModules(context.Background(), spec)
	if len(ops.left) > 0 {
		t.Errorf("what a killed sync left in the data directory survives the next start: %v", ops.left)
	}
}

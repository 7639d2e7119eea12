package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/manifest"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
)

// cutCLIOps is sync's engine for CLI releases, interrupted: the first
// archive is being fetched when the operator presses Ctrl-C (cancel), and
// what is asked after that ends with the context.
type cutCLIOps struct {
	engineOps
	cancel context.CancelFunc
	asked  int
}

func (o *cutCLIOps) CLIVersions(ctx context.Context, _ admin.CLIRequest) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []string{"1.5.7", "1.6.0"}, nil
}

// Held: the stand-in's policy holds nothing back.
func (o *cutCLIOps) Held(ctx context.Context, _ admin.PolicyRequest) ([]unsigned.Version, error) {
	return nil, ctx.Err()
}

func (o *cutCLIOps) EnsureCLI(ctx context.Context, _ admin.CLIRequest) (admin.CLIEnsured, error) {
	o.asked++
	o.cancel()
	<-ctx.Done()
	return admin.CLIEnsured{}, ctx.Err()
}

// TestSyncInterruptedDuringCLIs: a sync interrupted while it fetches a
// CLI release archive says what it says when interrupted while fetching
// provider archives: interrupted, nothing failed (the next run fetches
// the rest), exit status 1; not a "failed:" line per archive it did not
// get to, nor an admin call for each of them after the interrupt.
func TestSyncInterruptedDuringCLIs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sync.hcl")
	src := "platforms = [\"linux_amd64\", \"darwin_arm64\"]\ncli \"terraform\" {\n  versions = [\">= 1.5\"]\n}\ncli \"tofu\" {\n  versions = [\">= 1.5\"]\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := resolvePlatforms(spec, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ops := &cutCLIOps{cancel: cancel}
	var out strings.Builder
	r := &syncRun{cfg: syncConfig{Config: settings.Config{DataDir: dir}, Parallel: 4}, ops: ops, out: &out, status: &out, now: time.Now}
	ok := r.run(ctx, spec)
	t.Logf("output:\n%s", out.String())
	if ok {
		t.Error("an interrupted sync reports success")
	}
	if strings.Contains(out.String(), "failed:") || strings.Contains(out.String(), "context canceled") {
		t.Error("an interrupted sync reports the CLI archives it did not get to as failed")
	}
	if !strings.Contains(out.String(), "sync interrupted") {
		t.Error("the sync does not say it was interrupted")
	}
	if ops.asked != 1 {
		t.Errorf("%d CLI archives asked for, want 1: the sync went on after the interrupt", ops.asked)
	}
}

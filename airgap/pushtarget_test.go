package airgap

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/ocitest"
)

// push.sh REGISTRY/PREFIX/, the target written with a trailing slash (as
// a URL or a path often is), pushes under REGISTRY/PREFIX as without it:
// not to REGISTRY/PREFIX//REPOSITORY, a name no registry takes, which
// failed every tag.
func TestPushScriptTargetWithTrailingSlash(t *testing.T) {
	reg := ocitest.StartRegistry(t)
	engine, p := cachedNetAndTarball(t)
	side, names := ociLayoutParts(t, engine)
	out := filepath.Join(t.TempDir(), "layout")
	if sum, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { t.Log(s) }); err != nil || sum.Tags == 0 {
		t.Fatalf("export: %+v, %v", sum, err)
	}
	for _, target := range []string{reg.Host() + "/tofu/", reg.Host() + "/tofu//", reg.Host() + "/"} {
		prefix := strings.TrimRight(strings.TrimPrefix(target, reg.Host()), "/")
		output, err := runPush(t, out, target, reg)
		if err != nil {
			t.Errorf("sh push.sh %s: %v\n%s", target, err, output)
			continue
		}
		repo := strings.TrimPrefix(prefix+"/"+names.Provider(p), "/")
		if !tagged(t, reg, repo, "1.0.0") {
			t.Errorf("sh push.sh %s: %s:1.0.0 not in the registry\n%s", target, repo, output)
		}
	}
}

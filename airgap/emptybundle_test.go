package airgap

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestEmptyBundleImports: the empty bundle an export of everything from
// an empty cache writes on purpose (a signed manifest listing nothing,
// exit status 0) imports as what it is, nothing, without an error, in a
// directory and a tar file: a pipeline carrying a mirror's cache across
// the gap does not fail on the other side while the cache is still
// empty. An input with no manifest and nothing in it is still refused.
func TestEmptyBundleImports(t *testing.T) {
	ctx := context.Background()
	empty := newEngine(t, enginetest.StartOrigin(t, fakeorigin.Options{}))
	key := newKey(t, "exporter")
	for _, name := range []string{"out", "out.tar.gz"} {
		out := filepath.Join(t.TempDir(), name)
		if _, err := Export(ctx, empty, servedBy(t, empty, nil), nil, Selection{}, out, key, func(string) {}); err != nil {
			t.Fatalf("export of an empty cache to %s: %v", name, err)
		}
		var reports []string
		sum, err := Import(ctx, newEngine(t, nil), out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}, ScratchDir: t.TempDir()},
			func(s string) { reports = append(reports, s) })
		if err != nil || sum.Failed != 0 || sum.Imported != 0 {
			t.Errorf("import of an empty bundle (%s): %+v, %v, reports %q; want nothing imported and no error", name, sum, err, reports)
		}
	}
	if _, err := Import(ctx, newEngine(t, nil), t.TempDir(), ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}, ScratchDir: t.TempDir()}, func(string) {}); err == nil {
		t.Error("import of an empty directory without manifest: no error")
	}
}

// TestEmptyBundleUntrustedSaysWhy: the empty bundle of an empty cache,
// imported where its signer is not trusted (no --trusted-export-keys, or
// another key), is refused naming the manifest's signer and the setting
// that would trust it, not as an input that "holds no provider packages",
// which sent the operator looking for a broken bundle.
func TestEmptyBundleUntrustedSaysWhy(t *testing.T) {
	ctx := context.Background()
	empty := newEngine(t, enginetest.StartOrigin(t, fakeorigin.Options{}))
	key := newKey(t, "exporter")
	out := filepath.Join(t.TempDir(), "out.tar.gz")
	if _, err := Export(ctx, empty, servedBy(t, empty, nil), nil, Selection{}, out, key, func(string) {}); err != nil {
		t.Fatalf("export of an empty cache: %v", err)
	}
	for name, trust := range map[string]Trust{
		"no export key trusted": {},
		"another key trusted":   {ExportKeys: publicOf(t, newKey(t, "other"))},
	} {
		_, err := Import(ctx, newEngine(t, nil), out, ImportOptions{Trust: trust, ScratchDir: t.TempDir()}, func(string) {})
		if err == nil || !strings.Contains(err.Error(), "--trusted-export-keys") || !strings.Contains(err.Error(), "tfmirror-manifest.json is signed by key") {
			t.Errorf("%s: import of an empty bundle: %v; want it refused, saying the manifest's signer is not trusted (--trusted-export-keys)", name, err)
		}
	}
}
